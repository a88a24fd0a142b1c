"""Queue, browse, topic and dynamic node semantics over the wire."""

from __future__ import annotations

from proton import Terminus
from proton.reactor import Copy, DurableSubscription

from ..broker_clients import (
    TIMEOUT,
    RunningBroker,
    TopicOption,
    bodies,
    connect,
    decoded_bodies,
    is_null_source,
    message,
    nothing_more,
    raw_receiver,
    refusal_of,
    send,
    sql,
    wait_received,
)


def test_queue_keeps_messages_until_consumed_in_order(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    send(conn.create_sender("q"), *(message(f"m{i}") for i in range(10)))
    receiver = conn.create_receiver("q")
    assert bodies(receiver, 10) == [f"m{i}" for i in range(10)]
    assert nothing_more(conn, receiver)
    conn.close()


def test_competing_consumers_each_message_once(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    a = conn.create_receiver("q", credit=0, name="a")
    b = conn.create_receiver("q", credit=0, name="b")
    send(conn.create_sender("q"), *(message(i) for i in range(20)))
    a.flow(10)
    b.flow(10)
    got = bodies(a, 10) + bodies(b, 10)
    assert sorted(got) == list(range(20))
    assert nothing_more(conn, a) and nothing_more(conn, b)
    conn.close()


def test_competing_filtered_consumers_get_only_their_matches(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    red = conn.create_receiver("q", name="red", options=sql("colour = 'red'"))
    blue = conn.create_receiver("q", name="blue", options=sql("colour = 'blue'"))
    send(conn.create_sender("q"),
         *(message(i, colour="red" if i % 2 else "blue") for i in range(10)))
    assert bodies(red, 5) == [1, 3, 5, 7, 9]
    assert bodies(blue, 5) == [0, 2, 4, 6, 8]
    assert nothing_more(conn, red) and nothing_more(conn, blue)
    conn.close()


def test_unmatched_messages_wait_for_a_later_consumer(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    red = conn.create_receiver("q", name="red", options=sql("colour = 'red'"))
    send(conn.create_sender("q"),
         message("g1", colour="green"), message("r1", colour="red"), message("g2", colour="green"))
    assert bodies(red, 1) == ["r1"]
    assert nothing_more(conn, red)
    green = conn.create_receiver("q", name="green", options=sql("colour = 'green'"))
    assert bodies(green, 2) == ["g1", "g2"]
    anyone = conn.create_receiver("q", name="anyone")
    assert nothing_more(conn, anyone)
    conn.close()


def test_browser_sees_without_consuming(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    send(conn.create_sender("q"), *(message(i, even=i % 2 == 0) for i in range(6)))
    browser = conn.create_receiver("q", name="browser", options=Copy())
    assert browser.link.remote_source.distribution_mode == Terminus.DIST_MODE_COPY
    assert bodies(browser, 6) == list(range(6))
    filtered = conn.create_receiver("q", name="filtered", options=[Copy(), sql("even")])
    assert bodies(filtered, 3) == [0, 2, 4]
    consumer = conn.create_receiver("q")
    assert bodies(consumer, 6) == list(range(6))
    conn.close()


def test_topic_gives_each_subscriber_a_copy_of_what_it_matches(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    everything = conn.create_receiver("news", name="all", options=TopicOption())
    sport = conn.create_receiver("news", name="sport",
                                 options=[TopicOption(), sql("section = 'sport'")])
    sender = conn.create_sender("news", options=TopicOption())
    send(sender, message("a", section="sport"), message("b", section="arts"),
         message("c", section="sport"))
    assert bodies(everything, 3) == ["a", "b", "c"]
    assert bodies(sport, 2) == ["a", "c"]
    assert nothing_more(conn, sport)
    late = conn.create_receiver("news", name="late", options=TopicOption())
    assert nothing_more(conn, late)  # a topic keeps nothing for subscribers yet to come
    conn.close()


def test_durable_subscription_keeps_messages_while_detached(broker: RunningBroker) -> None:
    durable = [TopicOption(), DurableSubscription()]
    publisher = connect(broker.url)
    sender = publisher.create_sender("prices", options=TopicOption())
    # Qpid JMS names a durable subscription by container-id and link name.
    conn = connect(broker.url, container_id="jms-client-1")
    sub = conn.create_receiver("prices", name="my-sub", options=durable)
    send(sender, message(1))
    assert bodies(sub, 1) == [1]
    conn.close()  # gone without unsubscribing: the subscription stays and collects
    send(sender, message(2), message(3))

    back = connect(broker.url, container_id="jms-client-1")
    sub, handler = raw_receiver(back, "prices", name="my-sub", options=durable, credit=10)
    assert decoded_bodies(wait_received(back, handler, 2)) == [2, 3]
    sub.link.detach()  # detached, not closed: still subscribed
    back.wait(lambda: "detach (not closed)" in handler.events, timeout=TIMEOUT)
    send(sender, message(4))

    # Looked up by name alone (null source), as Qpid JMS does to unsubscribe.
    found = back.create_receiver(None, name="my-sub")
    assert found.link.remote_source.address == "prices"
    assert bodies(found, 1) == [4]
    found.close()  # detach closed=true: unsubscribe
    send(sender, message(5))
    fresh = back.create_receiver("prices", name="my-sub", options=durable)
    assert nothing_more(back, fresh)
    back.close()
    publisher.close()


def test_unknown_durable_subscription_is_refused(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    handler, link = refusal_of(conn, None, name="no-such-sub")
    assert handler.events == ["attach", "detach"]
    assert is_null_source(handler)
    assert link.remote_condition.name == "amqp:not-found"
    conn.close()


def test_dynamic_source_gets_a_fresh_address(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    receiver = conn.create_receiver(None, dynamic=True)
    address = receiver.link.remote_source.address
    assert address and address.startswith("dynamic/")
    send(conn.create_sender(address), message("reply"))
    assert bodies(receiver, 1) == ["reply"]
    conn.close()
