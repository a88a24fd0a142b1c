"""Fuzz target: message bytes -> RawMessageView reads, and LinkFilter.matches.

Run:  python fuzz/fuzz_message.py -max_total_time=60    (atheris, or a plain loop)

The bytes are a message as a producer sent it (the seeds are well-formed
messages of every shape; the fuzzer truncates them, breaks descriptors, makes
sizes lie, puts bad UTF-8 in strings, gives maps odd counts, nests lists deep).
What must hold:

- the codec entry points (``scan_sections``, ``skip_value``, ``decode_value``)
  and the view (construction, ``section``, ``field``, ``has_field``, ``spans``)
  raise nothing but :class:`DecodeError`;
- the door check (``validate_message``) raises nothing but
  :class:`InvalidMessageError`; a message it passes reads without a
  :class:`DecodeError` in every section, with the same values as the lazy view;
- ``LinkFilter.matches`` on ``FiltexPlugin.message(bytes)`` returns a bool and
  never raises, whatever the bytes and whatever the filter set (SQL over every
  section, property filters, groups, Apache bindings, no-local), and bytes that
  are not a message match no filter.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import Any

import fuzz_common

with fuzz_common.instrumented():
    import fuzz_views
    from proton import Described, symbol

    from filtex_proton.amqp import DecodeError, decode_value, skip_value
    from filtex_proton.amqp.message import RawMessageView, scan_sections
    from filtex_proton.amqp.validate import InvalidMessageError, validate_message
    from filtex_proton.amqp.view import Section
    from filtex_proton.filterset import decode_filter_set
    from filtex_proton.plugin import FiltexPlugin, LinkFilter

DICTIONARY = str(Path(__file__).with_name("amqp.dict"))
#: Keys asked of every section: well-known field names, and map keys of several types.
KEYS: tuple[Any, ...] = (
    "priority", "durable", "subject", "to", "message-id", "user-id", "creation-time", "color",
    "a", "x-opt-route", "sig", 1, b"k", None,
)
_SQL_ALL_SECTIONS = (
    "h.priority > 4 OR h.durable OR p.subject LIKE '%.cr_ated%' OR p.user-id = 0x00 OR "
    "a.color = 'blue' OR a.list[1] = 2 OR a.map.key = 'v' OR d.[x-opt-route] = 'x' OR "
    "m.[x-opt-partition][0] = 3 OR f.sig IS NOT NULL OR EXISTS(p.correlation-id) OR "
    "LOWER(a.name) = 'x' OR a.price * a.quantity > 10 OR p.creation-time > DATE('2020-01-01')"
)
SILENT = logging.getLogger("filtex_fuzz.silent")
SILENT.disabled = True  # evaluation errors are expected here by the million
LINK_FILTERS: tuple[LinkFilter, ...] = tuple(
    LinkFilter(decode_filter_set(value), consumer=2, logger=SILENT)
    for value in (*fuzz_views.FILTER_SET_SEEDS, {
        "sql": Described(symbol("amqp:sql-filter"), _SQL_ALL_SECTIONS),
        "jms": Described(symbol("apache.org:selector-filter:string"),
                         "JMSType = 'order' OR JMSXUserID = 'guest' OR "
                         "JMSCorrelationID LIKE 'ID:%' OR JMSTimestamp > 0"),
    })
)


def seeds() -> list[bytes]:
    return fuzz_views.message_seeds()


def read_view(view: RawMessageView) -> None:
    """Everything a filter may ask of a view: DecodeError or an answer."""
    assert isinstance(view.spans, list)
    repr(view)
    for section in Section:
        try:
            view.section(section)
        except DecodeError:
            continue
        for key in KEYS:
            view.field(section, key)
            view.has_field(section, key)


def check_door(data: bytes, lazy: RawMessageView | None) -> None:
    """The door check: InvalidMessageError or a view whose every section reads as the lazy one."""
    try:
        checked = validate_message(data)
    except InvalidMessageError:
        return
    assert lazy is not None, "the door check passed bytes the scan refuses"
    fresh = RawMessageView(data)
    for section in Section:
        assert checked.section(section) == fresh.section(section), section


def test_one_input(data: bytes) -> None:
    for probe in (scan_sections, skip_value, decode_value):
        with contextlib.suppress(DecodeError):
            probe(data)
    view: RawMessageView | None = None
    with contextlib.suppress(DecodeError):
        view = RawMessageView(data)
    if view is not None:
        read_view(view)
    check_door(data, view)
    message = FiltexPlugin.message(data, origin=1)
    for link_filter in LINK_FILTERS:
        verdict = link_filter.matches(message)
        assert verdict is True or verdict is False, verdict
        if view is None and not link_filter.is_trivial:
            assert verdict is False, "bytes that are not a message matched a filter"


def main() -> int:
    return fuzz_common.run(test_one_input, seeds(), DICTIONARY)


if __name__ == "__main__":
    sys.exit(main())
