"""Filter sets: decoding from proton.Data and Python values, conjunction, never raising,
counters, the evaluation budget, limits and the attach-reply echo."""

from __future__ import annotations

from typing import Any

import pytest
from proton import Data, Described, symbol, ubyte, ulong

from filtex_proton.amqp.view import DictMessageView
from filtex_proton.errors import GENERIC_LIMIT_TEXT, FilterError
from filtex_proton.filters.base import EvaluationContext, Filter
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.limits import Limits

from .filters.support import BrokenView, Exploding, Fixed, Slow

TRUE = Described(symbol("amqp:true-filter"), True)
FALSE = Described(symbol("amqp:false-filter"), True)
RED = DictMessageView(header={"priority": ubyte(7)}, application_properties={"color": "red"})


def _link_filter() -> Data:
    """A filter set built node by node, the way proton fills link.remote_source.filter."""
    data = Data()
    data.put_map()
    data.enter()
    data.put_symbol(symbol("urgent"))
    data.put_described()
    data.enter()
    data.put_ulong(ulong(0x170))
    data.put_map()
    data.enter()
    data.put_string("priority")
    data.put_ubyte(ubyte(7))
    data.exit()
    data.exit()
    data.put_symbol(symbol("not-red"))
    data.put_described()
    data.enter()
    data.put_symbol(symbol("amqp:not-filter"))
    data.put_list()
    data.enter()
    data.put_described()
    data.enter()
    data.put_symbol(symbol("amqp:application-properties-filter"))
    data.put_map()
    data.enter()
    data.put_string("color")
    data.put_string("blue")
    data.exit()
    data.exit()
    data.exit()
    data.exit()
    data.exit()
    return data


def test_decode_from_proton_data_built_node_by_node() -> None:
    data = _link_filter()
    data.next()  # wherever the cursor is, decoding starts from the top
    filter_set = decode_filter_set(data)
    assert list(filter_set) == ["urgent", "not-red"]
    assert filter_set["urgent"].type_name == "amqp:header-filter"
    assert filter_set.matches(RED) is True
    assert filter_set.matches(DictMessageView(application_properties={"color": "blue"})) is False


def test_decode_from_proton_data_put_object() -> None:
    data = Data()
    data.put_object({symbol("k"): Described(symbol("amqp:true-filter"), True),
                     symbol("sql"): Described(ulong(0x120), "color = 'red'")})
    pytest.importorskip("filtex_proton.sql")
    filter_set = decode_filter_set(data)
    assert filter_set.matches(RED) is True


def test_binary_from_proton_data_is_bytes_not_a_memoryview() -> None:
    data = Data()
    data.put_object({symbol("k"): Described(symbol("amqp:properties-filter"),
                                            {"user-id": b"bob"})})
    filter_set = decode_filter_set(data)
    assert type(filter_set["k"].value["user-id"]) is bytes
    assert filter_set.matches(DictMessageView(properties={"user-id": b"bob"})) is True


def test_the_echo_is_exactly_what_was_received() -> None:
    data = _link_filter()
    filter_set = decode_filter_set(data)
    assert filter_set.as_data().encode() == data.encode()
    echo = filter_set.echo()
    assert echo[symbol("urgent")].descriptor == ulong(0x170)  # numeric stays numeric
    assert type(echo[symbol("urgent")].descriptor) is ulong


def test_normalised_uses_symbolic_descriptors() -> None:
    normalised = decode_filter_set(_link_filter()).normalised()
    assert str(normalised[symbol("urgent")].descriptor) == "amqp:header-filter"


@pytest.mark.parametrize("source", [None, {}, Data()], ids=["None", "empty map", "empty Data"])
def test_empty_sets_match_everything(source: Any) -> None:
    filter_set = decode_filter_set(source)
    assert len(filter_set) == 0
    assert filter_set.matches(DictMessageView()) is True
    assert filter_set.as_data().encode() == b""


