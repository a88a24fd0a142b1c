"""``filtex``: check filters by hand, before a broker refuses them.

``filtex check`` says whether a SQL filter, a JMS selector or a whole described
filter set is valid (with the error and where it is), prints the normalised
filter, and with ``--message`` evaluates it against a message written as typed
JSON (docs/TYPED_JSON.md), printing TRUE, FALSE or NULL and why.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Final, TextIO

from proton import Described, symbol

from filtex_proton.errors import FilterError
from filtex_proton.filters.base import EvaluationContext, Filter
from filtex_proton.filters.registry import decode_filter
from filtex_proton.filters.sql import SqlFilter
from filtex_proton.filters.typed_json import (
    TypedJsonError,
    filter_set_from_json,
    message_from_json,
    to_json,
)
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.limits import Limits

__all__ = ["main"]

EXIT_VALID: Final = 0
EXIT_INVALID: Final = 1
EXIT_USAGE: Final = 2

_DESCRIPTORS: Final = {
    "amqp": "amqp:sql-filter",
    "jms": "apache.org:selector-filter:string",
}

_EXAMPLES: Final = """\
examples:
  filtex check "color = 'red' AND header.priority > 4"
  filtex check --dialect jms "JMSPriority > 4 AND region LIKE 'eu-%'"
  echo "a.region IS NULL" | filtex check
  filtex check --filter-set filters.json --message message.json

  with filters.json:
    {"urgent": {"descriptor": "amqp:header-filter", "value": {"priority": {"ubyte": 9}}},
     "eu":     {"descriptor": 288, "value": "region LIKE 'eu-%'"}}
  and message.json:
    {"header": {"priority": 9},
     "properties": {"subject": "order", "creation-time": "2024-05-01T12:00:00Z"},
     "application-properties": {"region": "eu-west", "amount": {"decimal64": "12.50"}}}
  it prints:
    valid: filter set of 2 filters
    ...
    result: TRUE

Typed JSON: plain JSON strings, integers, numbers, booleans and null are AMQP
string, long, double, boolean and null; other types are one-key objects such as
{"ulong": 5}, {"symbol": "x"}, {"timestamp": 1700000000000}, {"uuid": "..."},
{"binary": "<base64>"}, {"decimal64": "1.5"}. See docs/TYPED_JSON.md.
exit status: 0 valid, 1 invalid, 2 unusable input.
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="filtex",
        description="Check AMQP filter expressions (OASIS filtex 1.0 and the Apache filters).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_EXAMPLES,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "check",
        help="validate a filter, print it normalised, optionally evaluate it",
        description="Validate a SQL filter, JMS selector or filter set; print it normalised; "
                    "with --message, evaluate it against a message.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_EXAMPLES,
    )
    check.add_argument("sql", nargs="?", help="the SQL text ('-' or nothing: read stdin)")
    check.add_argument("--dialect", choices=sorted(_DESCRIPTORS), default="amqp",
                       help="amqp: amqp:sql-filter (spec §6); jms: the JMS selector")
    check.add_argument("--filter-set", metavar="FILE.json",
                       help="a typed-JSON filter set {name: {descriptor, value}} ('-': stdin)")
    check.add_argument("--message", metavar="FILE.json",
                       help="evaluate against this typed-JSON message ('-': stdin)")
    check.add_argument("--origin", metavar="ID",
                       help="for no-local: the connection the message arrived on")
    check.add_argument("--consumer", metavar="ID",
                       help="for no-local: the connection receiving it")
    check.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                       help="override a limit, e.g. max_group_depth=4 "
                            f"(names: {', '.join(Limits.names())})")
    check.add_argument("--ast", action="store_true", help="also print the SQL syntax tree")
    return parser


class _UnusableInputError(Exception):
    """Input the command cannot work with (not a verdict on the filter): exit 2."""


def _read(path: str, stdin: TextIO) -> str:
    if path == "-":
        return stdin.read()
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise _UnusableInputError(f"cannot read {path}: {exc.strerror}") from None


def _load_json(path: str, stdin: TextIO) -> Any:
    try:
        return json.loads(_read(path, stdin))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise _UnusableInputError(f"{path}: not JSON: {exc}") from None


