"""Fuzz target: SQL filter text -> compile_sql (both dialects) -> evaluate.

Run:  python fuzz/fuzz_sql.py -max_total_time=60      (atheris, or a plain loop)

The first input byte picks the dialect (bit 0: JMS selector), tiny limits
(bit 1: so that every limit is hit often) and how the rest is decoded to text
(bit 2: lone surrogates allowed). What must hold:

- ``compile_sql`` raises nothing but :class:`FilterError`; a limit refusal's
  ``client_text()`` is the generic text and does not quote the filter (§7.1);
- a compiled filter evaluates to TRUE, FALSE or NULL against every fixed view
  (rich, empty, undecodable) and never raises, and neither does the compiled
  closure underneath the never-raise guard (evaluation errors are NULL, §2.3);
- the expression printed back (``to_sql``) compiles again and prints the same.
"""

from __future__ import annotations

import sys
from pathlib import Path

import fuzz_common

with fuzz_common.instrumented():
    import fuzz_views

    from filtex_proton.errors import GENERIC_LIMIT_TEXT, FilterError
    from filtex_proton.limits import DEFAULT_LIMITS, Limits
    from filtex_proton.sql import AMQP_SQL, JMS_SELECTOR, compile_sql
    from filtex_proton.sql.printer import to_sql

DICTIONARY = str(Path(__file__).with_name("sql.dict"))
TINY = Limits(max_sql_length=96, max_sql_nodes=24, max_sql_depth=6, max_in_list=3)
VIEWS = fuzz_views.fixed_views()
BROKEN = fuzz_views.broken_views(VIEWS)  # views that raise DecodeError when read


def seeds() -> list[bytes]:
    """Every seed text in both dialects, with default and with tiny limits."""
    return [bytes([mode]) + text.encode() for text in fuzz_views.SQL_SEEDS for mode in (0, 1, 2)]


def check_refusal(error: FilterError, text: str) -> None:
    client = error.client_text()
    assert isinstance(error.render(), str)
    if error.limit:
        assert client.endswith(GENERIC_LIMIT_TEXT), client
        if len(text.strip()) >= 8:
            assert text not in client, "a limit refusal quotes the filter to the client"


def test_one_input(data: bytes) -> None:
    if not data:
        return
    mode = data[0]
    dialect = JMS_SELECTOR if mode & 1 else AMQP_SQL
    limits = TINY if mode & 2 else DEFAULT_LIMITS
    text = data[1:].decode("utf-8", "surrogateescape" if mode & 4 else "replace")
    try:
        compiled = compile_sql(text, dialect, limits)
    except FilterError as error:
        check_refusal(error, text)
        return
    for view in VIEWS:
        result = compiled.evaluate(view)
        assert result is True or result is False or result is None, result
        if view not in BROKEN:
            compiled._evaluate(view)  # the closure itself: evaluation errors are values
    printed = to_sql(compiled.ast, dialect)
    try:
        again = compile_sql(printed, dialect, limits)
    except FilterError as error:  # printing may add parentheses: only a limit may refuse it
        assert error.limit, f"{text!r} printed as {printed!r}: {error}"
        return
    assert to_sql(again.ast, dialect) == printed, (text, printed)


def main() -> int:
    return fuzz_common.run(test_one_input, seeds(), DICTIONARY)


if __name__ == "__main__":
    sys.exit(main())