def test_null_in_data_is_an_empty_set() -> None:
    data = Data()
    data.put_null()
    assert len(decode_filter_set(data)) == 0


CONJUNCTION: list[tuple[str, list[bool | None], bool, bool | None]] = [
    ("set: every filter TRUE", [True, True], True, True),
    ("set: one FALSE", [True, False], False, False),
    ("set: one NULL is not eligible", [True, None], False, None),
    ("set: the first non-TRUE filter decides", [False, None], False, False),
]


@pytest.mark.parametrize(("results", "eligible", "result"),
                         [pytest.param(r, e, o, id=i) for i, r, e, o in CONJUNCTION])
def test_conjunction(results: list[bool | None], eligible: bool, result: bool | None) -> None:
    filters: dict[str, Filter] = {f"f{i}": Fixed(r) for i, r in enumerate(results)}
    filter_set = FilterSet(filters)
    assert filter_set.matches(RED) is eligible
    assert filter_set.evaluate(RED).result is result


def test_outcome_names_the_deciding_filter_and_why() -> None:
    filter_set = FilterSet({"ok": Fixed(True), "bad": Fixed(False)})
    outcome = filter_set.evaluate(RED)
    assert outcome.key == "bad"
    assert outcome.reason == "filter 'bad' did not match"
    assert not outcome.eligible


def test_counters() -> None:
    filter_set = FilterSet({"a": Fixed(True)})
    filter_set.matches(RED)
    nulls = FilterSet({"a": Fixed(None)})
    nulls.matches(RED)
    nulls.matches(RED)
    assert (filter_set.stats.evaluations, filter_set.stats.matches) == (1, 1)
    assert (nulls.stats.evaluations, nulls.stats.matches, nulls.stats.nulls) == (2, 0, 2)
    assert nulls.stats.errors == 0


def test_errors_inside_filters_are_caught_and_counted() -> None:
    filter_set = FilterSet({"ok": Fixed(True), "boom": Exploding()})
    outcome = filter_set.evaluate(RED)
    assert outcome.result is None and outcome.error
    assert outcome.reason is not None and "ZeroDivisionError" in outcome.reason
    assert filter_set.stats.errors == 1


class _Rude:
    """A filter that breaks the never-raise promise (not a FilterBase)."""

    descriptor = symbol("test:rude")
    value = None
    type_name = "test:rude"

    def evaluate(self, view: Any, ctx: EvaluationContext) -> bool | None:
        raise RuntimeError("rude")

    def described(self) -> Described:
        return Described(self.descriptor, self.value)

    def normalised(self) -> Described:
        return self.described()


def test_matches_never_raises_even_if_a_filter_does() -> None:
    filter_set = FilterSet({"rude": _Rude()})
    assert filter_set.matches(RED) is False
    assert filter_set.stats.errors == 1


def test_a_broken_message_view_is_not_eligible() -> None:
    filter_set = decode_filter_set({"p": Described(symbol("amqp:header-filter"), {"ttl": 1})})
    assert filter_set.matches(BrokenView()) is False  # type: ignore[arg-type]
    assert filter_set.stats.errors == 1


def test_budget_between_filters() -> None:
    after = Fixed(True)
    filter_set = FilterSet({"slow": Slow(0.02), "after": after}, Limits(eval_budget_ms=1))
    outcome = filter_set.evaluate(RED)
    assert outcome.result is None and outcome.budget_exceeded
    assert outcome.key == "after"
    assert after.calls == 0
    assert filter_set.stats.budget_exceeded == 1


def test_budget_between_filters_on_the_delivery_path() -> None:
    after = Fixed(True)
    filter_set = FilterSet({"slow": Slow(0.02), "after": after}, Limits(eval_budget_ms=1))
    assert filter_set.matches(RED) is False
    assert after.calls == 0
    assert (filter_set.stats.budget_exceeded, filter_set.stats.nulls) == (1, 1)


