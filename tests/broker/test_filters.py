"""Filters over the wire: accepted and echoed, refused as the spec says, and applied right.

Everything here goes through the plugin (filtex_proton.plugin): these tests
check that the broker wires it in correctly, not the filter engine itself.
"""

from __future__ import annotations

from typing import Any

import pytest
from proton import Data, Described, Message, symbol, ubyte, ulong

from .broker_clients import (
    BrokerFactory,
    RunningBroker,
    TopicOption,
    bodies,
    connect,
    decoded_bodies,
    encoded,
    filters,
    is_null_source,
    message,
    nothing_more,
    raw_receiver,
    refusal_of,
    send,
    send_raw,
    sql,
)


def D(descriptor: str, value: Any) -> Described:  # noqa: N802 - reads like the spec
    return Described(symbol(descriptor), value)


ACCEPTED_FILTERS: dict[str, Described] = {
    "sql": D("amqp:sql-filter", "k = 1 AND h.priority > 3"),
    "numeric-descriptor": Described(ulong(0x120), "k = 1"),
    "selector": D("apache.org:selector-filter:string", "k = 1"),
    "jms-selector": D("apache.org:jms-selector-filter:string", "k = 1"),
    "header": D("amqp:header-filter", {symbol("priority"): ubyte(4)}),
    "delivery-annotations": D("amqp:delivery-annotations-filter", {symbol("x-trace"): 1}),
    "message-annotations": D("amqp:message-annotations-filter", {symbol("x-opt-a"): 1}),
    "properties": D("amqp:properties-filter", {symbol("subject"): "&p:news."}),
    "application-properties": D("amqp:application-properties-filter", {"k": 1}),
    "footer": D("amqp:footer-filter", {symbol("sig"): "ok"}),
    "true": D("amqp:true-filter", True),
    "false": D("amqp:false-filter", False),
    "all": D("amqp:all-filter", [D("amqp:true-filter", True), D("amqp:sql-filter", "k = 1")]),
    "any": D("amqp:any-filter", [D("amqp:false-filter", False), D("amqp:true-filter", True)]),
    "not": D("amqp:not-filter", [D("amqp:false-filter", False)]),
    "apache-or": D("apache.org:or-filter:list", [D("amqp:true-filter", True)]),
    "apache-and": D("apache.org:and-filter:list", [D("amqp:true-filter", True)]),
    "apache-not": D("apache.org:not-filter:list", [D("amqp:false-filter", False)]),
    "direct": D("apache.org:legacy-amqp-direct-binding:string", "rk"),
    "topic": D("apache.org:legacy-amqp-topic-binding:string", "a.*"),
    "headers": D("apache.org:legacy-amqp-headers-binding:map", {"x-match": symbol("any"), "k": 1}),
    "no-local": D("apache.org:no-local-filter:list", []),
    "jms-no-local": D("apache.org:jms-no-local-filter:list", "NoLocalFilter{}"),
}


def _echo(link: Any) -> Any:
    data: Data = link.remote_source.filter
    data.rewind()
    return data.get_object() if data.next() is not None else None


@pytest.mark.parametrize("key", sorted(ACCEPTED_FILTERS))
def test_every_filter_type_is_accepted_and_echoed(broker: RunningBroker, key: str) -> None:
    conn = connect(broker.url)
    sent = {symbol(key): ACCEPTED_FILTERS[key]}
    receiver = conn.create_receiver("q", options=filters(sent))
    assert receiver.link.remote_source.address == "q"
    assert _echo(receiver.link) == sent
    conn.close()


