"""rhea (Node.js AMQP 1.0 client) against filtex-broker.

``node/interop_rhea.js`` builds its filter set with rhea's own helpers
(``rhea.filter.selector``, ``rhea.types.wrap_described``, ``rhea.types.described``)
and prints what rhea saw as JSON. Needs ``node`` and ``npm ci --prefix tests/interop/node``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .interop_support import BrokerAddress

NODE_DIR = Path(__file__).resolve().parent / "node"
SCRIPT = NODE_DIR / "interop_rhea.js"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (apt-get install nodejs, or Node 18+)")
    if not (NODE_DIR / "node_modules" / "rhea" / "package.json").is_file():
        pytest.skip("the rhea package is not installed: run "
                    "`npm ci --prefix tests/interop/node` (needs npm and the npm registry)")
    return node


@pytest.fixture(scope="module")
def rhea_run(interop_broker: BrokerAddress) -> dict[str, Any]:
    node = _node()
    done = subprocess.run(
        [node, str(SCRIPT), interop_broker.host, str(interop_broker.port), "rhea-shapes"],
        capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"rhea script failed ({done.returncode}): {done.stderr}"
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_rhea_sees_the_filter_capabilities(rhea_run: dict[str, Any]) -> None:
    assert {"AMQP_FILTEX_SQL_V1_0", "AMQP_FILTEX_PROP_V1_0", "APACHE.ORG:SELECTOR",
            "APACHE.ORG:JMS_FILTERS"} <= set(rhea_run["offered_capabilities"])


def test_rhea_filter_set_delivers_only_matches(rhea_run: dict[str, Any]) -> None:
    # jms-selector colour = 'red', sql size > 2, application-properties shape=circle,
    # properties subject prefix "order.": only shapes 1 and 5 pass all four.
    assert rhea_run["filtered"] == [1, 5]
    assert rhea_run["filter_echoed"] == ["big", "circles", "jms-selector", "orders"]


def test_rhea_non_matching_messages_stay_queued(rhea_run: dict[str, Any]) -> None:
    assert rhea_run["rest"] == [0, 2, 3, 4]


def test_rhea_reports_the_refused_attach(rhea_run: dict[str, Any]) -> None:
    refusal = rhea_run["refusal"]
    assert refusal["source_on_attach"] is None, "the reply attach must carry a null source"
    error = refusal["error"]
    assert error["condition"] == "amqp:invalid-field"
    assert "filter 'broken' (amqp:sql-filter)" in error["description"]
    assert "line 1, column 10" in error["description"]
    assert error["info"] == {"field": "filter"}
