"""Spec §7.2 in the plugin: each evaluation error is reported with the origin of the message
that caused it, so a container can tell which sender induces errors (the broker's use of it,
with real connections, is tests/broker/test_induced_errors.py)."""

from __future__ import annotations

from collections.abc import Hashable

from proton import Described, symbol

from filtex_proton.amqp.message import encode_message
from filtex_proton.filterset import decode_filter_set
from filtex_proton.plugin import FiltexPlugin, LinkFilter


def poisoned() -> bytes:
    return encode_message(application_properties={"a": "AAA"}).replace(b"AAA", b"\xed\xa0\x80")


def test_errors_are_reported_with_the_origin_of_the_message() -> None:
    blamed: list[Hashable | None] = []
    filter_set = decode_filter_set({"f": Described(symbol("amqp:sql-filter"), "a = 'x'")})
    link = LinkFilter(filter_set, consumer=1, on_error=blamed.append)
    message = FiltexPlugin.message
    assert link.matches(message(encode_message(application_properties={"a": "x"}), origin=2))
    assert not link.matches(message(encode_message(application_properties={"a": "y"}), origin=3))
    assert not link.matches(message(encode_message(application_properties={}), origin=4))  # NULL
    assert blamed == []  # FALSE and NULL are answers, not errors
    assert not link.matches(message(poisoned(), origin=5))  # a section that cannot be read
    assert not link.matches(message(b"\xff not a message", origin=6))  # bytes that do not scan
    assert not link.matches(message(poisoned()))  # origin unknown: reported as None
    assert blamed == [5, 6, None]
    assert filter_set.stats.errors == 3


def test_the_plugin_hands_its_hook_to_every_link_it_builds() -> None:
    plugin = FiltexPlugin()
    blamed: list[Hashable | None] = []
    plugin.on_evaluation_error = blamed.append

    class Timed(LinkFilter):
        __slots__ = ()

    plugin.link_filter_class = Timed
    from proton import Connection

    link = Connection().session().sender("s")
    link.remote_source.filter.put_map()  # an empty filter set on the "peer's" source
    built = plugin.attach_sender(link, consumer=1)
    assert isinstance(built, Timed)
    assert built.on_error is not None
    built.on_error(9)
    assert blamed == [9]
