"""Hostile-input benchmark: LIKE scaling, compile time up to the limit, decoding of deep and
lying inputs, each against a benign baseline measured in the same run.

Run:  python bench/bench_hostile.py            (about 20 s)
      python bench/bench_hostile.py --quick    (a smoke run)

1. LIKE: time against string length, 1 KB to 1 MB, for pathological patterns; the ratio
   per 10x length should be about 10 (linear). A benign pattern on the same strings is
   the baseline. Then, at 1 MB, time against the length of a segment holding '_'
   (the one shape whose cost also grows with the pattern: see the note printed).
2. Compile: time against SQL length up to the 8 KiB limit for benign and hostile
   shapes, and for texts refused by a limit (refusals should cost no more than accepts).
3. Decode: hostile filter sets (10,000-deep groups as proton.Data and as Python values,
   wide sets) and hostile messages (lying sizes, 10,000-deep nesting, bad UTF-8, odd
   maps) against benign ones of a similar size.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from proton import Data, Described, symbol, uint

from filtex_proton.amqp import DecodeError
from filtex_proton.amqp.message import RawMessageView, encode_message
from filtex_proton.amqp.view import Section
from filtex_proton.errors import FilterError
from filtex_proton.filters.wire import max_nesting, read_data, write_data
from filtex_proton.filterset import decode_filter_set
from filtex_proton.limits import DEFAULT_LIMITS
from filtex_proton.sql import compile_sql, like
from filtex_proton.sql.like import compile_like

SIZES = (1_000, 10_000, 100_000, 1_000_000)


def best_time(action: Callable[[], object], budget: float, max_runs: int = 1000) -> float:
    """The fastest of repeated runs, in seconds (at least 3 runs, about ``budget`` seconds)."""
    samples: list[float] = []
    spent = 0.0
    while len(samples) < 3 or (spent < budget and len(samples) < max_runs):
        start = time.perf_counter()
        action()
        elapsed = time.perf_counter() - start
        samples.append(elapsed)
        spent += elapsed
    return min(samples)


def fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:7.2f} s "
    if seconds >= 1e-3:
        return f"{seconds * 1e3:7.2f} ms"
    return f"{seconds * 1e6:7.1f} us"


def expect_refusal(action: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        try:
            action()
        except (FilterError, DecodeError):
            return
        raise AssertionError("expected a refusal")

    return run


# ----------------------------------------------------------------------------- 1. LIKE

#: Pathological patterns (at most 500 characters, so that 1 KB strings are long enough to
#: be searched) and the strings that make them work hardest.
LIKE_CASES: Sequence[tuple[str, str, Callable[[int], str]]] = (
    ("%a%a...%b% (200 segments), no b", "%a" * 200 + "%b%", lambda n: "a" * n),
    ("%a%a...%b (200 segments), no b", "%a" * 200 + "%b", lambda n: "a" * n),
    ("%aaa...ab% (500 a), all a", "%" + "a" * 500 + "b%", lambda n: "a" * n),
    ("%x%y% x80 then z%, no z", "%x%y%" * 80 + "z%", lambda n: "xy" * (n // 2)),
    ("%_%_...% (200 segments)", "%_" * 200 + "%", lambda n: "a" * n),
    ("_ x500 (fixed length)", "_" * 500, lambda n: "a" * n),
    ("%\\%\\%...x% (200 escaped %)", "%" + "\\%" * 200 + "x%", lambda n: "%" * n),
    ("%a_a_...b% (segment of 21)", "%" + "a_" * 10 + "b%", lambda n: "a" * n),
)
BENIGN_LIKE = "%needle%"


def bench_like(budget: float) -> None:
    print("== 1. LIKE: time against string length (ratio per 10x length; linear is ~10x)")
    benign = compile_like(BENIGN_LIKE)
    plain = {n: "a" * n for n in SIZES}
    baseline = {n: best_time(functools.partial(benign, plain[n]), budget) for n in SIZES}
    header = "".join(f"{n:>12,}" for n in SIZES)
    print(f"{'pattern':<40}{header}   ratios per 10x   vs benign at 1 MB")
    print(f"{'benign ' + BENIGN_LIKE!r:<40}" + "".join(f"{fmt(baseline[n]):>12}" for n in SIZES)
          + "   " + _ratios([baseline[n] for n in SIZES]))
    for name, pattern, text in LIKE_CASES:
        matcher = compile_like(pattern, "\\")
        strings = {n: text(n) for n in SIZES}
        times = [best_time(functools.partial(matcher, strings[n]), budget) for n in SIZES]
        print(f"{name:<40}" + "".join(f"{fmt(t):>12}" for t in times) + "   "
              + _ratios(times) + f"   {times[-1] / baseline[SIZES[-1]]:8.1f}x")
    print("\n   at 1 MB, a '%...%' segment holding '_' (a_a_..b) of growing length, the worst\n"
          "   case for a regex (every start matches all but the last character):")
    subject = "a" * SIZES[-1]
    print(f"   {'segment':>9}  {'as found now':>12}  {'regex only':>12}")
    for pairs in (10, 80, 100, 1000, 4000):
        pattern = "%" + "a_" * pairs + "b%"
        now = best_time(functools.partial(compile_like(pattern), subject), budget, 3)
        regex = best_time(functools.partial(_regex_only(pattern), subject), budget, 3)
        print(f"   {2 * pairs + 1:>9}  {fmt(now):>12}  {fmt(regex):>12}")
    print(f"   (segments up to {like.REGEX_SEGMENT_MAX} characters are regex searches, longer ones"
          " a Shift-And scan:\n    one step per character; the budget is checked between"
          " filters, not inside one LIKE)\n")


def _regex_only(pattern: str) -> Callable[[str], bool]:
    """The pattern compiled as before Shift-And: every '_' segment a regex search."""
    saved = like.REGEX_SEGMENT_MAX
    like.REGEX_SEGMENT_MAX = 10**9  # type: ignore[misc]
    try:
        return like.compile_like.__wrapped__(pattern, None)  # type: ignore[attr-defined,no-any-return]
    finally:
        like.REGEX_SEGMENT_MAX = saved  # type: ignore[misc]


def _ratios(times: Sequence[float]) -> str:
    return " ".join(f"{b / a:5.1f}" for a, b in itertools.pairwise(times))


# ----------------------------------------------------------------------------- 2. compile


def fit(build: Callable[[int], str], length: int) -> str:
    """The longest ``build(n)`` no longer than ``length``."""
    low, high = 0, 1
    while len(build(high)) <= length:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if len(build(middle)) <= length:
            low = middle
        else:
            high = middle
    return build(low)


COMPILE_SHAPES: Sequence[tuple[str, Callable[[int], str]]] = (
    ("benign: AND of comparisons", lambda n: " AND ".join(f"f{i} = {i}" for i in range(n))),
    ("IN list", lambda n: "a IN (" + ", ".join(str(i) for i in range(n)) + ")"),
    ("parentheses (no nodes)", lambda n: "(" * n + "a = 1" + ")" * n),
    ("string literal", lambda n: "a = '" + "x" * n + "'"),
    ("LIKE of many wildcards", lambda n: "a LIKE '" + "%_" * n + "'"),
    ("delimited names", lambda n: " OR ".join(f"[n {i}] = 1" for i in range(n))),
)
REFUSED: Sequence[tuple[str, Callable[[], object]]] = (
    ("8 KiB + 1 (length limit)", lambda: compile_sql("a = '" + "x" * 8187 + "'")),
    ("NOT x2000 (depth limit)", lambda: compile_sql("NOT " * 2000 + "a")),
    ("a=1 OR ... x1100 (node limit)", lambda: compile_sql(" OR ".join(["a=1"] * 1100))),
    ("IN of 1,900 values (IN limit)", lambda: compile_sql(
        "a IN (" + ",".join(["1"] * 1900) + ")")),
    ("integer of 8,000 digits", lambda: compile_sql("a = " + "9" * 8000)),
    ("syntax error at the end of 8 KiB", lambda: compile_sql("a = 1 AND " * 818 + "(")),
)


def bench_compile(budget: float) -> None:
    limit = DEFAULT_LIMITS.max_sql_length
    lengths = (256, 1024, 4096, limit)
    print(f"== 2. compile time against SQL length (up to the {limit}-character limit)")
    compile_sql("a = 1")  # build the parser once, as a running broker has
    print(f"{'shape':<32}" + "".join(f"{n:>11,}" for n in lengths) + "   x per 4x length")
    baseline: list[float] = []
    for index, (name, build) in enumerate(COMPILE_SHAPES):
        times: list[float] = []
        for length in lengths:
            text = fit(build, length)
            run: Callable[[], object] = functools.partial(compile_sql, text)
            try:
                run()
            except FilterError:
                run = expect_refusal(run)
            times.append(best_time(run, budget / 4, 200))
        if index == 0:
            baseline = times
        print(f"{name:<32}" + "".join(f"{fmt(t):>11}" for t in times) + "   "
              + " ".join(f"{b / a:4.1f}" for a, b in itertools.pairwise(times))
              + ("" if index == 0 else f"   ({times[-1] / baseline[-1]:.1f}x benign at 8 KiB)"))
    print("   refused by a limit or an error (against the benign 8 KiB compile):")
    for name, action in REFUSED:
        seconds = best_time(expect_refusal(action), budget / 4, 200)
        print(f"   {name:<38}{fmt(seconds)}   {seconds / baseline[-1]:5.2f}x")
    print()


# ----------------------------------------------------------------------------- 3. decode


def deep_group(depth: int) -> Described:
    value = Described(symbol("amqp:true-filter"), True)
    for _ in range(depth):
        value = Described(symbol("amqp:not-filter"), [value])
    return value


def as_wire_data(value: Any) -> Data:
    data = Data()
    write_data(value, data)
    wire = Data()
    wire.decode(data.encode())
    return wire


def nested_lists(depth: int) -> bytes:
    inner = b"\x45"
    for _ in range(depth):
        inner = b"\xd0" + (len(inner) + 4).to_bytes(4, "big") + b"\x00\x00\x00\x01" + inner
    return inner


def app_props(key: bytes, value: bytes) -> bytes:
    body = key + value
    return b"\x00\x53\x74\xd1" + (len(body) + 4).to_bytes(4, "big") + b"\x00\x00\x00\x02" + body


def read_all(data: bytes) -> None:
    """Scan the message and read every section (a DecodeError is an answer too)."""
    try:
        view = RawMessageView(data)
        for section in Section:
            view.section(section)
    except DecodeError:
        pass


def bench_decode(budget: float) -> None:
    print("== 3. decoding hostile filter sets and messages (against benign ones)")
    benign_set = {symbol(f"f{i}"): Described(symbol("amqp:sql-filter"), f"a = {i}")
                  for i in range(8)}
    benign_data = as_wire_data(benign_set)
    base_set = best_time(lambda: decode_filter_set(benign_data), budget)
    print(f"   benign filter set (8 SQL filters, proton.Data): {fmt(base_set)}")
    hostile_sets: Sequence[tuple[str, Any]] = (
        ("groups 10,000 deep, proton.Data", as_wire_data({symbol("d"): deep_group(10_000)})),
        ("groups 10,000 deep, Python values", {symbol("d"): deep_group(10_000)}),
        ("10,000 filters, proton.Data", as_wire_data(
            {symbol(f"f{i}"): Described(symbol("amqp:true-filter"), True)
             for i in range(10_000)})),
        ("group of 20,000 members, proton.Data", as_wire_data(
            {symbol("w"): Described(symbol("amqp:any-filter"),
                                    [Described(symbol("amqp:true-filter"), True)] * 20_000)})),
        ("property value 10,000 deep, Python", {symbol("p"): Described(
            symbol("amqp:application-properties-filter"), {"a": _deep_list(10_000)})}),
        ("property map of 30,000 entries, Data", as_wire_data({symbol("p"): Described(
            symbol("amqp:application-properties-filter"),
            {f"k{i}": i for i in range(30_000)})})),
    )
    for name, source in hostile_sets:
        seconds = best_time(expect_refusal(functools.partial(decode_filter_set, source)),
                            budget, 100)
        print(f"   {name:<40}{fmt(seconds)}   {seconds / base_set:8.1f}x  (refused by a limit)")
    print("   the two wide ones read whole, as before the width bound (depth bound only):")
    depth_only = max_nesting(DEFAULT_LIMITS).depth
    for name, source in hostile_sets[3::2]:
        seconds = best_time(functools.partial(_read_whole, source, depth_only), budget, 100)
        print(f"   {name:<40}{fmt(seconds)}   {seconds / base_set:8.1f}x")

    big = encode_message(application_properties={f"k{i}": i for i in range(2_000)}, body="x")
    base_msg = best_time(lambda: read_all(big), budget)
    print(f"\n   benign message ({len(big):,} bytes, 2,000 properties), read fully: "
          f"{fmt(base_msg)}")
    hostile_messages: Sequence[tuple[str, bytes]] = (
        ("lists 10,000 deep (90 KB)", app_props(b"\xa1\x01a", nested_lists(10_000))),
        ("list32 claiming 4 GiB", b"\x00\x53\x70\xd0\xff\xff\xff\xff\x00\x00\x00\x01\x40"),
        ("map32 claiming 2^31 entries", b"\x00\x53\x74\xd1\x00\x00\x00\x06\x7f\xff\xff\xfe"
         b"\x40\x40"),
        ("array claiming 2^31 nulls", app_props(
            b"\xa1\x01a", b"\xf0\x00\x00\x00\x05\x7f\xff\xff\xff\x40")),
        ("invalid UTF-8 after 2,000 properties", big[:-10] + b"\xa1\x01\xff" + big[-7:]),
        ("odd map count", b"\x00\x53\x74\xc1\x04\x03\x40\x40\x40"),
        ("truncated in the middle", big[: len(big) // 2]),
        ("body 10,000 deep (skipped)", encode_message(header={"priority": 1})
         + b"\x00\x53\x77" + nested_lists(10_000)),
    )
    for name, data in hostile_messages:
        seconds = best_time(functools.partial(read_all, data), budget)
        print(f"   {name:<40}{fmt(seconds)}   {seconds / base_msg:8.2f}x")
    map_bench(budget)


def _read_whole(source: Data, depth: int) -> None:
    """Every entry of a filter set read into Python values, with no width bound."""
    source.rewind()
    source.next()
    source.enter()
    while source.next() is not None:
        read_data(source, depth)
    source.exit()


def _deep_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def map_bench(budget: float) -> None:
    """A 250-key nested reference map against a 100,000-entry message map, keys at the end."""
    reference: dict[Any, Any] = {f"k{i}": 1 for i in range(250)}
    filter_set = decode_filter_set({"p": Described(
        symbol("amqp:application-properties-filter"), {"cfg": reference})})
    entries: dict[Any, Any] = {uint(i): None for i in range(100_000)}
    entries.update(reference)
    view = RawMessageView(encode_message(application_properties={"cfg": entries}))
    view.section(Section.APPLICATION_PROPERTIES)
    small = RawMessageView(encode_message(application_properties={"cfg": reference}))
    small.section(Section.APPLICATION_PROPERTIES)
    hostile = best_time(lambda: filter_set.matches(view), budget, 20)
    benign = best_time(lambda: filter_set.matches(small), budget)
    print(f"\n   250-key reference map, message map of 100,250 entries: {fmt(hostile)}"
          f"   ({hostile / benign:.0f}x the 250-entry message, {benign * 1e6:.0f} us; "
          "entries x400)")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs, for a smoke test")
    options = parser.parse_args(argv)
    budget = 0.05 if options.quick else 0.5
    started = time.perf_counter()
    bench_like(budget)
    bench_compile(budget)
    bench_decode(budget)
    print(f"\n(total {time.perf_counter() - started:.0f} s; times are the best of repeated runs)")


if __name__ == "__main__":
    main()
