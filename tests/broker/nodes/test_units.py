"""Unit tests without sockets: queue dispatch rules, header rewriting, configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from proton import Message, uint

from filtex_broker.config import BrokerConfig, ConfigError, load_config, parse_listen
from filtex_broker.nodes.node import NodeLimits
from filtex_broker.nodes.queue import Queue
from filtex_broker.nodes.rewrites import bump_delivery_count, with_ttl_left, without_expiry
from filtex_broker.terminus import TerminusRequest, lookup_key, subscription_key
from filtex_proton.amqp.message import RawMessageView, encode_message
from filtex_proton.amqp.view import MISSING, Section
from filtex_proton.plugin import FilterMessage
from tests.broker.nodes.fakes import FakeConsumer, FakeFilter, Stats

# -- the queue, with stand-in consumers ---------------------------------------------------


def _queue(n: int = 0, limits: NodeLimits | None = None) -> Queue:
    queue = Queue("q", limits or NodeLimits(1000, 10**9))
    for i in range(n):
        queue.publish(FilterMessage(b"%d" % i))
    return queue


def _consistent(queue: Queue) -> None:
    entries = queue.entries()
    assert queue.count == len(entries)
    assert queue.ready == sum(1 for e in entries if e.owner is None)
    assert all(queue._slots[e.pos] is e for e in entries)


def test_round_robin_between_competing_consumers() -> None:
    queue = _queue(6)
    a = FakeConsumer(queue, credit=10, settle=True)
    b = FakeConsumer(queue, credit=10, settle=True)
    queue.dispatch()
    assert sorted(a.got + b.got) == list(range(6))
    assert len(a.got) == len(b.got) == 3
    _consistent(queue)


def test_each_consumer_evaluates_each_message_once() -> None:
    queue = _queue(5)
    picky = FakeConsumer(queue, credit=10, wanted={4}, settle=True)
    queue.dispatch()
    queue.dispatch()
    queue.publish(FilterMessage(b"5"))
    assert picky.got == [4]
    assert picky.filter.evaluated == [0, 1, 2, 3, 4, 5]


def test_requeued_entry_is_back_in_order_and_re_evaluated() -> None:
    queue = _queue(4)
    a = FakeConsumer(queue, credit=2)
    queue.dispatch()
    assert a.got == [0, 1]
    b = FakeConsumer(queue, credit=10, settle=True)
    queue.dispatch()
    assert b.got == [2, 3]
    queue.requeue(a.held[1])
    queue.requeue(a.held[0])
    _consistent(queue)
    queue.dispatch()
    assert b.got == [2, 3, 0, 1]
    _consistent(queue)


class SlowOnceFilter(FakeFilter):
    """Runs out of evaluation budget on its first look at each message in ``slow``."""

    def __init__(self, wanted: set[int], slow: set[int], stats: Stats) -> None:
        super().__init__(wanted)
        self.slow = set(slow)
        self.stats = stats

    def matches(self, message: FilterMessage) -> bool:
        n = int(message.data)
        self.evaluated.append(n)
        if n in self.slow:
            self.slow.discard(n)
            self.stats.budget_exceeded += 1
            return False
        return n in self.wanted


def test_budget_exceeded_is_not_a_verdict() -> None:
    queue = _queue(4)
    consumer = FakeConsumer(queue, credit=10, settle=True)
    stats = Stats()
    consumer.filter = SlowOnceFilter({0, 1, 2, 3}, {1}, stats)
    consumer.filter_stats = stats
    queue.dispatch()
    assert sorted(consumer.got) == [0, 1, 2, 3]


def test_a_filter_always_out_of_time_gives_up_after_a_few_tries() -> None:
    queue = _queue(2)
    consumer = FakeConsumer(queue, credit=10, settle=True)

    class Hopeless(FakeFilter):
        def matches(self, message: FilterMessage) -> bool:
            self.evaluated.append(int(message.data))
            self.stats.budget_exceeded += 1  # its set's stats: what a verdict reads
            return False

    consumer.filter = Hopeless(set())
    queue.dispatch()
    assert consumer.got == []
    assert consumer.filter.evaluated.count(0) == 4  # the first look and three retries
    _consistent(queue)


def test_browser_sees_queued_and_delivered_messages_once() -> None:
    queue = _queue(3)
    consumer = FakeConsumer(queue, credit=1)
    queue.dispatch()
    browser = FakeConsumer(queue, credit=10, browse=True)
    queue.dispatch()
    queue.publish(FilterMessage(b"3"))
    assert browser.got == [0, 1, 2, 3]
    assert consumer.got == [0]


def test_compaction_keeps_positions_and_cursors_right() -> None:
    queue = _queue(5000)
    keeper = FakeConsumer(queue, credit=1)  # holds entry 0 unsettled
    queue.dispatch()
    taker = FakeConsumer(queue, credit=10_000, settle=True)
    queue.dispatch()
    assert taker.got == list(range(1, 5000))
    assert len(queue._slots) < 1500  # holes were compacted away
    _consistent(queue)
    queue.requeue(keeper.held[0])
    queue.publish(FilterMessage(b"5000"))
    queue.dispatch()
    assert taker.got[-2:] == [0, 5000]
    assert queue.count == 0 and queue.bytes == 0
    _consistent(queue)


def test_limits_and_waking_stalled_producers() -> None:
    queue = _queue(2, NodeLimits(max_messages=2, max_bytes=10**9))
    assert not queue.has_room()

    class Producer:
        resumed = 0

        def resume(self) -> None:
            self.resumed += 1

    producer = Producer()
    queue.stall(producer)
    consumer = FakeConsumer(queue, credit=1, settle=True)
    queue.dispatch()
    assert consumer.got == [0] and producer.resumed == 1 and queue.has_room()


# -- the header rewrite for redelivery -----------------------------------------------------


def _header(data: bytes) -> Any:
    return RawMessageView(data).section(Section.HEADER)


def test_bump_adds_a_header_when_there_is_none() -> None:
    data = encode_message(properties={"subject": "s"}, body="b")
    bumped = bump_delivery_count(data)
    assert _header(bumped) == {"delivery-count": uint(1)}
    assert bumped.endswith(data)


def test_bump_keeps_other_fields_and_clears_first_acquirer() -> None:
    data = encode_message(header={"priority": 9, "first-acquirer": True, "delivery-count": 4},
                          footer={"f": 1}, body=b"raw", body_kind="data")
    bumped = bump_delivery_count(bump_delivery_count(data))
    header = _header(bumped)
    assert header["delivery-count"] == 6 and header["priority"] == 9
    assert header["first-acquirer"] is False
    assert "durable" not in header  # absent stays absent
    view = RawMessageView(bumped)
    assert view.field(Section.FOOTER, "f") == 1
    assert view.field(Section.PROPERTIES, "subject") is MISSING


def test_the_ttl_left_replaces_the_ttl_forwarded() -> None:
    """AMQP 1.0 §3.2.1: an intermediary sends the reduced ttl; every other byte as it was."""
    data = encode_message(header={"durable": True, "ttl": 60_000, "delivery-count": 2},
                          properties={"subject": "s"}, footer={"f": 1}, body="b")
    reduced = with_ttl_left(data, expires_ms=1_000_000 + 60_000, now_ms=1_000_000 + 1_500)
    assert _header(reduced) == {"durable": True, "ttl": uint(58_500), "delivery-count": 2}
    assert isinstance(_header(reduced)["ttl"], uint)
    view = RawMessageView(reduced)
    assert view.field(Section.FOOTER, "f") == 1 and view.field(Section.PROPERTIES, "subject") == "s"
    assert reduced[-20:] == data[-20:]


@pytest.mark.parametrize(("header", "expires", "why"), [
    (None, 5_000, "no header"),
    ({"priority": 7}, 5_000, "no ttl: the expiry is absolute-expiry-time's"),
    ({"ttl": 3_000}, 5_000, "more left than the ttl (the clock went back): kept"),
    ({"ttl": 1_000}, 1_000, "nothing spent yet"),
    ({"ttl": 0}, 5_000, "a ttl of 0: no expiry by ttl (uint0)"),
    ({"durable": True, "priority": 1}, 5_000, "a header of two fields"),
])
def test_the_ttl_is_forwarded_as_it_is(header: dict[str, Any] | None, expires: int,
                                       why: str) -> None:
    data = encode_message(header=header, body="b") if header else encode_message(body="b")
    assert with_ttl_left(data, expires_ms=expires, now_ms=0) is data, why


def _header_list32(*fields: bytes) -> bytes:
    body = len(fields).to_bytes(4, "big") + b"".join(fields)
    return b"\x00\x53\x70\xd0" + len(body).to_bytes(4, "big") + body


_AMQP_VALUE = encode_message(body="b")
"""A message of an amqp-value body alone, to put after a header made by hand."""


@pytest.mark.parametrize(("data", "ttl"), [
    (Message(body="b", ttl=60.0, durable=True, priority=7).encode(), 60_000),  # uint
    (Message(body="b", ttl=0.2).encode(), 200),  # smalluint
    (encode_message(header={"durable": False, "ttl": 70_000}, body="b"), 70_000),
    (_header_list32(b"\x56\x01", b"\x50\x07", b"\x70" + (90_000).to_bytes(4, "big"))
     + _AMQP_VALUE, 90_000),  # list32, boolean and ubyte
    (_header_list32(b"\x40", b"\x40", b"\x80" + (90_000).to_bytes(8, "big")) + _AMQP_VALUE,
     90_000),  # a ulong where a uint belongs: re-encoded
    (_header_list32(b"\x40", b"\x40", b"\xa1\x02" + b"90") + _AMQP_VALUE,
     None),  # a string: not a ttl (the broker ignores it for expiry too)
    (encode_message(header={"ttl": 80_000, "delivery-count": 3},
                    delivery_annotations={"x": 1}, body="b"), 80_000),
])
def test_the_ttl_left_in_every_encoding(data: bytes, ttl: int | None) -> None:
    """Patched in place where clients' encodings allow (the same bytes, a smaller number),
    re-encoded otherwise: the same message either way, but for the ttl."""
    reduced = with_ttl_left(data, expires_ms=10_000 + 150, now_ms=10_000)
    if ttl is None:
        assert reduced is data
        return
    assert _header(reduced)["ttl"] == 150
    before, after = RawMessageView(data), RawMessageView(reduced)
    for section in Section:
        if section is not Section.HEADER:
            assert after.section(section) == before.section(section), section
    assert {k: v for k, v in _header(reduced).items() if k != "ttl"} == \
        {k: v for k, v in _header(data).items() if k != "ttl"}


def test_an_empty_header_has_no_ttl_to_reduce() -> None:
    data = b"\x00\x53\x70\x45" + _AMQP_VALUE  # list0
    assert with_ttl_left(data, expires_ms=5_000, now_ms=0) is data


def test_the_ttl_left_is_never_zero() -> None:
    """0 would read as "no expiry"; a message due now leaves with 1 ms."""
    data = encode_message(header={"ttl": 500}, body="b")
    assert _header(with_ttl_left(data, expires_ms=10_000, now_ms=10_000))["ttl"] == 1


def test_a_dead_letter_loses_its_expiry_and_nothing_else() -> None:
    data = encode_message(header={"priority": 9, "ttl": 500},
                          properties={"subject": "s", "absolute-expiry-time": 1_700_000_000_000},
                          application_properties={"k": 1}, body="b")
    cleared = without_expiry(data)
    assert _header(cleared) == {"priority": 9}
    view = RawMessageView(cleared)
    assert view.field(Section.PROPERTIES, "absolute-expiry-time") is MISSING
    assert view.field(Section.PROPERTIES, "subject") == "s"
    assert view.field(Section.APPLICATION_PROPERTIES, "k") == 1
    plain = encode_message(header={"priority": 9}, properties={"subject": "s"}, body="b")
    assert without_expiry(plain) is plain


# -- configuration ---------------------------------------------------------------------------


def test_defaults() -> None:
    config = load_config([], env={})
    assert config == BrokerConfig()
    assert config.listen == (("127.0.0.1", 5672),)


def test_precedence_flags_over_env_over_toml(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text(
        '[broker]\nlisten = ["0.0.0.0:1"]\ncredit_window = 7\nmax_queue_messages = 9\n'
        'disabled = ["amqp:sql-filter"]\n[limits]\nmax_sql_length = 100\nmax_in_list = 5\n'
    )
    env = {"FILTEX_CREDIT_WINDOW": "8", "FILTEX_MAX_SQL_LENGTH": "200",
           "FILTEX_CONFIG": str(toml)}
    config = load_config(["--max-sql-length", "300", "--listen", "127.0.0.1:0",
                          "--listen", ":6"], env=env)
    assert config.listen == (("127.0.0.1", 0), ("127.0.0.1", 6))
    assert config.credit_window == 8
    assert config.max_queue_messages == 9
    assert config.disabled == ("amqp:sql-filter",)
    assert config.limits.max_sql_length == 300
    assert config.limits.max_in_list == 5


@pytest.mark.parametrize("argv, env, text", [
    (["--listen", "host"], {}, "HOST:PORT"),
    (["--listen", "h:99999"], {}, "out of range"),
    (["--credit-window", "x"], {}, "credit_window must be int"),
    (["--max-sql-length", "0"], {}, "max_sql_length"),
    ([], {"FILTEX_MAX_QUEUE_BYTES": "-1"}, "negative"),
    ([], {"FILTEX_LOG_LEVEL": "chatty"}, "log_level"),
])
def test_bad_values_are_reported(argv: list[str], env: dict[str, str], text: str) -> None:
    with pytest.raises(ConfigError, match=text):
        load_config(argv, env=env)


def test_unknown_toml_keys_are_errors(tmp_path: Path) -> None:
    toml = tmp_path / "b.toml"
    toml.write_text("[broker]\nlisen = 1\n")
    with pytest.raises(ConfigError, match="unknown setting"):
        load_config(["--config", str(toml)], env={})


@pytest.mark.parametrize(("line", "says"), [
    ("listen = 5672", "[broker] listen must be a HOST:PORT string or a list of them, not 5672"),
    ('listen = ["127.0.0.1:0", 5]', "listen must be a HOST:PORT string or a list of them"),
    ("data_dir = 3", "[broker] data_dir must be a path (a string), not 3"),
    ("ready_file = []", "[broker] ready_file must be a path (a string)"),
    ("archive_nodes = { a = 1 }", "archive_nodes must be a list of address patterns"),
    ("disabled = [1]", "disabled must be a list of filter type or capability names"),
], ids=["listen-number", "listen-list-with-number", "data-dir-number", "ready-file-list",
        "archive-nodes-table", "disabled-numbers"])
def test_a_toml_value_of_the_wrong_type_is_a_config_error(tmp_path: Path, line: str,
                                                         says: str) -> None:
    toml = tmp_path / "b.toml"
    toml.write_text(f"[broker]\n{line}\n")
    with pytest.raises(ConfigError) as raised:
        load_config(["--config", str(toml)], env={})
    assert says in str(raised.value) and str(toml) in str(raised.value)


def test_a_toml_list_setting_takes_one_string_as_a_list_of_one(tmp_path: Path) -> None:
    toml = tmp_path / "b.toml"
    toml.write_text('[broker]\nlisten = "127.0.0.1:0"\ndisabled = "amqp:sql-filter"\n')
    config = load_config(["--config", str(toml)], env={})
    assert config.listen == (("127.0.0.1", 0),)
    assert config.disabled == ("amqp:sql-filter",)


def test_parse_listen_accepts_ipv6_brackets() -> None:
    assert parse_listen("[::1]:5672") == ("::1", 5672)


def _subscriber(*capabilities: str) -> TerminusRequest:
    return TerminusRequest(address="t", dynamic=False, capabilities=frozenset(capabilities),
                           durable=True, copy=False, coordinator=False)


@pytest.mark.parametrize(("link_name", "capabilities", "key"), [
    ("sub", ("topic",), ("c", "sub")),  # exclusive durable: container-id and link name
    ("sub|2", ("topic",), ("c", "sub|2")),  # not shared: the name is the name
    ("sub", ("topic", "shared"), ("c", "sub")),
    ("sub|2", ("topic", "shared"), ("c", "sub")),  # Qpid JMS's second consumer, same connection
    ("sub|global", ("topic", "shared", "global"), ("", "sub|global")),
    ("sub|global3", ("topic", "shared", "global"), ("", "sub|global")),
    ("sub|volatile2", ("topic", "shared"), ("c", "sub|volatile")),
    ("sub|global-volatile", ("topic", "shared", "global"), ("", "sub|global-volatile")),
    ("a|b", ("topic", "shared"), ("c", "a|b")),  # a name with a bar of its own
])
def test_qpid_jms_subscription_names(link_name: str, capabilities: tuple[str, ...],
                                     key: tuple[str, str]) -> None:
    """What Qpid JMS names the links of one subscription all lead to one key; unsubscribe's
    source-less attach names the first link."""
    assert subscription_key("c", link_name, _subscriber(*capabilities)) == key
    if link_name in ("sub", "sub|global"):
        assert lookup_key("c", link_name) == key
