"""The two event loops (broker/loop/): the same broker on each, and the start-up choice.

The fast loop (broker/loop/fast.py) leans on python-qpid-proton's private internals
(broker/loop/proton_internals.py); proton's stock Container is the fallback. Both must
serve the same broker: attach with filters, send, receive, settle, refuse.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from proton import Described, Message, symbol

from filtex_broker.config import BrokerConfig, ConfigError, load_config
from filtex_broker.loop import proton_internals
from filtex_broker.loop.auto import choose_loop, make_container
from filtex_broker.loop.fast import FastContainer
from filtex_broker.loop.stock import StockContainer
from filtex_broker.security.users import hash_password
from filtex_broker.server import Broker

from ..broker_clients import (
    BrokerFactory,
    bodies,
    connect,
    filters,
    is_null_source,
    message,
    nothing_more,
    refusal_of,
    send,
    sql,
)
from ..certs import make_certs

LOOPS = ("fast", "stock")


@pytest.mark.parametrize("loop", LOOPS)
def test_a_broker_on_each_loop(broker_factory: BrokerFactory, loop: str) -> None:
    running = broker_factory(event_loop=loop)
    container = running.broker.container
    assert isinstance(container, FastContainer if loop == "fast" else StockContainer)
    conn = connect(running.url)
    ones = conn.create_receiver("q", options=sql("k = 1"), name="ones")
    sender = conn.create_sender("q")
    send(sender, *(message(f"m{i}", k=i % 3) for i in range(300)))  # each waits for accepted
    assert bodies(ones, 100) == [f"m{i}" for i in range(1, 300, 3)]  # received and settled
    assert nothing_more(conn, ones)  # flow and drain answered by the broker
    rest = conn.create_receiver("q", name="rest")
    got = bodies(rest, 200)
    assert got == [f"m{i}" for i in range(300) if i % 3 != 1]
    assert nothing_more(conn, rest)
    # a bad filter is refused: null source, then amqp:invalid-field
    handler, link = refusal_of(conn, "q", options=sql("k = = 1"), name="bad")
    assert is_null_source(handler)
    assert link.remote_condition is not None
    assert link.remote_condition.name == "amqp:invalid-field"
    # an unsettled message goes back when its consumer detaches, to the next one
    held = conn.create_receiver("q", credit=1, name="held")
    send(sender, message("again", k=2))
    first = held.receive(timeout=30)
    assert first.body == "again"
    held.close()
    assert bodies(rest, 1) == ["again"]
    conn.close()


@pytest.mark.parametrize("loop", LOOPS)
def test_topics_and_rejections_on_each_loop(broker_factory: BrokerFactory, loop: str) -> None:
    running = broker_factory(event_loop=loop)
    conn = connect(running.url)
    sub = conn.create_receiver("t", options=filters(
        {"sql": Described(symbol("amqp:sql-filter"), "colour = 'red'")}))
    dead = conn.create_receiver("DLQ", name="dead")
    sender = conn.create_sender("t")
    send(sender, Message(body="r", properties={"colour": "red"}),
         Message(body="b", properties={"colour": "blue"}))
    got = sub.receive(timeout=30)
    assert got.body == "r"
    sub.reject()
    assert bodies(dead, 1) == ["r"]
    assert nothing_more(conn, sub)
    conn.close()


def test_the_check_passes_on_the_installed_proton() -> None:
    assert proton_internals.engine_problems() == []
    assert proton_internals.check() == []
    assert proton_internals.tested(), (
        f"python-qpid-proton {proton_internals.installed_version()} is not in TESTED_VERSIONS "
        f"{proton_internals.TESTED_VERSIONS}: test it and add it (and widen pyproject's pin)")
    assert choose_loop("auto")[0] == "fast"


@pytest.fixture
def broken_internals(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the installed proton had dropped a private attribute the fast loop reads."""
    attributes = dict(proton_internals.LOOP_ATTRIBUTES)
    attributes["Container"] = (*attributes["Container"], "_gone_in_a_later_release")
    monkeypatch.setattr(proton_internals, "LOOP_ATTRIBUTES", attributes)


@pytest.mark.usefixtures("broken_internals")
def test_a_failing_check_names_what_is_missing_and_the_tested_versions() -> None:
    problems = proton_internals.check()
    assert len(problems) == 1
    assert "Container._gone_in_a_later_release" in problems[0]
    assert f"python-qpid-proton {proton_internals.installed_version()} is installed" \
        in problems[0]
    assert ", ".join(proton_internals.TESTED_VERSIONS) in problems[0]
    with pytest.raises(proton_internals.InternalsError, match="--event-loop fast cannot run"):
        choose_loop("fast")
    assert choose_loop("stock")[0] == "stock"


