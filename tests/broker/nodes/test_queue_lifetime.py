"""A queue's priorities, expiries and scheduled deliveries, without sockets, on a clock the test
moves: AMQP 1.0 part 3 §3.2.1 (header priority: higher first, FIFO within one; header ttl) and
§3.2.4 (absolute-expiry-time); x-opt-delivery-time as Artemis reads it."""

from __future__ import annotations

import random

import pytest
from proton import symbol, ubyte, uint

from filtex_broker.nodes.budget import MemoryBudget
from filtex_broker.nodes.deadlines import Deadlines
from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.lifetime import COMMON, Lifetime
from filtex_broker.nodes.node import NodeLimits
from filtex_broker.nodes.queue import Queue
from filtex_broker.nodes.registry import Registry
from filtex_proton.amqp import Section, encode_message
from filtex_proton.amqp.message import RawMessageView
from filtex_proton.plugin import FilterMessage
from tests.broker.nodes.fakes import FakeConsumer

NOW = 1_800_000_000_000


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _queue(clock: Clock, budget: MemoryBudget | None = None) -> Queue:
    return Queue("q", NodeLimits(10**6, 10**9), budget=budget, deadlines=Deadlines(clock))


def _put(queue: Queue, n: int, priority: int = 4, expires: int | None = None,
         visible: int | None = None) -> Entry:
    lifetime = Lifetime(expires, visible, priority)
    entry = Entry(b"%d" % n, lifetime=COMMON if lifetime == COMMON else lifetime)
    queue.put(entry)
    return entry


def _consistent(queue: Queue) -> None:
    entries = queue.entries()
    assert queue.count == len(entries) + queue.held_back()
    assert queue.ready == sum(1 for e in entries if e.owner is None)


# -- priority -------------------------------------------------------------------------------


def test_higher_priority_first_fifo_within_one(clock: Clock) -> None:
    queue = _queue(clock)
    for n, priority in enumerate([1, 1, 9, 4, 9, 0, 4]):
        _put(queue, n, priority)
    consumer = FakeConsumer(queue, credit=10, settle=True)
    queue.dispatch()
    assert consumer.got == [2, 4, 3, 6, 0, 1, 5]
    assert queue._lanes == {} and queue.count == 0  # the lanes go with their last entry
    _consistent(queue)


def test_priority_among_what_the_filter_admits(clock: Clock) -> None:
    queue = _queue(clock)
    for n, priority in enumerate([9, 1, 9, 7, 4, 1]):
        _put(queue, n, priority)
    picky = FakeConsumer(queue, credit=10, wanted={1, 2, 4, 5}, settle=True)
    queue.dispatch()
    assert picky.got == [2, 4, 1, 5]
    assert queue.count == 2  # 0 and 3: nobody wants them, they stay
    _consistent(queue)


def test_competing_consumers_take_turns_in_priority_order(clock: Clock) -> None:
    queue = _queue(clock)
    for n, priority in enumerate([0, 5, 9, 5, 0, 9]):
        _put(queue, n, priority)
    a = FakeConsumer(queue, credit=10, settle=True)
    b = FakeConsumer(queue, credit=10, settle=True)
    queue.dispatch()
    assert sorted(a.got + b.got) == list(range(6))
    assert {a.got[0], b.got[0]} == {2, 5}  # the two priority-9 messages go first
    assert [n for n in [2, 5, 1, 3, 0, 4] if n in a.got] == a.got  # each in priority order
    assert [n for n in [2, 5, 1, 3, 0, 4] if n in b.got] == b.got


def test_a_returned_message_keeps_its_place_in_its_priority(clock: Clock) -> None:
    queue = _queue(clock)
    for n, priority in enumerate([9, 9, 4]):
        _put(queue, n, priority)
    first = FakeConsumer(queue, credit=1)
    queue.dispatch()
    assert first.got == [0]
    second = FakeConsumer(queue, credit=0, settle=True)
    first.closed = True
    queue.remove_consumer(first)  # type: ignore[arg-type]
    queue.requeue(first.held[0])
    queue.dispatch_returned()
    second.credit = 10
    queue.dispatch_to(second)  # type: ignore[arg-type]
    assert second.got == [0, 1, 2]
    _consistent(queue)


