"""Nodes dispatch through the node matcher: many filtered links, only candidates evaluated.

Units drive a Queue and a Topic with real compiled filter sets (the plugin's LinkFilter) and
stand-in consumers; the socket test runs a broker with hundreds of idle filtered receivers on one
queue and one topic. Every test checks who got what (the semantics of per-link evaluation) and
that links the index rules out are never evaluated (the point of the matcher).
"""

from __future__ import annotations

import random
from typing import Any

from proton import Described, symbol

from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.node import NodeLimits
from filtex_broker.nodes.queue import MATCHER_FROM, Queue
from filtex_broker.nodes.topic import Topic
from filtex_proton.amqp.message import encode_message
from filtex_proton.plugin import FilterMessage, FiltexPlugin, LinkFilter

from ..broker_clients import TopicOption, connect, raw_receiver, send, sql, wait_received
from ..broker_clients import message as amqp_message

PLUGIN = FiltexPlugin()
LIMITS = NodeLimits(100_000, 10**9)


def link_filter(text: str | None) -> LinkFilter | None:
    if text is None:
        return None
    compiled = PLUGIN.compile({symbol("f"): Described(symbol("amqp:sql-filter"), text)})
    return LinkFilter(compiled, None)


def evaluations(consumer: Stand) -> int:
    return 0 if consumer.filter is None else consumer.filter.filter_set.stats.evaluations


class Stand:
    """What Queue uses of a consumer: credit, cursor, order, filter, send."""

    def __init__(self, queue: Queue, text: str | None, credit: int = 1000,
                 *, settle: bool = True, browse: bool = False) -> None:
        self.queue = queue
        self.credit = credit
        self.cursor = 0
        self.order = 0
        self.closed = False
        self.browse = browse
        self.text = text
        self.filter = link_filter(text)
        self.filter_stats = None if self.filter is None else self.filter.filter_set.stats
        self.settle = settle
        self.got: list[Entry] = []
        queue.add_consumer(self)  # type: ignore[arg-type]

    def send(self, entry: Entry) -> None:
        self.credit -= 1
        self.got.append(entry)
        if self.browse:
            return
        if self.settle:
            self.queue.remove(entry)
        else:
            entry.owner = self  # type: ignore[assignment]


def region_message(region: str, n: int = 0, **more: Any) -> FilterMessage:
    return FilterMessage(encode_message(application_properties={"region": region, "n": n,
                                                                **more}))


def numbers(consumer: Stand) -> list[int]:
    from filtex_proton.amqp.view import Section

    return [e.message.view.field(Section.APPLICATION_PROPERTIES, "n") for e in consumer.got]


def test_idle_filtered_consumers_are_never_evaluated() -> None:
    queue = Queue("q", LIMITS)
    idle = [Stand(queue, f"region = 'never-{k}'") for k in range(1000)]
    busy = [Stand(queue, f"region = 'r{k}'") for k in range(3)]
    for n in range(300):
        queue.publish(region_message(f"r{n % 3}", n))
    for k, consumer in enumerate(busy):
        assert numbers(consumer) == list(range(k, 300, 3))
    assert sum(evaluations(c) for c in idle) == 0
    assert all(queue.matcher.ruled_out(c) == 300 for c in idle)  # type: ignore[arg-type]
    assert queue.count == 0


def test_competing_consumers_share_round_robin_among_those_that_match() -> None:
    queue = Queue("q", LIMITS)
    others = [Stand(queue, "region = 'b'") for _ in range(50)]
    same = [Stand(queue, "region = 'a'") for _ in range(3)]
    everyone = Stand(queue, None)
    for n in range(40):
        queue.publish(region_message("a", n))
    assert [len(c.got) for c in same] + [len(everyone.got)] == [10, 10, 10, 10]
    assert sorted(n for c in [*same, everyone] for n in numbers(c)) == list(range(40))
    assert all(not c.got for c in others)


def test_a_consumer_without_credit_gets_its_messages_when_credit_comes() -> None:
    queue = Queue("q", LIMITS)
    waiting = Stand(queue, "region = 'a'", credit=0)
    Stand(queue, "region = 'b'")
    for n in range(5):
        queue.publish(region_message("a", n))
    assert queue.count == 5 and not waiting.got
    waiting.credit = 3
    queue.dispatch_to(waiting)  # type: ignore[arg-type]
    assert numbers(waiting) == [0, 1, 2]
    waiting.credit = 10
    queue.dispatch_to(waiting)  # type: ignore[arg-type]
    assert numbers(waiting) == [0, 1, 2, 3, 4]