def _limits(pairs: Sequence[str]) -> Limits:
    values: dict[str, float] = {}
    for pair in pairs:
        name, _, text = pair.partition("=")
        if name not in Limits.names():
            known = ", ".join(Limits.names())
            raise _UnusableInputError(f"unknown limit {name!r}; limits: {known}")
        try:
            values[name] = float(text) if name == "eval_budget_ms" else int(text)
        except ValueError:
            raise _UnusableInputError(f"limit {name} needs a number, not {text!r}") from None
    try:
        return dataclasses.replace(Limits(), **values)  # type: ignore[arg-type]
    except ValueError as exc:
        raise _UnusableInputError(str(exc)) from None


def _print_invalid(error: FilterError, out: TextIO) -> int:
    print(f"invalid: {error.render()}", file=out)
    if error.limit:
        print(f"(a client is told only: {error.client_text()})", file=out)
    return EXIT_INVALID


def _check_sql(args: argparse.Namespace, limits: Limits, stdin: TextIO,
               out: TextIO) -> FilterSet | int:
    text = args.sql if args.sql not in (None, "-") else stdin.read().strip()
    descriptor = _DESCRIPTORS[args.dialect]
    try:
        compiled = decode_filter(Described(symbol(descriptor), text), limits)
    except FilterError as exc:
        return _print_invalid(exc, out)
    print(f"valid: {descriptor}", file=out)
    print("normalised:", compiled.normalised().value, file=out)
    if args.ast and isinstance(compiled, SqlFilter):
        print(f"ast: {compiled.compiled.ast!r}", file=out)
    _print_notes([compiled], out)
    return FilterSet({"sql": compiled}, limits)


def _print_notes(filters: Iterable[Filter], out: TextIO) -> None:
    """Functions that evaluate to NULL (§6.4.4.3), JMS header names in AMQP SQL and forms
    other brokers may refuse, in every SQL filter (groups included)."""
    from filtex_proton.tester import notes_on

    for note in notes_on(filters):
        print(note, file=out)


def _check_filter_set(args: argparse.Namespace, limits: Limits, stdin: TextIO,
                      out: TextIO) -> FilterSet | int:
    try:
        described = filter_set_from_json(_load_json(args.filter_set, stdin))
    except TypedJsonError as exc:
        raise _UnusableInputError(f"{args.filter_set}: {exc}") from None
    try:
        filter_set = decode_filter_set(described, limits)
    except FilterError as exc:
        return _print_invalid(exc, out)
    count = len(filter_set)
    print(f"valid: filter set of {count} filter{'s' if count != 1 else ''}", file=out)
    normalised = {str(k): to_json(v) for k, v in filter_set.normalised().items()}
    print("normalised:", json.dumps(normalised, indent=2, ensure_ascii=False), sep="\n", file=out)
    _print_notes((item for _key, item in filter_set.items()), out)
    return filter_set


def _evaluate(filter_set: FilterSet, args: argparse.Namespace, stdin: TextIO,
              out: TextIO) -> None:
    try:
        view = message_from_json(_load_json(args.message, stdin))
    except TypedJsonError as exc:
        raise _UnusableInputError(f"{args.message}: {exc}") from None
    ctx = EvaluationContext(origin=args.origin, consumer=args.consumer, explain=True)
    outcome = filter_set.evaluate(view, ctx)
    if outcome.result is None:
        print(f"result: NULL ({outcome.reason})", file=out)
    elif outcome.result:
        print("result: TRUE", file=out)
    else:
        print(f"result: FALSE ({outcome.reason})", file=out)


def _check(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    if args.filter_set is not None and args.sql is not None:
        raise _UnusableInputError("give either SQL text or --filter-set, not both")
    if args.filter_set == "-" and args.message == "-":
        raise _UnusableInputError("only one of --filter-set and --message can read stdin")
    limits = _limits(args.limit)
    if args.filter_set is not None:
        checked = _check_filter_set(args, limits, stdin, out)
    else:
        checked = _check_sql(args, limits, stdin, out)
    if isinstance(checked, int):
        return checked
    if args.message is not None:
        _evaluate(checked, args, stdin, out)
    return EXIT_VALID


def main(argv: Sequence[str] | None = None, *, stdin: TextIO | None = None,
         stdout: TextIO | None = None) -> int:
    """Run ``filtex``; returns the exit status (0 valid, 1 invalid, 2 unusable input)."""
    args = _parser().parse_args(argv)
    out = stdout if stdout is not None else sys.stdout
    try:
        return _check(args, stdin if stdin is not None else sys.stdin, out)
    except _UnusableInputError as exc:
        print(f"filtex: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