def test_credit_one_at_a_time_keeps_the_order(clock: Clock) -> None:
    """The usual prefetch of 1: each credit scans again from every priority's cursor."""
    queue = _queue(clock)
    consumer = FakeConsumer(queue, credit=0, settle=True)
    order = list(range(40))
    priorities = [random.Random(7).randrange(10) for _ in order]
    for n in order:
        _put(queue, n, priorities[n])
    for _ in order:
        consumer.credit = 1
        queue.dispatch_to(consumer)  # type: ignore[arg-type]
    assert consumer.got == sorted(order, key=lambda n: (-priorities[n], n))


def test_a_new_higher_priority_message_overtakes_the_backlog(clock: Clock) -> None:
    queue = _queue(clock)
    consumer = FakeConsumer(queue, credit=0, settle=True)
    for n in range(3):
        _put(queue, n)
    _put(queue, 3, priority=8)
    consumer.credit = 2
    queue.dispatch_to(consumer)  # type: ignore[arg-type]
    assert consumer.got == [3, 0]


def test_compaction_in_a_lane_keeps_order_and_cursors(clock: Clock) -> None:
    queue = _queue(clock)
    consumer = FakeConsumer(queue, credit=0, settle=True)
    for n in range(3000):
        _put(queue, n, priority=6)
    consumer.credit = 2500
    queue.dispatch_to(consumer)  # type: ignore[arg-type]  # settles: holes, then compaction
    assert len(queue._lanes[6].slots) < 3000
    _put(queue, 5000, priority=6)
    consumer.credit = 1000
    queue.dispatch_to(consumer)  # type: ignore[arg-type]
    assert consumer.got == [*range(3000), 5000]
    assert queue._lanes == {}


def test_a_browser_sees_priority_order(clock: Clock) -> None:
    queue = _queue(clock)
    for n, priority in enumerate([2, 8, 4]):
        _put(queue, n, priority)
    browser = FakeConsumer(queue, credit=10, browse=True)
    queue.dispatch()
    assert browser.got == [1, 2, 0]
    assert queue.count == 3


# -- expiry ---------------------------------------------------------------------------------


def test_an_expired_message_leaves_at_its_deadline_and_is_never_delivered(
        clock: Clock) -> None:
    budget = MemoryBudget()
    queue = _queue(clock, budget)
    expired: list[Entry] = []
    queue.on_expired = lambda entry, where: expired.append(entry)
    _put(queue, 0, expires=NOW + 100)
    _put(queue, 1)
    clock.now += 150
    browser = FakeConsumer(queue, credit=10, browse=True)
    queue.dispatch()
    consumer = FakeConsumer(queue, credit=10, settle=True)
    queue.dispatch()
    assert consumer.got == [1] and browser.got == [1]  # expired: not even browsed
    assert queue.count == 1 and expired == []  # still held until the deadlines run
    queue.deadlines.run()
    assert [e.data for e in expired] == [b"0"]
    assert queue.count == 0 and queue.expired == 1 and budget.accounted == 0
    _consistent(queue)


def test_expiry_while_delivered_then_released(clock: Clock) -> None:
    queue = _queue(clock)
    expired: list[Entry] = []
    queue.on_expired = lambda entry, where: expired.append(entry)
    _put(queue, 0, expires=NOW + 100)
    first = FakeConsumer(queue, credit=1)
    queue.dispatch()
    clock.now += 200
    queue.deadlines.run()
    assert expired == [] and queue.count == 1  # its consumer has it
    first.closed = True
    queue.remove_consumer(first)  # type: ignore[arg-type]
    queue.requeue(first.held[0])
    queue.dispatch_returned()
    second = FakeConsumer(queue, credit=10, settle=True)
    queue.dispatch()
    assert second.got == []
    queue.deadlines.run()
    assert [e.data for e in expired] == [b"0"] and queue.count == 0
    _consistent(queue)


def test_a_message_offered_on_arrival_after_its_expiry_is_not_delivered(clock: Clock) -> None:
    queue = _queue(clock)
    consumer = FakeConsumer(queue, credit=10, settle=True)
    _put(queue, 0, expires=NOW - 1)  # absolute-expiry-time in the past
    _put(queue, 1, expires=NOW + 10)
    assert consumer.got == [1]
    queue.deadlines.run()
    assert queue.count == 0 and queue.expired == 1


