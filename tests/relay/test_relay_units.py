"""Relay mode: configuration and the selector pushdown's choice of filter (no sockets)."""

from __future__ import annotations

import pytest
from proton import Data, Described, symbol, ulong

from filtex_broker.config import ConfigError, describe, load_config
from filtex_proton.filterset import decode_filter_set
from filtex_proton.pushdown import client_selector


def _filter_data(entries: dict[symbol, Described]) -> Data:
    data = Data()
    data.put_object(entries)
    return data


def test_upstream_settings_from_flags_env_and_defaults() -> None:
    config = load_config(["--upstream", "amqp://h:5672", "--upstream-user", "u"],
                         env={"FILTEX_UPSTREAM_PASSWORD": "secret",
                              "FILTEX_UPSTREAM_SELECTOR": "never"})
    assert config.upstream == "amqp://h:5672"
    assert config.upstream_user == "u"
    assert config.upstream_password == "secret"
    assert config.upstream_selector == "never"
    assert config.upstream_held == 1000
    assert config.upstream_attach_timeout == 10.0
    assert "secret" not in describe(config)
    assert load_config([], env={}).upstream == ""


@pytest.mark.parametrize(("argv", "text"), [
    (["--upstream", "h:5672"], "not an amqp://"),
    (["--upstream", "amqp://h:1", "--upstream-selector", "sometimes"], "upstream_selector"),
    (["--upstream", "amqp://h:1", "--upstream-attach-timeout", "0"],
     "upstream_attach_timeout must be a positive number of seconds, not 0.0"),
    (["--upstream", "amqp://h:1", "--upstream-attach-timeout", "inf"], "upstream_attach_timeout"),
])
def test_bad_upstream_settings_are_refused(argv: list[str], text: str) -> None:
    with pytest.raises(ConfigError, match=text):
        load_config(argv, env={})


def test_client_selector_finds_a_jms_selector_in_any_form() -> None:
    for descriptor in (symbol("apache.org:selector-filter:string"),
                       symbol("apache.org:jms-selector-filter:string"),
                       ulong(0x0000468C00000004)):
        data = _filter_data({
            symbol("sql"): Described(symbol("amqp:sql-filter"), "a = 1"),
            symbol("sel"): Described(descriptor, "colour = 'red'"),
        })
        assert client_selector(decode_filter_set(data)) == "colour = 'red'"


def test_client_selector_pushes_nothing_else() -> None:
    data = _filter_data({symbol("sql"): Described(symbol("amqp:sql-filter"), "a = 1")})
    assert client_selector(decode_filter_set(data)) is None
    assert client_selector(decode_filter_set(Data())) is None


def test_pushdown_passes_a_clients_own_selector_unchanged() -> None:
    from filtex_proton.pushdown import pushdown

    data = _filter_data({symbol("sel"): Described(symbol("apache.org:selector-filter:string"),
                                                  "colour = 'red' OR n > 2")})
    assert pushdown(decode_filter_set(data)).selector == client_selector(decode_filter_set(data))


def test_pushdown_adds_what_translates_to_the_clients_selector() -> None:
    from filtex_proton.filterset import decode_filter_set
    from filtex_proton.pushdown import pushdown

    data = _filter_data({
        symbol("sel"): Described(symbol("apache.org:selector-filter:string"), "n > 2 OR m = 1"),
        symbol("sql"): Described(symbol("amqp:sql-filter"), "h.priority >= 5 AND EXISTS(x)"),
        symbol("nl"): Described(symbol("apache.org:no-local-filter:list"), []),
    })
    plan = pushdown(decode_filter_set(data))
    assert plan.selector == "(n > 2 OR m = 1) AND JMSPriority >= 5"
    assert plan.pushed == ("sel", "sql")
    assert not plan.exact and len(plan.reasons) == 2


def test_consumers_opened_before_session_ends_are_answered_are_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    # the forced open after SESSION_GRACE_MAX is where RabbitMQ 3.10 may mix up channels:
    # a reconnect that follows it must be told apart from others in the log
    from filtex_broker.relay.session_ends import SessionGrace
    from filtex_broker.relay.upstream import Upstream
    from filtex_broker.settings import BrokerConfig
    from filtex_proton.plugin import FiltexPlugin

    ends = Upstream(BrokerConfig(upstream="amqp://h:1"), FiltexPlugin()).ends
    gone, newcomer = object(), object()  # an ending session; a consumer no longer tracked
    ends.sessions[gone] = None  # type: ignore[assignment]
    ends.waiting[newcomer] = None  # type: ignore[index]
    grace = ends.grace = SessionGrace(ends, force=False)
    with caplog.at_level("WARNING", logger="filtex.broker.relay"):
        ends.open_waiting(grace)  # not forced: waits again (no container: no timer)
        assert not caplog.records and ends.waiting
        grace = ends.grace = SessionGrace(ends, force=True)
        ends.open_waiting(grace)
    assert not ends.waiting
    assert [r.getMessage() for r in caplog.records] == [
        "opening 1 upstream consumer session(s) while 1 session end(s) are unanswered after "
        "0.5 s (RabbitMQ 3.10 may mix up their channels)"]


def test_one_timer_refuses_the_dynamic_attaches_in_deadline_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from proton import Endpoint

    from filtex_broker.relay import deadlines

    class Waiting:
        def __init__(self) -> None:
            self.link = SimpleNamespace(state=Endpoint.LOCAL_UNINIT)
            self.closed = False
            self.refusal: object = None

        def upstream_closed(self, condition: object) -> None:
            self.refusal = condition

    timers: list[float] = []

    def schedule(delay: float, handler: object) -> bool:
        timers.append(delay)
        return True

    now = [100.0]
    monkeypatch.setattr(deadlines.time, "monotonic", lambda: now[0])
    attaches = deadlines.AttachDeadlines(schedule, 10.0)
    first, answered, later = Waiting(), Waiting(), Waiting()
    attaches.answer_by(first)  # type: ignore[arg-type]
    now[0] = 104.0
    attaches.answer_by(answered)  # type: ignore[arg-type]
    attaches.answer_by(later)  # type: ignore[arg-type]
    attaches.answered(answered)  # type: ignore[arg-type]
    assert timers == [10.0]
    now[0] = 110.0
    attaches.expire()
    assert first.refusal is not None and later.refusal is None and timers == [10.0, 4.0]
    now[0] = 114.0
    attaches.expire()
    assert later.refusal is not None and answered.refusal is None and not attaches.awaiting
