"""Spec §7.2: a producer whose messages make consumers' filters fail is logged, then closed.

The broker's door check rejects every message a filter could fail to read,
so the error is induced by :func:`failing_filters`: every SQL filter
raises on a message with the application property ``poison``. Real clients over
real sockets throughout.
"""

from __future__ import annotations

import logging

import pytest
from proton import Delivery
from proton.utils import ConnectionClosed

from filtex_broker.error_rate import InducedErrors
from filtex_proton.amqp.message import encode_message

from .broker_clients import (
    POISON,
    BrokerFactory,
    bodies,
    connect,
    failing_filters,
    message,
    nothing_more,
    raw_receiver,
    send,
    send_raw,
    sql,
    wait_received,
)

EVALUATED = "a = 'x' OR n >= 0"
"""Evaluated for the poisoned messages (their ``n`` is >= 0): the node matcher makes the
poisoned messages candidates of this link, so its filter runs and fails. (A filter the index
rules out, such as ``a = 'x'`` alone, is never evaluated for them, so it cannot fail on them:
docs/PLUGIN.md, what a link's counters mean.)"""

CLOSE = {"max_evaluation_errors_per_second": 1.0, "evaluation_error_interval": 60.0,
         "evaluation_error_action": "close"}
"""More than 60 errors in a minute closes the producing connection."""


@pytest.fixture(autouse=True)
def _failing_filters(monkeypatch: pytest.MonkeyPatch) -> None:
    failing_filters(monkeypatch)


def poisoned(n: int) -> bytes:
    """A well-formed message on which every SQL filter fails (:func:`failing_filters`)."""
    return encode_message(application_properties={"a": "AAA", "n": n, POISON: True})