def test_a_whole_filter_set_is_echoed_exactly(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    sent = {symbol(k): v for k, v in list(ACCEPTED_FILTERS.items())[:8]}
    receiver = conn.create_receiver("q", options=filters(sent))
    assert _echo(receiver.link) == sent
    conn.close()


def test_no_filters_no_echo(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    receiver = conn.create_receiver("q")
    assert _echo(receiver.link) is None
    conn.close()


# -- refusals (spec §2.3, as Artemis/ActiveMQ/Broker-J do them) ------------------------------


def _refused(broker_url: str, entries: dict[str, Described]) -> tuple[Any, Any]:
    conn = connect(broker_url)
    handler, link = refusal_of(conn, "q", filters(entries), name="refused")
    assert handler.events == ["attach", "detach"], "a null-source attach, then the detach"
    assert is_null_source(handler)
    condition = link.remote_condition
    assert condition.name == "amqp:invalid-field"
    assert condition.info == {symbol("field"): symbol("filter")}
    # The connection and its other links carry on.
    sender = conn.create_sender("q")
    send(sender, message("still here"))
    assert bodies(conn.create_receiver("q", name="after"), 1) == ["still here"]
    conn.close()
    return condition, link


def test_sql_syntax_error_is_refused_with_key_and_position(broker: RunningBroker) -> None:
    condition, _ = _refused(broker.url, {"my-sql": D("amqp:sql-filter", "colour = = 'red'")})
    assert "my-sql" in condition.description
    assert "line 1, column 10" in condition.description


def test_unknown_descriptor_is_refused(broker: RunningBroker) -> None:
    condition, _ = _refused(broker.url, {"odd": D("acme:nonsense-filter", 1)})
    assert "odd" in condition.description
    assert "acme:nonsense-filter" in condition.description


def test_property_type_mismatch_is_refused(broker: RunningBroker) -> None:
    condition, _ = _refused(
        broker.url, {"prio": D("amqp:header-filter", {symbol("priority"): "high"})}
    )
    assert "prio" in condition.description
    assert "priority" in condition.description


def test_limit_hit_is_refused_without_detail(broker_factory: BrokerFactory) -> None:
    from filtex_proton.limits import Limits

    broker = broker_factory(limits=Limits(max_sql_length=20))
    condition, _ = _refused(broker.url, {"long": D("amqp:sql-filter", "k = 1 OR " * 10 + "k = 2")})
    assert "long" in condition.description
    assert "limit" in condition.description


def test_disabled_filter_type_is_neither_offered_nor_accepted(
    broker_factory: BrokerFactory,
) -> None:
    broker = broker_factory(disabled=("AMQP_FILTEX_SQL_V1_0",))
    conn = connect(broker.url)
    offered = {str(c) for c in conn.conn.remote_offered_capabilities}
    assert "AMQP_FILTEX_SQL_V1_0" not in offered and "AMQP_FILTEX_PROP_V1_0" in offered
    conn.close()
    condition, _ = _refused(broker.url, {"s": D("amqp:sql-filter", "k = 1")})
    assert "not enabled" in condition.description


# -- filters applied ----------------------------------------------------------------------


def test_no_local_skips_the_consumers_own_connection(broker: RunningBroker) -> None:
    mine = connect(broker.url)
    theirs = connect(broker.url)
    no_local = filters({"no-local": D("apache.org:no-local-filter:list", [])})
    receiver = mine.create_receiver("chat", options=[TopicOption(), no_local])
    send(mine.create_sender("chat", options=TopicOption()), message("from me"))
    send(theirs.create_sender("chat", options=TopicOption()), message("from them"))
    assert bodies(receiver, 1) == ["from them"]
    assert nothing_more(mine, receiver)
    mine.close()
    theirs.close()


def test_no_local_on_a_queue_leaves_own_messages_for_others(broker: RunningBroker) -> None:
    mine = connect(broker.url)
    theirs = connect(broker.url)
    no_local = filters({"no-local": D("apache.org:no-local-filter:list", [])})
    receiver = mine.create_receiver("q", options=no_local)
    send(mine.create_sender("q"), message("mine"))
    send(theirs.create_sender("q"), message("theirs"))
    assert bodies(receiver, 1) == ["theirs"]
    assert bodies(theirs.create_receiver("q"), 1) == ["mine"]
    mine.close()
    theirs.close()


def test_footer_and_delivery_annotations_filters_over_the_wire(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    sender = conn.create_sender("q")
    for i, (trace, sig) in enumerate([(1, "ok"), (2, "ok"), (1, "bad"), (None, None)]):
        data = encoded(
            delivery_annotations={"x-trace": trace} if trace is not None else None,
            body=i,
            footer={"sig": sig} if sig is not None else None,
        )
        send_raw(conn, sender, data)
    footer = conn.create_receiver(
        "q", name="footer", options=filters({"f": D("amqp:footer-filter", {symbol("sig"): "ok"})})
    )
    assert bodies(footer, 2) == [0, 1]
    traced = conn.create_receiver("q", name="traced", options=filters(
        {"d": D("amqp:delivery-annotations-filter", {symbol("x-trace"): 1})}))
    assert bodies(traced, 1) == [2]
    by_sql = conn.create_receiver("q", name="sql", options=sql("NOT EXISTS(f.sig)"))
    assert bodies(by_sql, 1) == [3]
    conn.close()


def test_absent_and_default_fields_are_told_apart_over_the_wire(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    sender = conn.create_sender("q")
    send_raw(conn, sender, encoded(body="no header"))
    send_raw(conn, sender, encoded(header={"priority": 4}, body="priority 4"))
    send_raw(conn, sender, encoded(properties={"subject": ""}, body="empty subject"))

    def browser(name: str, option: Any) -> list[Any]:
        from proton.reactor import Copy

        receiver, handler = raw_receiver(conn, "q", name=name, options=[Copy(), option],
                                         credit=10)
        assert nothing_more(conn, receiver)
        return decoded_bodies(handler.received)

    assert browser("exists", sql("EXISTS(h.priority)")) == ["priority 4"]
    assert browser("absent", sql("NOT EXISTS(h.priority)")) == ["no header", "empty subject"]
    assert browser("default", sql("h.priority = 4")) == ["no header", "priority 4",
                                                          "empty subject"]
    assert browser("header-filter", filters(
        {"h": D("amqp:header-filter", {symbol("priority"): ubyte(4)})}
    )) == ["no header", "priority 4", "empty subject"]
    assert browser("subject", sql("EXISTS(p.subject)")) == ["empty subject"]
    conn.close()


def test_evaluation_error_makes_a_message_ineligible_not_lost(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    send(conn.create_sender("q"), message("text", n="abc"), message("number", n=5))
    picky = conn.create_receiver("q", name="picky", options=sql("n + 1 > 2"))
    assert bodies(picky, 1) == ["number"]
    assert nothing_more(conn, picky)
    assert bodies(conn.create_receiver("q", name="anyone"), 1) == ["text"]
    conn.close()


def test_message_decoded_by_proton_matches_what_was_sent(broker: RunningBroker) -> None:
    conn = connect(broker.url)
    m = Message(body={"a": 1}, subject="news.sport", properties={"k": 1}, priority=7)
    send(conn.create_sender("q"), m)
    receiver = conn.create_receiver("q", options=sql("p.subject LIKE 'news.%' AND k = 1"))
    got = receiver.receive(timeout=30)
    receiver.accept()
    assert (got.body, got.subject, got.priority) == ({"a": 1}, "news.sport", 7)
    conn.close()