def test_a_finished_verdict_is_not_overturned_by_the_clock() -> None:
    # §7.1: the budget stops work that is still to be done. A filter that already
    # answered TRUE is not second-guessed: a pause of the process (a GC, say) during
    # its evaluation must not leave a message that matches stuck in a queue.
    filter_set = FilterSet({"slow": Slow(0.02)}, Limits(eval_budget_ms=1))
    assert filter_set.matches(RED) is True
    assert filter_set.evaluate(RED).result is True
    assert filter_set.stats.budget_exceeded == 0


def test_context_is_reset_for_every_message() -> None:
    filter_set = FilterSet({"a": Fixed(None)})
    ctx = EvaluationContext()
    filter_set.evaluate(RED, ctx)
    assert ctx.reason is not None
    FilterSet({"a": Fixed(True)}).evaluate(RED, ctx)
    assert ctx.reason is None and not ctx.budget_exceeded and not ctx.error


def test_no_local_through_the_set() -> None:
    filter_set = decode_filter_set({"no-local": Described(ulong(0x0000468C00000003),
                                                          "NoLocalFilter{}")})
    assert filter_set.matches(RED, EvaluationContext(origin="c1", consumer="c1")) is False
    assert filter_set.matches(RED, EvaluationContext(origin="c2", consumer="c1")) is True


def _located(source: Any, limits: Limits | None = None) -> FilterError:
    with pytest.raises(FilterError) as caught:
        decode_filter_set(source, limits or Limits())
    return caught.value


ERRORS: list[tuple[str, Any, str | None, str | None, str]] = [
    # (id, source, key, descriptor, reason fragment)
    ("the set is a map, not a list", [TRUE], None, None, "a filter set is a map"),
    ("a value is a described filter", {"k": True}, "k", None, "expected a described filter"),
    ("unknown symbolic descriptor", {"k": Described(symbol("ex:x"), 1)}, "k", "ex:x",
     "unknown filter type ex:x"),
    ("unknown numeric descriptor", {"k": Described(ulong(0x999), 1)}, "k",
     "0x00000000:0x00000999", "unknown filter type"),
    ("wrong source type: a list where a map is required",
     {"k": Described(ulong(0x174), [1])}, "k", "0x00000000:0x00000174 (amqp:application-"
     "properties-filter)", "needs a map, not a list"),
    ("wrong source type: an int where a string is required",
     {"k": Described(symbol("apache.org:selector-filter:string"), 5)}, "k",
     "apache.org:selector-filter:string", "needs a string, not a long"),
    ("a filter name is a symbol", {5: TRUE}, "5", "amqp:true-filter", "a filter name is a symbol"),
]


@pytest.mark.parametrize(("source", "key", "descriptor", "reason"),
                         [pytest.param(s, k, d, r, id=i) for i, s, k, d, r in ERRORS])
def test_errors_are_located(source: Any, key: str | None, descriptor: str | None,
                            reason: str) -> None:
    error = _located(source)
    assert error.key == key
    assert error.descriptor == descriptor
    assert reason in error.reason
    assert not error.limit


def test_errors_from_data_are_located() -> None:
    data = Data()
    data.put_object({symbol("bad"): Described(symbol("amqp:header-filter"), {"nope": 1})})
    error = _located(data)
    assert (error.key, error.descriptor) == ("bad", "amqp:header-filter")
    assert "unknown header field 'nope'" in error.client_text()


def test_a_data_top_level_that_is_not_a_map() -> None:
    data = Data()
    data.put_list()
    assert "not a list" in _located(data).reason


def test_duplicate_keys_in_data() -> None:
    data = Data()
    data.put_map()
    data.enter()
    for _ in range(2):
        data.put_symbol(symbol("k"))
        data.put_object(TRUE)
    data.exit()
    error = _located(data)
    assert error.key == "k" and "twice" in error.reason


def test_max_filters_per_set_is_a_masked_limit() -> None:
    limits = Limits(max_filters_per_set=2)
    assert len(decode_filter_set({"a": TRUE, "b": TRUE}, limits)) == 2
    error = _located({"a": TRUE, "b": TRUE, "c": TRUE}, limits)
    assert error.limit
    assert "max_filters_per_set" in error.reason
    assert "max_filters_per_set" not in error.client_text()
    assert GENERIC_LIMIT_TEXT in error.client_text()