def test_a_producer_inducing_errors_is_closed_and_nothing_is_lost(
    broker_factory: BrokerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    broker = broker_factory(**CLOSE)
    consumers = connect(broker.url)
    filtered = consumers.create_receiver("q", credit=100, options=sql(EVALUATED))
    good = connect(broker.url)
    good_sender = good.create_sender("q")
    send(good_sender, message("before", a="x"))
    assert bodies(filtered, 1) == ["before"]

    bad = connect(broker.url)
    bad_sender = bad.create_sender("q")
    accepted = 0
    with caplog.at_level(logging.WARNING, logger="filtex.broker"), \
            pytest.raises(ConnectionClosed) as closed:
        for n in range(500):
            outcome = send_raw(bad, bad_sender, poisoned(n))
            assert outcome.remote_state == Delivery.ACCEPTED
            accepted += 1
    condition = closed.value.connection.remote_condition
    assert condition.name == "amqp:resource-limit-exceeded"
    assert "filter evaluation errors" in condition.description
    assert 60 <= accepted < 500
    assert broker.broker.induced_errors.closed == 1
    warnings = [r.getMessage() for r in caplog.records if "event=induced-errors" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once per interval, however many more errors follow
    assert "action=close" in warnings[0]
    closes = [r.getMessage() for r in caplog.records if "event=connection-closed" in r.getMessage()]
    assert len(closes) == 1 and "reason=induced-errors" in closes[0]

    # The other connections are unaffected: the good producer and the consumer carry on.
    send(good_sender, message("after", a="x"))
    assert bodies(filtered, 1) == ["after"]
    assert nothing_more(consumers, filtered)
    # Nothing is lost: every poisoned message the broker accepted is still there, in order.
    everything, handler = raw_receiver(consumers, "q", name="everything")
    received = wait_received(consumers, handler, accepted, flow=1000, link=everything.link)
    assert nothing_more(consumers, everything)
    stored = [data for data, _ in received]
    assert stored[:accepted] == [poisoned(n) for n in range(accepted)]
    assert len(stored) <= accepted + 1  # the delivery in flight at the close, maybe
    good.close()
    consumers.close()
    bad.close()


def test_action_log_keeps_the_connection(
    broker_factory: BrokerFactory, caplog: pytest.LogCaptureFixture
) -> None:
    broker = broker_factory(**(CLOSE | {"evaluation_error_action": "log"}))
    consumers = connect(broker.url)
    filtered = consumers.create_receiver("q", credit=100, options=sql(EVALUATED))
    bad = connect(broker.url)
    sender = bad.create_sender("q")
    with caplog.at_level(logging.WARNING, logger="filtex.broker"):
        for n in range(100):
            assert send_raw(bad, sender, poisoned(n)).remote_state == Delivery.ACCEPTED
        send(sender, message("still here", a="x"))  # the connection is still open
    assert bodies(filtered, 1) == ["still here"]
    logged = [r.getMessage() for r in caplog.records if "event=induced-errors" in r.getMessage()]
    assert len(logged) == 1 and "action=log" in logged[0]
    assert broker.broker.induced_errors.closed == 0
    assert broker.broker.induced_errors.total() == 100
    bad.close()
    consumers.close()


def test_below_the_rate_nothing_happens(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(**CLOSE)
    consumers = connect(broker.url)
    filtered = consumers.create_receiver("q", credit=100, options=sql(EVALUATED))
    producer = connect(broker.url)
    sender = producer.create_sender("q")
    for n in range(60):  # exactly the limit: 60 in the window is allowed
        assert send_raw(producer, sender, poisoned(n)).remote_state == Delivery.ACCEPTED
    send(sender, message("fine", a="x"))
    assert bodies(filtered, 1) == ["fine"]
    assert broker.broker.induced_errors.closed == 0
    producer.close()
    consumers.close()


def test_the_default_counts_but_never_acts(broker_factory: BrokerFactory) -> None:
    broker = broker_factory()
    consumers = connect(broker.url)
    consumers.create_receiver("q", credit=100, options=sql(EVALUATED))
    producer = connect(broker.url)
    sender = producer.create_sender("q")
    for n in range(200):
        send_raw(producer, sender, poisoned(n))
    send(sender, message("fine", a="y"))
    assert broker.broker.induced_errors.total() == 200
    assert broker.broker.induced_errors.closed == 0
    producer.close()
    consumers.close()


# ---------------------------------------------------------------- the counting rules, alone


class Clock:
    """A clock the test moves by hand (the rule is about windows, not about real time)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_windows_reset_and_reports_are_once_per_interval() -> None:
    clock, closed = Clock(), []
    errors = InducedErrors(max_per_second=0.5, interval=10.0, action="close",
                           close=lambda origin, text: closed.append(origin), clock=clock)
    for _ in range(5):
        errors(7)  # 5 errors: the limit (0.5/s over 10 s)
    assert closed == []
    clock.now += 10.0  # a new window: the count starts again
    for _ in range(5):
        errors(7)
    assert closed == []
    errors(7)
    assert closed == [7]
    for _ in range(50):
        errors(7)  # same interval: acted on already
    assert closed == [7]
    clock.now += 10.0
    for _ in range(6):
        errors(7)
    assert closed == [7, 7]
    errors(None)  # unknown origin: nobody to blame
    assert errors.total() == 5 + 6 + 50 + 6 and errors.errors_of(7) == errors.total()
    errors.forget(7)
    assert errors.errors_of(7) == 0 and errors.total() == 67  # totals never go down


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="log or close"):
        InducedErrors(max_per_second=1, interval=1, action="ban", close=lambda o, t: None)
    with pytest.raises(ValueError, match="positive"):
        InducedErrors(max_per_second=1, interval=0, action="log", close=lambda o, t: None)



def test_the_settings_come_from_flags_environment_and_are_checked() -> None:
    from filtex_broker.config import ConfigError, load_config

    config = load_config(["--max-evaluation-errors-per-second", "5",
                          "--evaluation-error-action", "close"],
                         env={"FILTEX_EVALUATION_ERROR_INTERVAL": "2.5"})
    assert (config.max_evaluation_errors_per_second, config.evaluation_error_action,
            config.evaluation_error_interval) == (5.0, "close", 2.5)
    with pytest.raises(ConfigError, match="log or close"):
        load_config(["--evaluation-error-action", "ban"], env={})
    with pytest.raises(ConfigError, match="positive"):
        load_config(["--evaluation-error-interval", "0"], env={})
    with pytest.raises(ConfigError, match="negative"):
        load_config(["--max-evaluation-errors-per-second", "-1"], env={})
