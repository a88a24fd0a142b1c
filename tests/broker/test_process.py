"""The broker as users run it: the console script, signals, bad input, capabilities, relay."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from proton import Delivery, symbol
from proton.utils import ConnectionClosed

from filtex_proton.amqp.message import encode_message

from .broker_clients import (
    TIMEOUT,
    RunningBroker,
    bodies,
    connect,
    message,
    nothing_more,
    send,
    send_raw,
)

REPO = Path(__file__).resolve().parents[2]

FILTER_CAPABILITIES = {
    "AMQP_FILTEX_SQL_V1_0", "AMQP_FILTEX_PROP_V1_0", "AMQP_FILTEX_GROUP_V1_0",
    "AMQP_FILTEX_ALL_V1_0", "APACHE.ORG:SELECTOR", "APACHE.ORG:NO_LOCAL",
    "APACHE.ORG:JMS_FILTERS", "APACHE.ORG:LOGIC_FILTERS",
    "APACHE.ORG:LEGACY_AMQP_EXCHANGE_FILTERS",
}


def test_open_offers_every_filter_capability_and_anonymous_relay(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    offered = {str(c) for c in conn.conn.remote_offered_capabilities}
    assert FILTER_CAPABILITIES | {"ANONYMOUS-RELAY"} <= offered
    receiver = conn.create_receiver("q")
    source = receiver.link.remote_source.capabilities
    source.rewind()
    source.next()
    assert {str(c) for c in source.get_object().elements} >= FILTER_CAPABILITIES
    conn.close()


def test_malformed_message_is_rejected_and_the_broker_goes_on(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    sender = conn.create_sender("q")
    for junk in (b"\x00\x53\x77", b"not an amqp message", b"\x00\x53\x75\xa0\xff", b""):
        outcome = send_raw(conn, sender, junk)
        assert outcome.remote_state == Delivery.REJECTED
        assert outcome.remote.condition.name == "amqp:decode-error"
    send(sender, message("fine"))
    assert bodies(conn.create_receiver("q"), 1) == ["fine"]
    conn.close()


def test_anonymous_relay_routes_by_properties_to(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    relay = conn.create_sender(None)
    assert relay.link.remote_target.address is None
    outcome = send_raw(conn, relay, encode_message(properties={"to": "orders"}, body="o1"))
    assert outcome.remote_state == Delivery.ACCEPTED
    lost = send_raw(conn, relay, encode_message(body="nowhere"))
    assert lost.remote_state == Delivery.REJECTED
    assert lost.remote.condition.name == "amqp:not-found"
    orders = conn.create_receiver("orders")
    assert bodies(orders, 1) == ["o1"]
    assert nothing_more(conn, orders)
    conn.close()


def test_messages_are_forwarded_as_the_bytes_that_arrived(broker: RunningBroker) -> None:
    from .broker_clients import raw_receiver, wait_received

    conn = connect(broker.url)
    data = encode_message(
        header={"durable": True}, message_annotations={"x-opt-a": 1},
        properties={"subject": "s"}, application_properties={"k": 1}, body=b"\x00" * 300,
        body_kind="data", footer={"sig": "abc"},
    )
    send_raw(conn, conn.create_sender("q"), data)
    _, handler = raw_receiver(conn, "q", credit=1)
    (received, _), = wait_received(conn, handler, 1)
    assert received == data
    conn.close()


# -- the console script ------------------------------------------------------------------


def _start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-m", "filtex_broker", "--listen", "127.0.0.1:0", "--ready-file",
         str(ready),
         *extra],
        cwd=REPO, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + TIMEOUT
    while not ready.exists():  # polling a file the broker writes atomically once bound
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the broker did not start"
        time.sleep(0.02)
    return proc, ready.read_text().split()[0]


@pytest.fixture
def process(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc, url = _start(tmp_path)
    yield proc, url
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_broker_cleanly(
    process: tuple[subprocess.Popen[str], str], signum: int
) -> None:
    proc, url = process
    conn = connect(url)
    send(conn.create_sender("q"), message("x"))
    proc.send_signal(signum)
    with pytest.raises(ConnectionClosed) as closed:
        conn.wait(lambda: False, timeout=TIMEOUT)
    assert "amqp:connection:forced" in str(closed.value)
    assert proc.wait(timeout=TIMEOUT) == 0
    assert proc.stderr is not None
    log = proc.stderr.read()
    assert "listening on 127.0.0.1:" in log
    assert "broker stopped" in log


def test_idle_broker_stops_on_sigterm(process: tuple[subprocess.Popen[str], str]) -> None:
    proc, _ = process
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=TIMEOUT) == 0


def test_logs_connections_links_and_refusals(process: tuple[subprocess.Popen[str], str]) -> None:
    from .broker_clients import refusal_of, sql

    proc, url = process
    conn = connect(url)
    conn.create_receiver("q")
    refusal_of(conn, "q", sql("a = = 1"), name="bad")
    conn.close()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=TIMEOUT) == 0
    assert proc.stderr is not None
    log = proc.stderr.read()
    assert "INFO filtex.broker: connection 1 opened" in log
    assert "consumer" in log and "attached to queue 'q'" in log
    assert "WARNING filtex: refused link 'bad'" in log


def test_help_has_an_example() -> None:
    out = subprocess.run([sys.executable, "-m", "filtex_broker", "--help"], cwd=REPO,
                         capture_output=True, text=True, check=True, timeout=TIMEOUT).stdout
    assert "example:" in out and "--listen" in out and "--max-sql-length" in out


def test_bad_configuration_exits_2(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "filtex_broker", "--listen", "nowhere"],
                            cwd=REPO,
                            capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert result.returncode == 2
    assert "HOST:PORT" in result.stderr


def test_port_in_use_exits_1(process: tuple[subprocess.Popen[str], str]) -> None:
    _, url = process
    result = subprocess.run([sys.executable, "-m", "filtex_broker", "--listen", url], cwd=REPO,
                            capture_output=True, text=True, timeout=TIMEOUT, check=False,
                            env={**os.environ, "FILTEX_SHUTDOWN_GRACE": "1"})
    assert result.returncode == 1
    assert "cannot run" in result.stderr


def test_console_script_is_declared() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert 'filtex-broker = "filtex_broker.__main__:main"' in text


def test_symbol_capabilities_are_symbols(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    assert all(isinstance(c, symbol) for c in conn.conn.remote_offered_capabilities)
    conn.close()
