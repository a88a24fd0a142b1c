"""Fuzz target: bytes -> an AMQP value -> decode_filter_set / FiltexPlugin.compile.

Run:  python fuzz/fuzz_filter_set.py -max_total_time=60   (atheris, or a plain loop)

The first input byte picks the path the rest takes (its value modulo 4):

- 0: our codec (``decode_value``) gives a Python value, which is decoded as a
  filter set (if it is a map) and as the one filter of a set;
- 1: proton's ``Data.decode`` (what a broker's ``link.remote_source.filter``
  holds), then ``decode_filter_set(data)`` and ``plugin.compile(data)``;
- 2, 3: the bytes are decisions that build a well-formed filter set (known and
  unknown descriptors, values of right and wrong types, groups nested past the
  limits, deep property values), decoded as Python values (2) or from the
  ``proton.Data`` they are written into (3): past the codecs, into the decoders.

Malformed bytes may fail in the codec or in proton (that is their job); what
must hold after that: only :class:`FilterError` escapes the decoder, a limit
refusal shows the client the generic text only (§7.1), and an accepted set
evaluates every fixed view to a bool without raising, and can be echoed on the
attach (``as_data``, ``echo``, ``normalised``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import fuzz_common

with fuzz_common.instrumented():
    import fuzz_views
    from proton import Data, symbol

    from filtex_proton.amqp import DecodeError, decode_value
    from filtex_proton.errors import GENERIC_LIMIT_TEXT, FilterError
    from filtex_proton.filters.base import EvaluationContext
    from filtex_proton.filters.wire import write_data
    from filtex_proton.filterset import FilterSet, decode_filter_set
    from filtex_proton.limits import DEFAULT_LIMITS, Limits
    from filtex_proton.plugin import FiltexPlugin

DICTIONARY = str(Path(__file__).with_name("amqp.dict"))
SMALL = Limits(max_filters_per_set=3, max_group_depth=3, max_group_members=3,
               max_property_entries=6, max_sql_length=64)
PLUGINS = (FiltexPlugin(), FiltexPlugin(limits=SMALL, disabled=["AMQP_FILTEX_SQL_V1_0"]))
VIEWS = fuzz_views.fixed_views()


def seeds() -> list[bytes]:
    """The seed filter sets, encoded, down both paths."""
    encoded = [fuzz_views.filter_set_bytes(value) for value in fuzz_views.FILTER_SET_SEEDS]
    structured = [bytes((i * 37 + j * 11) % 256 for j in range(48)) for i in range(16)]
    return ([bytes([mode]) + data for data in encoded for mode in (0, 1)]
            + [bytes([mode]) + data for data in structured for mode in (2, 3)])


def check_refusal(error: FilterError) -> None:
    assert isinstance(error.render(), str)
    if error.limit:
        assert error.client_text().endswith(GENERIC_LIMIT_TEXT), error.client_text()


def check_accepted(filter_set: FilterSet) -> None:
    for view in VIEWS:
        verdict = filter_set.matches(view, EvaluationContext(origin=1, consumer=2))
        assert verdict is True or verdict is False, verdict
        outcome = filter_set.evaluate(view)
        assert outcome.result in (True, False, None), outcome
    filter_set.as_data()
    filter_set.echo()
    filter_set.normalised()


def decode(source: Any, limits: Limits = DEFAULT_LIMITS) -> None:
    try:
        filter_set = decode_filter_set(source, limits)
    except FilterError as error:
        check_refusal(error)
        return
    check_accepted(filter_set)


def compile_with_plugins(source: Any) -> None:
    for plugin in PLUGINS:
        try:
            filter_set = plugin.compile(source)
        except FilterError as error:
            check_refusal(error)
            continue
        check_accepted(filter_set)


def test_one_input(data: bytes) -> None:
    if not data:
        return
    mode, payload = data[0] % 4, data[1:]
    if mode >= 2:
        structured(payload, through_data=mode == 3)
        return
    if mode == 0:
        try:
            value, _ = decode_value(payload)
        except DecodeError:
            return
        decode(value)
        decode({symbol("only"): value}, SMALL)
        compile_with_plugins(value)
        return
    proton_data = Data()
    try:
        proton_data.decode(payload)
    except Exception:  # proton refusing bytes is proton's business, not the decoder's
        return
    decode(proton_data)
    decode(proton_data, SMALL)
    compile_with_plugins(proton_data)


def structured(payload: bytes, *, through_data: bool) -> None:
    value = fuzz_views.build_filter_set(payload)
    if not through_data:
        decode(value)
        decode(value, SMALL)
        compile_with_plugins(value)
        return
    proton_data = Data()
    try:
        write_data(value, proton_data)
    except Exception:  # a value proton cannot encode (the builder's, not the decoder's, problem)
        return
    decode(proton_data)
    decode(proton_data, SMALL)
    compile_with_plugins(proton_data)


def main() -> int:
    return fuzz_common.run(test_one_input, seeds(), DICTIONARY)


if __name__ == "__main__":
    sys.exit(main())