def test_a_consumer_attached_later_evaluates_the_backlog() -> None:
    queue = Queue("q", LIMITS)
    Stand(queue, "region = 'b'")
    for n in range(4):
        queue.publish(region_message("a" if n % 2 else "c", n))
    late = Stand(queue, "region = 'a'")  # not a candidate of anything queued: it evaluates
    queue.dispatch()
    assert numbers(late) == [1, 3]


def test_a_returned_message_is_offered_again_to_whoever_matches_it_now() -> None:
    """delivery-count is part of the header a filter can read: after a redelivery the
    message is indexed again, so a filter that wants redeliveries gets it."""
    queue = Queue("q", LIMITS)
    for k in range(MATCHER_FROM):  # enough filtered consumers for the queue to use its matcher
        Stand(queue, f"region = 'never-{k}'")
    first = Stand(queue, "region = 'a'", settle=False)
    again = Stand(queue, "h.delivery_count = 1")  # indexed: not a candidate at first
    queue.publish(region_message("a", 7))
    assert numbers(first) == [7] and not again.got
    entry = first.got[0]
    from filtex_broker.nodes.rewrites import bump_delivery_count

    data = bump_delivery_count(entry.data)
    queue.resize(entry, data, FilterMessage(data))
    first.closed = True
    queue.remove_consumer(first)  # type: ignore[arg-type]
    queue.requeue(entry)
    queue.dispatch_returned()
    assert numbers(again) == [7]


def test_queue_dispatch_equals_per_link_evaluation_on_random_filters() -> None:
    rng = random.Random(20261125)
    pool = ["region = 'a'", "region IN ('a', 'b')", "n > 50", "n BETWEEN 10 AND 20",
            "region LIKE 'a%'", "region <> 'c'", "n % 7 = 0", "region IS NULL",
            "NOT (region = 'a' OR n < 30)", "tier = 'gold' AND n >= 40", None]
    for _ in range(20):
        queue = Queue("q", LIMITS)
        consumers = [Stand(queue, rng.choice(pool), credit=rng.randint(0, 30))
                     for _ in range(rng.randint(1, 12))]
        sent = []
        for n in range(120):
            more = {"tier": rng.choice(["gold", "silver"])} if rng.random() < 0.5 else {}
            region = rng.choice(["a", "b", "c", "ab"])
            message = (FilterMessage(encode_message(application_properties={"n": n, **more}))
                       if rng.random() < 0.1 else region_message(region, n, **more))
            sent.append(message)
            queue.publish(message)
        delivered = {id(e.data): c for c in consumers for e in c.got}  # entries keep the bytes
        for message in sent:
            fresh = [c for c in consumers if c.text is None or oracle(c.text).matches(message)]
            if id(message.data) in delivered:
                assert delivered[id(message.data)] in fresh
            else:  # kept: nobody who matches it had credit left
                assert all(c.credit == 0 for c in fresh)


_ORACLES: dict[str, LinkFilter] = {}


def oracle(text: str) -> LinkFilter:
    """Per-link evaluation, on a LinkFilter of its own (its counters are not the consumer's)."""
    if text not in _ORACLES:
        compiled = link_filter(text)
        assert compiled is not None
        _ORACLES[text] = compiled
    return _ORACLES[text]


def test_topic_subscriptions_idle_ones_never_evaluated() -> None:
    topic = Topic("t", LIMITS)
    idle = [topic.subscribe(None, link_filter(f"region = 'never-{k}'")) for k in range(1000)]
    wanted = topic.subscribe(None, link_filter("region = 'r1'"))
    everything = topic.subscribe(None, None)
    for n in range(50):
        topic.publish(region_message(f"r{n % 2}", n))
    assert wanted.queue.count == 25 and everything.queue.count == 50
    assert all(s.queue.count == 0 for s in idle)
    assert sum(s.filter.filter_set.stats.evaluations for s in idle if s.filter) == 0


def test_a_durable_subscription_reattached_with_new_filters_is_reindexed() -> None:
    topic = Topic("t", LIMITS)
    for k in range(MATCHER_FROM):  # enough subscriptions for the topic to use its matcher
        topic.subscribe(None, link_filter(f"region = 'never-{k}'"))
    subscription = topic.subscribe(("c", "sub"), link_filter("region = 'a'"))
    topic.publish(region_message("a"))
    subscription.filter = link_filter("region = 'b'")
    topic.publish(region_message("a"))
    topic.publish(region_message("b"))
    assert subscription.queue.count == 2