@pytest.mark.usefixtures("broken_internals")
def test_a_failing_check_falls_back_to_the_stock_loop(
        broker_factory: BrokerFactory, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="filtex.broker"):
        running = broker_factory()  # event_loop auto
        running.broker.ready.wait(30)
    assert isinstance(running.broker.container, StockContainer)
    warning = [r.getMessage() for r in caplog.records if "event loop" in r.getMessage()]
    assert warning and "start-up check failed" in warning[0]
    assert "_gone_in_a_later_release" in warning[0]
    assert ", ".join(proton_internals.TESTED_VERSIONS) in warning[0]
    conn = connect(running.url)
    receiver = conn.create_receiver("q", options=sql("k = 1"))
    send(conn.create_sender("q"), message("no", k=0), message("yes", k=1))
    assert bodies(receiver, 1) == ["yes"]
    conn.close()


def test_an_untested_version_falls_back(monkeypatch: pytest.MonkeyPatch,
                                        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(proton_internals, "installed_version", lambda: "0.99.0")
    loop, why = choose_loop("auto")
    assert loop == "stock"
    assert "0.99.0" in why and ", ".join(proton_internals.TESTED_VERSIONS) in why
    loop, why = choose_loop("fast")  # insisting works, with a warning
    assert loop == "fast" and "not tested" in why
    with caplog.at_level(logging.WARNING, logger="filtex.broker"):
        container = make_container("auto")
    assert isinstance(container, StockContainer)
    assert any("0.99.0" in r.getMessage() for r in caplog.records)


def test_the_setting_in_flags_environment_and_toml(tmp_path: Path) -> None:
    assert load_config([], env={}).event_loop == "auto"
    assert load_config(["--event-loop", "stock"], env={}).event_loop == "stock"
    assert load_config([], env={"FILTEX_EVENT_LOOP": "fast"}).event_loop == "fast"
    toml = tmp_path / "broker.toml"
    toml.write_text('[broker]\nevent_loop = "stock"\n')
    assert load_config(["--config", str(toml)], env={}).event_loop == "stock"
    with pytest.raises(ConfigError, match="event_loop 'quick'"):
        load_config(["--event-loop", "quick"], env={})


def test_sasl_plain_on_the_stock_loop(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    """Secured listeners hand the socket over to proton's own IO handler on the stock loop."""
    users = tmp_path / "users.toml"
    users.write_text(f'[users.alice]\npassword = "{hash_password("pw")}"\n'
                     'send = ["q"]\nreceive = ["q"]\n')
    running = broker_factory(event_loop="stock", users=str(users))
    conn = connect(running.url, user="alice", password="pw", allowed_mechs="PLAIN")
    receiver = conn.create_receiver("q", options=sql("k = 1"))
    send(conn.create_sender("q"), message("no", k=0), message("yes", k=1))
    assert bodies(receiver, 1) == ["yes"]
    conn.close()


def test_tls_listeners_refuse_the_stock_loop(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    config = BrokerConfig(listen=(("127.0.0.1", 0),), event_loop="stock",
                          listen_tls="127.0.0.1:0", tls_cert=str(certs.server.cert),
                          tls_key=str(certs.server.key))
    broker = Broker(config)
    with pytest.raises(RuntimeError, match="TLS listeners need the fast event loop"):
        broker.start_in_thread()


def test_without_the_c_bindings_neither_loop_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(proton_internals, "engine_problems", lambda: ["cproton_ffi.lib.pn_gone"])
    for mode in ("auto", "fast", "stock"):
        with pytest.raises(proton_internals.InternalsError,
                           match=r"with 0\.39\.0, 0\.40\.0; missing: cproton_ffi.lib.pn_gone"):
            choose_loop(mode)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_relay_on_each_loop(broker_factory: BrokerFactory, loop: str) -> None:
    """Relay mode registers upstream links with the loop too (deliveries and flow both ways)."""
    upstream = broker_factory()
    relay = broker_factory(event_loop=loop, upstream=f"amqp://{upstream.url}",
                           container_id="relay")
    conn = connect(relay.url)
    ones = conn.create_receiver("q", options=sql("k = 1"), name="ones")
    sender = conn.create_sender("q", name="in")
    send(sender, *(message(f"m{i}", k=i % 2) for i in range(20)))
    assert bodies(ones, 10) == [f"m{i}" for i in range(1, 20, 2)]
    conn.close()