def test_the_deadline_heap_stays_bounded_when_timed_messages_are_consumed(
        clock: Clock) -> None:
    queue = _queue(clock)
    consumer = FakeConsumer(queue, credit=10**6, settle=True)
    for n in range(20_000):
        _put(queue, n, expires=NOW + 86_400_000)  # a day's ttl, consumed at once
    assert len(consumer.got) == 20_000
    assert len(queue.deadlines) <= 2 * 1024 + 1024


# -- scheduled delivery -------------------------------------------------------------------


def test_a_scheduled_message_is_held_until_its_time(clock: Clock) -> None:
    budget = MemoryBudget()
    queue = _queue(clock, budget)
    consumer = FakeConsumer(queue, credit=10)  # settles nothing: the browser sees its messages
    browser = FakeConsumer(queue, credit=10, browse=True)
    _put(queue, 0, visible=NOW + 300)
    _put(queue, 1, visible=NOW + 200, priority=7)
    _put(queue, 2)
    assert consumer.got == [2] and browser.got == [2]
    assert queue.count == 3 and queue.held_back() == 2 and budget.accounted > 0
    clock.now += 250
    queue.deadlines.run()
    assert consumer.got == [2, 1]
    clock.now += 100
    queue.deadlines.run()
    assert consumer.got == [2, 1, 0] and browser.got == [2, 1, 0]
    assert queue.held_back() == 0
    for entry in consumer.held:
        queue.remove(entry)
    assert queue.count == 0 and budget.accounted == 0


def test_a_held_message_that_expires_first_is_never_delivered(clock: Clock) -> None:
    queue = _queue(clock)
    consumer = FakeConsumer(queue, credit=10, settle=True)
    _put(queue, 0, visible=NOW + 300, expires=NOW + 100)
    clock.now += 400
    queue.deadlines.run()
    assert consumer.got == [] and queue.count == 0 and queue.expired == 1


def test_destroying_a_queue_gives_back_its_held_and_lane_entries(clock: Clock) -> None:
    budget = MemoryBudget()
    queue = _queue(clock, budget)
    held = _put(queue, 0, visible=NOW + 300)
    _put(queue, 1, priority=9)
    _put(queue, 2)
    queue.destroy()
    assert budget.accounted == 0 and queue.count == 0
    clock.now += 400
    queue.deadlines.run()  # the held entry's moment: void
    assert held.pos == -1


# -- through the registry: dead letters ---------------------------------------------------


def _message(**header: object) -> FilterMessage:
    return FilterMessage(encode_message(header=header or None, body="b",
                                        properties={"message-id": "m"}))


@pytest.mark.parametrize("dead_letters", ["DLQ", ""])
def test_an_expired_message_is_dead_lettered_with_its_reason_or_dropped(
        dead_letters: str) -> None:
    registry = Registry(NodeLimits(1000, 10**9), dead_letters)
    clock = Clock()
    registry.deadlines.clock = clock
    queue = registry.node("orders")
    queue.publish(_message(ttl=uint(100), priority=ubyte(7)))
    queue.publish(_message())
    clock.now = 10**13  # far past any arrival
    registry.deadlines.run()
    assert registry.expired == {"orders": 1}
    assert queue.depth() == 1
    if not dead_letters:
        assert "DLQ" not in registry.nodes
        return
    dlq = registry.nodes["DLQ"]
    assert isinstance(dlq, Queue)
    [dead] = dlq.entries()
    view = RawMessageView(dead.data)
    annotations = view.section(Section.MESSAGE_ANNOTATIONS)
    assert annotations is not None
    assert annotations[symbol("x-opt-dead-letter-reason")] == "expired"
    assert annotations[symbol("x-opt-dead-letter-node")] == "orders"
    assert view.field(Section.PROPERTIES, "message-id") == "m"
    assert dead.lifetime.expires_ms is None and dead.lifetime.priority == 7
    registry.deadlines.run()
    assert dlq.depth() == 1  # a dead letter never expires again