def test_hundreds_of_idle_filtered_links_on_a_real_broker(broker: Any) -> None:
    """A queue and a topic, 300 idle filtered receivers each (with credit), two that match:
    every message reaches exactly the receiver it should, over real AMQP."""
    conn = connect(broker.url)
    idle = []
    for k in range(300):
        never = sql(f"region = 'never-{k}'")
        idle.append(raw_receiver(conn, "q", credit=10, options=never, name=f"q{k}")[1])
        idle.append(raw_receiver(conn, "t", credit=10, options=[never, TopicOption()],
                                 name=f"t{k}")[1])
    queue_a = raw_receiver(conn, "q", credit=100, options=sql("region = 'a'"), name="qa")
    queue_b = raw_receiver(conn, "q", credit=100, options=sql("region = 'b'"), name="qb")
    topic_a = raw_receiver(conn, "t", credit=100, options=[sql("region = 'a'"), TopicOption()],
                           name="ta")
    sender_q = conn.create_sender("q")
    sender_t = conn.create_sender("t", options=TopicOption())
    for n in range(60):
        region = "a" if n % 3 else "b"
        send(sender_q, amqp_message(n, region=region))
        send(sender_t, amqp_message(n, region=region))
    got_a = wait_received(conn, queue_a[1], 40)
    got_b = wait_received(conn, queue_b[1], 20)
    got_t = wait_received(conn, topic_a[1], 40)
    assert len(got_a) == 40 and len(got_b) == 20 and len(got_t) == 40
    # the sends were accepted after the broker dispatched them, on this same connection:
    # a delivery to an idle receiver would have arrived before the last acceptance
    assert all(not handler.received for handler in idle)
    conn.close()


def test_a_few_filtered_consumers_are_simply_evaluated() -> None:
    """Below MATCHER_FROM filtered consumers the queue does not index: every consumer with
    credit evaluates the message (what a node did before the matcher), with the same result."""
    queue = Queue("q", LIMITS)
    consumers = [Stand(queue, f"region = 'r{k}'") for k in range(MATCHER_FROM - 1)]
    for n in range(30):
        queue.publish(region_message(f"r{n % 3}", n))
    assert [numbers(c) for c in consumers] == [list(range(k, 30, 3)) for k in range(3)]
    assert queue.matcher.stats.messages == 0  # never asked


def test_idle_filtered_browsers_are_never_evaluated() -> None:
    """Browsing (distribution-mode copy) through the browse matcher: each browser sees every
    message it matches, in order, and idle ones evaluate nothing."""
    queue = Queue("q", LIMITS)
    idle = [Stand(queue, f"region = 'never-{k}'", browse=True) for k in range(200)]
    watching = [Stand(queue, f"region = 'r{k}'", browse=True) for k in range(2)]
    everything = Stand(queue, None, browse=True)
    for n in range(20):
        queue.publish(region_message(f"r{n % 2}", n))
    assert [numbers(w) for w in watching] == [list(range(0, 20, 2)), list(range(1, 20, 2))]
    assert numbers(everything) == list(range(20))
    assert sum(evaluations(c) for c in idle) == 0
    assert queue.count == 20  # browsing takes nothing
    late = Stand(queue, "region = 'r1'", browse=True, credit=0)  # attached later: evaluates
    late.credit = 100
    queue.dispatch_to(late)  # type: ignore[arg-type]
    assert numbers(late) == list(range(1, 20, 2))


def _returned_after_a_late_consumer(late_filter: str) -> Stand:
    """A message taken (unsettled) by a consumer; a consumer attaches, with credit, while the
    message is out (it scans: nothing); the first consumer leaves and the message comes back.
    The late consumer, which the matcher did not index for the message."""
    queue = Queue("q", LIMITS)
    for k in range(MATCHER_FROM):
        Stand(queue, f"region = 'never-{k}'")
    first = Stand(queue, "region = 'a'", settle=False)
    queue.publish(region_message("a", 7))
    entry = first.got[0]
    late = Stand(queue, late_filter)
    queue.dispatch_to(late)  # type: ignore[arg-type]
    assert not late.got and evaluations(late) == 0
    first.closed = True
    queue.remove_consumer(first)  # type: ignore[arg-type]
    queue.requeue(entry)
    queue.dispatch_returned()
    return late


def test_a_returned_message_goes_to_a_consumer_that_attached_after_it_arrived() -> None:
    """The matcher named the message's candidates when it arrived; a consumer attached later
    was not among them, yet must be offered the message when it comes back, at once."""
    late = _returned_after_a_late_consumer("region = 'a'")
    assert numbers(late) == [7]


def test_a_late_consumer_that_refused_a_returned_message_does_not_evaluate_it_again() -> None:
    """A returned message is offered to the consumers attached since it arrived too; one that
    says no is ruled out from then on, as a candidate that said no is: its scans skip it."""
    late = _returned_after_a_late_consumer("region = 'a' AND n > 10")
    assert not late.got and evaluations(late) == 1
    assert late.cursor == 0  # the entry is ahead of its cursor again
    late.queue.dispatch_to(late)  # type: ignore[arg-type]
    assert not late.got and evaluations(late) == 1
