"""github.com/Azure/go-amqp (Go) against filtex-broker.

``go/main.go`` (its own module; go.mod/go.sum pin go-amqp) builds each filter
with the library's own options (``amqp.NewLinkFilter``, ``amqp.NewSelectorFilter``
in ``ReceiverOptions.Filters``) and prints what go-amqp saw as JSON. It is built
once into the interop cache directory (``interop_support.cache_dir``); needs
``go`` and, the first time, the Go module proxy.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from .interop_support import (
    CASES,
    BrokerAddress,
    FilterCase,
    build,
    build_lock,
    cache_dir,
    download_or_skip,
    expected,
    filter_entry,
    filtered_receive,
    run_client,
    toolchain_or_skip,
)

MODULE = Path(__file__).resolve().parent / "go"


@pytest.fixture(scope="session")
def go_program() -> Path:
    go = toolchain_or_skip("go", ["env", "GOVERSION"], (1, 19), "go.mod asks for Go 1.19+",
                           Path("/usr/local/go/bin"))
    out = cache_dir("go")
    env = {**os.environ, "GOFLAGS": "-mod=readonly"}
    with build_lock(out):
        download_or_skip([go, "mod", "download"], MODULE, env,
                         "github.com/Azure/go-amqp from the Go module proxy")
        build([go, "build", "-o", str(out / "filtered_receive"), "."], MODULE, env)
    return out / "filtered_receive"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_go_amqp_receiver_gets_exactly_the_matches(
        go_program: Path, interop_broker: BrokerAddress, address: str, case: FilterCase) -> None:
    assert filtered_receive(go_program, interop_broker, address, case) == expected(case)


def test_go_amqp_reports_the_refused_attach(go_program: Path, interop_broker: BrokerAddress,
                                            address: str) -> None:
    bad = json.dumps([filter_entry("amqp:sql-filter", "amqp:sql-filter", "colour = = 'red'")])
    refused: dict[str, Any] = run_client(go_program, interop_broker, address, 1, bad)["refused"]
    # NewReceiver returns the detach's error itself: an *amqp.Error (an alias of
    # go-amqp's internal encoding.Error), after go-amqp saw the null source and
    # waited for the detach.
    assert refused["type"] == "*encoding.Error"
    assert refused["condition"] == "amqp:invalid-field"
    assert refused["description"].startswith("filter 'amqp:sql-filter' (amqp:sql-filter): "
                                             "syntax error")
    assert "line 1, column 10" in refused["description"]
    assert refused["info"] == {"field": "filter"}
    assert "Condition: amqp:invalid-field" in refused["message"]
