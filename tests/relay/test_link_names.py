"""Relay mode: the upstream links' names (``filtex_broker.relay.link_names``), on Proton's own
link objects, without sockets. Over real upstreams: ``tests/integration/test_artemis_relay.py``
(clients sharing link names, a durable subscription attached again at once) and the Qpid JMS
scenarios through the relay (``tests/jms/test_jms_relay.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Connection, Handler, Link, Session

from filtex_broker.relay.link_names import DETACH_WAIT_MAX, DetachWait, UpstreamLinkNames


def a_consumer() -> Any:
    """A waiting consumer, as the names module sees one: a key to open again."""
    return object()


class Names:
    """An ``UpstreamLinkNames`` whose timers and reopened consumers are recorded."""

    def __init__(self) -> None:
        self.timers: list[tuple[float, Any]] = []
        self.reopened: list[object] = []
        self.names = UpstreamLinkNames(self._schedule, self.reopened.append)

    def _schedule(self, delay: float, handler: Handler) -> bool:
        self.timers.append((delay, handler))
        return True


def attached(session: Session, name: str, names: UpstreamLinkNames, *,
             consumer: bool = True) -> Link:
    link = session.receiver(name) if consumer else session.sender(name)
    link.open()
    names.hold(link, until_session_ends=consumer)
    return link


def going(names: UpstreamLinkNames) -> Session:
    """A durable subscription's link, detached by the relay, which ends its session."""
    session = Connection().session()
    attached(session, "c:sub@relay", names).detach()
    names.session_ending(session)
    return session


def test_a_name_taken_gets_the_first_free_number() -> None:
    names = Names().names
    session = Connection().session()
    assert names.free_name("orders@relay") == "orders@relay"
    attached(session, "orders@relay", names, consumer=False)
    assert names.free_name("orders@relay") == "orders@relay#2"
    attached(session, "orders@relay#2", names, consumer=False)
    third = attached(session, "orders@relay#3", names, consumer=False)
    assert names.free_name("orders@relay") == "orders@relay#4"
    third.close()
    names.link_closed(third)  # a producer's name is free once the upstream closed it too
    assert names.free_name("orders@relay") == "orders@relay#3"


def test_a_durable_subscription_waits_for_its_old_links_session_to_end() -> None:
    recorder = Names()
    names = recorder.names
    connection = Connection()
    old_session = connection.session()
    old = attached(old_session, "c:sub@relay", names)
    again = a_consumer()
    assert not names.must_wait(again, "c:sub@relay")  # still live
    old.detach()  # the client went: the relay detached the subscription's link
    names.session_ending(old_session)  # and ends its session
    assert names.must_wait(again, "c:sub@relay")
    assert [delay for delay, _ in recorder.timers] == [DETACH_WAIT_MAX]
    names.link_closed(old)  # the upstream answered the detach: its consumer may still be there
    assert recorder.reopened == []
    names.session_ended(old_session)  # it answered the session's end: the consumer is gone
    assert recorder.reopened == [again]
    assert names.free_name("c:sub@relay") == "c:sub@relay"
    _, timer = recorder.timers[0]
    timer.on_timer_task(None)  # too late: nothing waits any more
    assert recorder.reopened == [again]


def test_a_wait_the_upstream_never_answers_ends_after_the_longest_wait(
        caplog: pytest.LogCaptureFixture) -> None:
    recorder = Names()
    names = recorder.names
    going(names)
    first, second = a_consumer(), a_consumer()
    assert names.must_wait(first, "c:sub@relay")
    assert names.must_wait(second, "c:sub@relay")
    assert len(recorder.timers) == 1, "one timer per name"
    timer = recorder.timers[0][1]
    assert isinstance(timer, DetachWait)
    with caplog.at_level("WARNING", logger="filtex.broker.relay"):
        timer.on_timer_task(None)  # type: ignore[arg-type]
    assert recorder.reopened == [first, second]
    assert [r.getMessage() for r in caplog.records] == [
        "upstream link 'c:sub@relay': the upstream has not ended the session of the "
        "previous link of that name after 5.0 s; attaching anyway"]


def test_a_consumer_that_goes_while_waiting_is_not_opened() -> None:
    recorder = Names()
    names = recorder.names
    session = going(names)
    gone, stays = a_consumer(), a_consumer()
    names.must_wait(gone, "c:sub@relay")
    names.must_wait(stays, "c:sub@relay")
    names.forget(gone)
    names.forget(gone)  # twice: nothing to forget the second time
    names.session_ended(session)
    assert recorder.reopened == [stays]


def test_a_lost_connection_frees_every_name_and_wait() -> None:
    recorder = Names()
    names = recorder.names
    going(names)
    names.must_wait(a_consumer(), "c:sub@relay")
    names.clear()
    assert names.free_name("c:sub@relay") == "c:sub@relay"
    assert not names.must_wait(a_consumer(), "c:sub@relay")
    recorder.timers[0][1].on_timer_task(None)
    assert recorder.reopened == [], "the reconnect opens them, not the old timer"