def test_max_filters_per_set_from_data_before_reading_entries() -> None:
    data = Data()
    data.put_object({symbol(f"k{i}"): TRUE for i in range(3)})
    assert _located(data, Limits(max_filters_per_set=2)).limit


def test_every_limit_is_masked_and_located() -> None:
    cases = [
        (Limits(max_group_depth=1), Described(symbol("amqp:all-filter"),
                                              [Described(symbol("amqp:any-filter"), [TRUE])])),
        (Limits(max_group_members=1), Described(symbol("amqp:all-filter"), [TRUE, TRUE])),
        (Limits(max_property_entries=1),
         Described(symbol("amqp:application-properties-filter"), {"a": 1, "b": 2})),
    ]
    for limits, value in cases:
        error = _located({"lim": value}, limits)
        assert error.limit and error.key == "lim"
        assert error.client_text() == f"filter 'lim': {GENERIC_LIMIT_TEXT}"


def test_sql_limits_are_masked_and_located() -> None:
    pytest.importorskip("filtex_proton.sql")
    error = _located({"s": Described(symbol("amqp:sql-filter"), "a = 1 AND b = 2")},
                     Limits(max_sql_length=4))
    assert error.limit and error.key == "s"


def test_unexpected_decoder_failures_become_filter_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    import filtex_proton.filterset as module

    def broken(value: Any, limits: Limits, options: Any = None) -> Filter:
        raise KeyError("bug")

    monkeypatch.setattr(module, "decode_filter", broken)
    error = _located({"k": TRUE})
    assert error.key == "k" and "KeyError" in error.reason


def test_not_a_mapping() -> None:
    assert "not a long" in _located(5).reason


def test_repr_and_mapping_protocol() -> None:
    filter_set = decode_filter_set({"a": TRUE, "b": FALSE})
    assert "amqp:true-filter" in repr(filter_set)
    assert [k for k, _ in filter_set.items()] == ["a", "b"]
    with pytest.raises(KeyError):
        filter_set["c"]


def _pump(a: Any, b: Any) -> None:
    """Move bytes between two in-memory transports until both are quiet."""
    moved = True
    while moved:
        moved = False
        for source, sink in ((a, b), (b, a)):
            pending = source.pending()
            if pending > 0:
                sink.push(source.peek(pending))
                source.pop(pending)
                moved = True


def test_through_the_proton_engine_and_back() -> None:
    """A client's filter set, carried by AMQP frames to link.remote_source.filter, decoded,
    and echoed to the client in the attach reply."""
    from proton import Connection, Transport

    pytest.importorskip("filtex_proton.sql")
    client, server = Connection(), Connection()
    client_transport, server_transport = Transport(), Transport(Transport.SERVER)
    client_transport.bind(client)
    server_transport.bind(server)
    client.open()
    session = client.session()
    session.open()
    receiver = session.receiver("r")
    receiver.source.address = "q"
    sent = {symbol("jms-selector"): Described(ulong(0x0000468C00000004), "JMSPriority > 4"),
            symbol("urgent"): Described(symbol("amqp:header-filter"), {"priority": ubyte(7)})}
    receiver.source.filter.put_dict(sent)
    receiver.open()
    _pump(client_transport, server_transport)

    link = server.link_head(0)
    filter_set = decode_filter_set(link.remote_source.filter)
    assert list(filter_set) == ["jms-selector", "urgent"]
    assert filter_set.matches(RED) is True

    server.open()
    link.session.open()
    link.source.address = "q"
    link.source.filter.copy(filter_set.as_data())
    link.open()
    _pump(client_transport, server_transport)
    echoed = receiver.remote_source.filter
    echoed.rewind()
    echoed.next()
    assert echoed.get_object() == sent
