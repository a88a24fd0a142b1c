"""One filtered-delivery and refusal suite, run against both users of the plugin.

``filtex-broker`` and ``examples/plugin_broker.py`` (an ordinary proton queue
broker plus the plugin) must behave the same on the wire: that is the proof
that filtering lives in the plugin, not in our broker. Each broker
runs as its own process on an ephemeral port; the clients are real
python-qpid-proton clients over real sockets.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import Data, Described, Message, Timeout, symbol, ubyte, ulong
from proton.reactor import Filter
from proton.utils import BlockingConnection, BlockingReceiver, LinkDetached

from filtex_proton.amqp.message import encode_message

ROOT = Path(__file__).resolve().parent.parent
START_TIMEOUT = 60.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_accepting(url: str, process: subprocess.Popen[bytes]) -> None:
    host, port = url.rsplit(":", 1)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        assert process.poll() is None, "the broker exited during start-up"
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)  # polling for readiness, not synchronising on time
    raise AssertionError(f"nothing listening on {url}")


def _start_example(tmp_path: Path) -> tuple[str, subprocess.Popen[bytes]]:
    url = f"127.0.0.1:{_free_port()}"
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "plugin_broker.py"), "--listen", url],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_until_accepting(url, process)
    return url, process


def _start_filtex_broker(tmp_path: Path) -> tuple[str, subprocess.Popen[bytes]]:
    ready = tmp_path / "ready"
    process = subprocess.Popen(
        [sys.executable, "-m", "filtex_broker", "--listen", "127.0.0.1:0", "--ready-file",
         str(ready)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + START_TIMEOUT
    while not ready.exists():
        assert process.poll() is None, "filtex-broker exited during start-up"
        assert time.monotonic() < deadline, "filtex-broker did not become ready"
        time.sleep(0.05)
    return ready.read_text().split()[0], process


@pytest.fixture(params=["filtex-broker", "plugin-example"], scope="module")
def broker_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[str]:
    start = _start_filtex_broker if request.param == "filtex-broker" else _start_example
    url, process = start(tmp_path_factory.mktemp(request.param))
    yield url
    process.terminate()
    assert process.wait(timeout=60) == 0, "the broker did not exit cleanly on SIGTERM"


@pytest.fixture
def connection(broker_url: str) -> Iterator[BlockingConnection]:
    conn = BlockingConnection(broker_url, timeout=30)
    yield conn
    conn.close()


def _address() -> str:
    return f"q-{uuid.uuid4().hex[:8]}"


def _sql(text: str) -> Described:
    return Described(symbol("amqp:sql-filter"), text)


def _receiver(conn: BlockingConnection, address: str, filters: dict[str, Any]) -> BlockingReceiver:
    options = Filter({symbol(k): v for k, v in filters.items()}) if filters else None
    return conn.create_receiver(address, name=f"r-{uuid.uuid4().hex[:8]}", options=options)


def _send_raw(conn: BlockingConnection, address: str, payloads: list[bytes]) -> None:
    """Send exact bytes (absent fields stay absent) and wait until each is settled."""
    sender = conn.create_sender(address)
    link = sender.link
    deliveries = []
    for payload in payloads:
        delivery = link.delivery(uuid.uuid4().bytes)
        link.stream(payload)
        link.advance()
        deliveries.append(delivery)
    conn.wait(lambda: all(d.remote_state for d in deliveries), msg="deliveries not settled")
    for delivery in deliveries:
        delivery.settle()
    sender.close()


def _send(conn: BlockingConnection, address: str, messages: list[Message]) -> None:
    _send_raw(conn, address, [bytes(m.encode()) for m in messages])


def _bodies(receiver: BlockingReceiver, count: int) -> list[Any]:
    bodies = []
    for _ in range(count):
        bodies.append(receiver.receive(timeout=30).body)
        receiver.accept()
    return bodies


def _nothing_more(receiver: BlockingReceiver) -> bool:
    try:
        receiver.receive(timeout=0.5)
    except Timeout:
        return True
    return False


def _refusal(conn: BlockingConnection, filters: dict[str, Any]) -> Any:
    with pytest.raises(LinkDetached) as caught:
        _receiver(conn, _address(), filters)
    link = caught.value.link
    assert link.remote_source.type == 0, "the refusing attach must carry a null source"
    return link.remote_condition


# -- capabilities --------------------------------------------------------------

def test_open_offers_the_filter_capabilities(connection: BlockingConnection) -> None:
    offered = {str(c) for c in connection.conn.remote_offered_capabilities or []}
    assert {"AMQP_FILTEX_SQL_V1_0", "AMQP_FILTEX_PROP_V1_0", "AMQP_FILTEX_GROUP_V1_0",
            "APACHE.ORG:SELECTOR", "APACHE.ORG:NO_LOCAL", "APACHE.ORG:JMS_FILTERS",
            "APACHE.ORG:LEGACY_AMQP_EXCHANGE_FILTERS"} <= offered


# -- filtered delivery -----------------------------------------------------------

def test_sql_filter_delivers_only_matches_and_keeps_the_rest(
        connection: BlockingConnection) -> None:
    address = _address()
    _send(connection, address, [
        Message(body=i, subject="odd" if i % 2 else "even", properties={"n": i}) for i in range(6)])
    odd = _receiver(connection, address, {"odd": _sql("p.subject = 'odd' AND n > 1")})
    assert _bodies(odd, 2) == [3, 5]
    assert _nothing_more(odd)
    rest = _receiver(connection, address, {})
    assert _bodies(rest, 4) == [0, 1, 2, 4]


def test_attach_reply_echoes_the_filters_in_place(connection: BlockingConnection) -> None:
    filters = {"sql": _sql("a = 1"),
               "props": Described(symbol("amqp:application-properties-filter"), {"b": "x"})}
    receiver = _receiver(connection, _address(), filters)
    echoed: Data = receiver.link.remote_source.filter
    echoed.rewind()
    echoed.next()
    assert echoed.get_object() == {symbol(k): v for k, v in filters.items()}


@pytest.mark.parametrize(("name", "described", "wanted"), [
    ("§4.2.5 application-properties filter",
     Described(symbol("amqp:application-properties-filter"), {"region": "EU"}), [1]),
    ("§4.2.4 properties filter with &p: prefix",
     Described(symbol("amqp:properties-filter"), {symbol("subject"): "&p:order."}), [1, 2]),
    ("§3.2 any-filter", Described(symbol("amqp:any-filter"), [
        _sql("region = 'US'"), Described(symbol("amqp:true-filter"), False)]), [0, 1, 2]),
    ("§5.2 false-filter", Described(symbol("amqp:false-filter"), True), []),
    ("apache JMS selector (numeric descriptor)",
     Described(ulong(0x0000468C00000004), "JMSPriority > 4 AND region = 'US'"), [0, 2]),
    ("apache legacy topic binding",
     Described(symbol("apache.org:legacy-amqp-topic-binding:string"), "order.*"), [1, 2]),
])
def test_each_filter_type_filters(connection: BlockingConnection, name: str,
                                  described: Described, wanted: list[int]) -> None:
    address = _address()
    _send(connection, address, [
        Message(body=0, subject="invoice", priority=9, properties={"region": "US"}),
        Message(body=1, subject="order.created", priority=1, properties={"region": "EU"}),
        Message(body=2, subject="order.sent", priority=7, properties={"region": "US"}),
    ])
    receiver = _receiver(connection, address, {"f": described})
    # exactly these; their order is the broker's (filtex-broker: higher priority first)
    assert sorted(_bodies(receiver, len(wanted))) == wanted
    assert _nothing_more(receiver)


def test_absent_fields_stay_absent_over_the_wire(connection: BlockingConnection) -> None:
    address = _address()
    _send_raw(connection, address, [
        encode_message(properties={"message-id": "no-header"}, body=1),
        encode_message(header={"priority": ubyte(4)}, properties={"subject": "s"}, body=2),
        encode_message(footer={"checksum": "abc"}, body=3),
    ])
    has_priority = _receiver(connection, address,
                             {"f": _sql("EXISTS(h.priority) AND h.priority = 4")})
    assert _bodies(has_priority, 1) == [2]
    defaulted = _receiver(connection, address, {"f": _sql("h.priority = 4 AND p.subject IS NULL")})
    assert _bodies(defaulted, 1) == [1]
    footer = _receiver(connection, address, {
        "f": Described(symbol("amqp:footer-filter"), {symbol("checksum"): "abc"})})
    assert _bodies(footer, 1) == [3]


# -- refusals (spec §2.3) ----------------------------------------------------------

def test_syntax_error_is_refused_with_key_and_position(connection: BlockingConnection) -> None:
    condition = _refusal(connection, {"big-eu": _sql("region = 'EU' AND amount >")})
    assert condition.name == "amqp:invalid-field"
    assert "filter 'big-eu' (amqp:sql-filter)" in condition.description
    assert "line 1, column 27" in condition.description
    assert condition.info == {symbol("field"): symbol("filter")}


def test_unknown_descriptor_is_refused(connection: BlockingConnection) -> None:
    condition = _refusal(connection, {"x": Described(symbol("acme:magic-filter"), "?")})
    assert condition.name == "amqp:invalid-field"
    assert "'x'" in condition.description
    assert "acme:magic-filter" in condition.description


def test_property_filter_type_mismatch_is_refused(connection: BlockingConnection) -> None:
    condition = _refusal(connection, {
        "p": Described(symbol("amqp:header-filter"), {symbol("priority"): "high"})})
    assert condition.name == "amqp:invalid-field"
    assert "priority" in condition.description


def test_limit_hit_is_refused_with_a_generic_text(connection: BlockingConnection) -> None:
    condition = _refusal(connection, {"long": _sql(" OR ".join(["a = 1"] * 3000))})
    assert condition.name == "amqp:invalid-field"
    assert "limit" in condition.description
    assert "a = 1" not in condition.description  # the reason stays in the server log (§7.1)


def test_a_refusal_leaves_the_connection_and_other_links_working(
        connection: BlockingConnection) -> None:
    address = _address()
    good = _receiver(connection, address, {"f": _sql("n = 1")})
    _refusal(connection, {"bad": _sql("n = = 1")})
    _send(connection, address, [Message(body="x", properties={"n": 1})])
    assert _bodies(good, 1) == ["x"]
