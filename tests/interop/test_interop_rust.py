"""fe2o3-amqp (Rust, tokio) against filtex-broker.

``rust/src/main.rs`` (its own crate; Cargo.toml pins the versions, Cargo.lock
the tree) puts each filter on the source with the crate's own
``Source::builder().add_to_filter(key, Described { descriptor, value })`` and
prints what fe2o3-amqp saw as JSON. It is built once into the interop cache
directory, as a debug build without debug info: from scratch that costs about
60 % of a release build's CPU time (about 70 s against 115 s on these 2 cores),
and the program does little. Needs
``cargo`` with Rust 1.85 or later and, the first time, crates.io.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from .interop_support import (
    APPLICATION_PROPERTIES,
    CASES,
    SQL,
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

CRATE = Path(__file__).resolve().parent / "rust"


def _described(descriptor: str | int, value: Any) -> dict[str, Any]:
    """A described value nested in a filter's value (``rust/src/main.rs`` reads this form)."""
    return {"described": [descriptor, value]}


#: What fe2o3-amqp can send and go-amqp cannot: a symbolic descriptor under a key
#: of the client's choice, and group filters, whose members are described values
#: (go-amqp keeps its described type internal).
RUST_CASES = (
    *CASES,
    FilterCase("sql-symbolic-descriptor-own-key",
               (filter_entry("red-and-late", "amqp:sql-filter", "colour = 'red' AND n > 2"),),
               (3, 5)),
    FilterCase("any-filter-of-mixed-descriptors",
               (filter_entry("five-or-blue", 0x101, [
                   _described("amqp:sql-filter", "n = 5"),
                   _described(APPLICATION_PROPERTIES, {"colour": "blue"})]),),
               (0, 2, 4, 5)),
    FilterCase("not-filter",
               (filter_entry("not-blue", "amqp:not-filter", [_described(SQL, "colour = 'blue'")]),),
               (1, 3, 5)),
)


@pytest.fixture(scope="session")
def rust_program() -> Path:
    cargo_home = Path(os.environ.get("CARGO_HOME") or Path.home() / ".cargo")
    cargo = toolchain_or_skip("cargo", ["--version"], (1, 85),
                              "fe2o3-amqp 0.18 needs Rust 1.85+, e.g. from rustup",
                              cargo_home / "bin")
    out = cache_dir("rust")
    env = {**os.environ, "CARGO_TARGET_DIR": str(out / "target")}
    with build_lock(out):
        download_or_skip([cargo, "fetch", "--locked"], CRATE, env, "fe2o3-amqp from crates.io")
        build([cargo, "build", "--locked", "--offline", "--quiet"], CRATE, env)
    return out / "target" / "debug" / "filtered_receive"


@pytest.mark.parametrize("case", RUST_CASES, ids=lambda case: case.name)
def test_fe2o3_receiver_gets_exactly_the_matches(
        rust_program: Path, interop_broker: BrokerAddress, address: str,
        case: FilterCase) -> None:
    assert filtered_receive(rust_program, interop_broker, address, case) == expected(case)


def test_fe2o3_reports_the_refused_attach(rust_program: Path, interop_broker: BrokerAddress,
                                          address: str) -> None:
    bad = json.dumps([filter_entry("broken", SQL, "colour = = 'red'")])
    refused: dict[str, Any] = run_client(rust_program, interop_broker, address, 1, bad)["refused"]
    # fe2o3-amqp sees the null source, detaches, reads the broker's detach and
    # returns its error from attach(); any other error variant fails the program.
    assert refused["type"] == "ReceiverAttachError::RemoteClosedWithError"
    assert refused["condition"] == "amqp:invalid-field"
    assert refused["description"].startswith(
        "filter 'broken' (0x00000000:0x00000120 (amqp:sql-filter)): syntax error")
    assert "line 1, column 10" in refused["description"]
    assert refused["info"] == {"field": "filter"}
    assert "InvalidField" in refused["message"]
