"""Pathological LIKE patterns on long strings (§6.4.3.2, §7.1): correct, and linear.

Linearity is shown without a clock, by counting work: the matcher searches each
segment between two '%' once, each search starting where the previous match
ended, so the spans it scans are disjoint and add up to at most the string's
length, whatever the string's length (1 KB to 1 MB) and however the pattern is
built. The timings are in bench/bench_hostile.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filtex_proton.amqp.view import DictMessageView
from filtex_proton.sql import compile_sql, like
from filtex_proton.sql.like import LikeError, compile_like

from .hostile_support import refusal

MB = 1_000_000
SIZES = [1_000, 10_000, 100_000, MB]


def reference_like(text: str, pattern: str, escape: str | None) -> bool:
    """Obviously-correct LIKE: an NFA over the pattern's items, O(len(text) * len(pattern))."""
    items: list[str | None] = []  # a character, "%" as None... "_" as ""
    chars = iter(pattern)
    for char in chars:
        if escape is not None and char == escape:
            escaped = next(chars, None)
            if escaped is None:
                raise LikeError("ends with the escape")
            items.append(escaped * 1 + "\x00")  # a literal, marked
        elif char == "%":
            items.append(None)
        elif char == "_":
            items.append("")
        else:
            items.append(char + "\x00")

    def closure(states: set[int]) -> set[int]:
        result = set(states)
        for start in sorted(states):
            state = start
            while state < len(items) and items[state] is None:
                state += 1
                result.add(state)
        return result

    states = closure({0})
    for char in text:
        following: set[int] = set()
        for state in states:
            if state == len(items):
                continue
            item = items[state]
            if item is None:
                following.add(state)
            elif item == "" or item[0] == char:
                following.add(state + 1)
        states = closure(following)
        if not states:
            return False
    return len(items) in states


# ---------------------------------------------------------------------------- correctness

Text = Callable[[int], str]
CASES: list[tuple[str, str, str | None, Text, bool]] = [
    # (name, pattern, escape, the text for a size n, expected)
    ("many %a then b, no b", "%a" * 1000 + "%b", None, lambda n: "a" * n, False),
    ("many %a then b, b at the end", "%a" * 1000 + "%b", None, lambda n: "a" * n + "b", True),
    ("many %a then b%, no b", "%a" * 1000 + "%b%", None, lambda n: "a" * n, False),
    ("%_ repeated", "%_" * 1000 + "%", None, lambda n: "a" * n, True),
    ("a_ segment then b, no b", "%" + "a_" * 100 + "b%", None, lambda n: "a" * n, False),
    ("a_ segment then b, b at the end", "%" + "a_" * 100 + "b%", None,
     lambda n: "a" * n + "b", True),
    ("escaped % repeated", "%" + "\\%" * 1000, "\\", lambda n: "%" * n, True),
    ("escaped _ in the middle", "%\\_%", "\\", lambda n: "a" * n, False),
    ("escaped _ at the end", "%\\_%", "\\", lambda n: "a" * n + "_", True),
    ("the escape is %: no wildcard left", "%%%%a", "%", lambda n: "%%a" * n, False),
    ("the escape is %, literal text", "%%%%a", "%", lambda n: "%%a", True),
    ("%x%y%z% interleaved, z missing", "%x%y%" * 500 + "z%", None,
     lambda n: "xy" * (n // 2), False),
]


@pytest.mark.parametrize(("pattern", "escape", "text", "expected"),
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_pathological_patterns_on_1_mb_are_correct(pattern: str, escape: str | None,
                                                   text: Text, expected: bool) -> None:
    matcher = compile_like(pattern, escape)
    assert matcher(text(MB)) is expected
    small = text(2_000)
    assert matcher(small) is reference_like(small, pattern, escape) is expected


def test_many_underscores_match_exactly_that_many_characters() -> None:
    matcher = compile_like("_" * 8000)
    assert matcher("x" * 8000) is True
    assert matcher("x" * 7999) is False
    assert matcher("x" * MB) is False
    assert compile_like("%" + "_" * 8000 + "%")("x" * MB) is True
    assert compile_like("_%_%_")("\n" * 3) is True  # '_' is any character, newline included


def test_pattern_ending_in_its_escape_is_refused() -> None:
    with pytest.raises(LikeError):
        compile_like("abc\\", "\\")
    error = refusal(lambda: compile_sql("a LIKE 'abc!' ESCAPE '!'"))
    assert error.limit is False


def test_like_through_sql_on_a_1_mb_property() -> None:
    pattern = "%a" * 2000 + "%b"  # 4002 characters: within the SQL length limit
    compiled = compile_sql(f"a LIKE '{pattern}'")
    assert compiled.evaluate(DictMessageView(application_properties={"a": "a" * MB})) is False
    assert compiled.evaluate(DictMessageView(application_properties={"a": "a" * MB + "b"}))
    runtime = compile_sql("a LIKE p ESCAPE '!'")  # a pattern from the message: NULL if invalid
    view = DictMessageView(application_properties={"a": "x" * MB, "p": "%x!"})
    assert runtime.evaluate(view) is None


@settings(max_examples=500, deadline=None)
@given(text=st.text(alphabet="ab%_!", max_size=12), pattern=st.text(alphabet="ab%_!", max_size=8),
       escape=st.sampled_from([None, "!", "%", "a"]))
def test_like_agrees_with_the_reference(text: str, pattern: str, escape: str | None) -> None:
    try:
        expected = reference_like(text, pattern, escape)
    except LikeError:
        with pytest.raises(LikeError):
            compile_like(pattern, escape)
        return
    assert compile_like(pattern, escape)(text) is expected


# ---------------------------------------------------------------------------- linearity


class WorkCounter:
    """Wraps the matcher's segment searches and records (start, found, segment length)."""

    def __init__(self) -> None:
        self.searches: list[tuple[int, int, int]] = []
        self.anchored = 0

    def finder(self, real: Callable[[like.Segment], Callable[[str, int], int]]
               ) -> Callable[[like.Segment], Callable[[str, int], int]]:
        def make(segment: like.Segment) -> Callable[[str, int], int]:
            find = real(segment)
            length = len(segment.items)

            def counted(text: str, start: int) -> int:
                found = find(text, start)
                self.searches.append((start, found, length))
                return found

            return counted

        return make

    def at(self, real: Callable[[like.Segment], Callable[[str, int], bool]]
           ) -> Callable[[like.Segment], Callable[[str, int], bool]]:
        def make(segment: like.Segment) -> Callable[[str, int], bool]:
            test = real(segment)

            def counted(text: str, position: int) -> bool:
                self.anchored += 1
                return test(text, position)

            return counted

        return make

    def scanned(self, n: int) -> int:
        """Characters the searches looked at: from each start to the end of its match."""
        return sum((found + length if found >= 0 else n) - start
                   for start, found, length in self.searches)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[WorkCounter]:
    counter = WorkCounter()
    monkeypatch.setattr(like, "_finder", counter.finder(like._finder))
    monkeypatch.setattr(like, "_at", counter.at(like._at))
    yield counter


LINEAR_CASES = [case for case in CASES if len(like.segments(case[1], case[2])) > 3]


@pytest.mark.parametrize(("pattern", "escape", "text", "expected"),
                         [case[1:] for case in LINEAR_CASES],
                         ids=[case[0] for case in LINEAR_CASES])
def test_work_does_not_grow_faster_than_the_string(counted: WorkCounter, pattern: str,
                                                   escape: str | None, text: Text,
                                                   expected: bool) -> None:
    matcher = compile_like.__wrapped__(pattern, escape)  # a fresh matcher, counted
    middle = len(like.segments(pattern, escape)) - 2
    per_size: list[int] = []
    for n in SIZES:
        counted.searches.clear()
        counted.anchored = 0
        subject = text(n)
        assert matcher(subject) is expected
        # each segment between two '%' is searched for at most once ...
        assert len(counted.searches) <= middle
        # ... from where the previous one matched: no position is searched from twice
        starts = [start for start, _, _ in counted.searches]
        assert starts == sorted(starts)
        for (_, found, length), (start, _, _) in zip(counted.searches, counted.searches[1:],
                                                     strict=False):
            assert start == found + length
        assert counted.anchored <= 2  # the first and last segments, tested in place
        assert counted.scanned(len(subject)) <= len(subject) + len(pattern)
        per_size.append(len(counted.searches) + counted.anchored)
    # the number of searches does not grow with n (1 KB may be shorter than the pattern
    # needs, and is then refused before any search)
    assert max(per_size) <= middle + 2
    assert len(set(per_size[1:])) == 1, per_size


# ---------------------------------------------------------------------------- long '_' segments
# A segment holding '_' longer than REGEX_SEGMENT_MAX is found by Shift-And (one step per
# character), not by a regular expression (segment length steps per character).

LONG = like.REGEX_SEGMENT_MAX + 1


@settings(max_examples=200, deadline=None)
@given(
    chunks=st.lists(st.text(alphabet="ab_", min_size=LONG, max_size=LONG + 40), min_size=1,
                    max_size=3),
    text=st.text(alphabet="ab", max_size=700),
    anchors=st.tuples(st.booleans(), st.booleans()),
)
def test_long_wildcard_segments_agree_with_the_reference(
    chunks: list[str], text: str, anchors: tuple[bool, bool]
) -> None:
    pattern = ("" if anchors[0] else "%") + "%".join(chunks) + ("" if anchors[1] else "%")
    assert compile_like(pattern)(text) is reference_like(text, pattern, None)


@settings(max_examples=200, deadline=None)
@given(items=st.text(alphabet="ab_", min_size=1, max_size=12), text=st.text(alphabet="ab\n"),
       start=st.integers(min_value=0, max_value=20))
def test_shift_and_finds_what_the_regex_finds(items: str, text: str, start: int) -> None:
    segment = like.Segment(tuple(None if c == "_" else c for c in items))
    regex = segment.regex()
    found = regex.search(text, start)
    expected = -1 if found is None else found.start()
    assert like._shift_and(segment)(text, start) == expected


def test_long_wildcard_segments_are_scanned_not_retried() -> None:
    short = like.Segment(tuple(["a", None] * 10 + ["b"]))
    long = like.Segment(tuple(["a", None] * 100 + ["b"]))
    assert "_shift_and" not in like._finder(short).__qualname__
    assert "_shift_and" in like._finder(long).__qualname__
    # the worst case for a regex: every start position matches all but the last character
    matcher = compile_like("%" + "a_" * 1000 + "b%")
    assert matcher("a" * MB) is False
    assert matcher("a" * MB + "b") is True
    assert matcher("a" * 2000 + "b" + "a" * 10) is True
    # a match straddling the scan's chunk boundary
    assert like._shift_and(long)("c" * 8100 + "a" * 200 + "b", 0) == 8100


def test_wildcard_segments_beyond_the_maximum_are_refused() -> None:
    too_long = "%" + "_" * (like.MAX_WILDCARD_SEGMENT + 1) + "%"
    with pytest.raises(LikeError, match="more than"):
        compile_like(too_long)
    literal = compile_like("%" + "x" * (like.MAX_WILDCARD_SEGMENT + 1) + "%")  # no '_': fine
    assert literal("x" * 9000) is True and literal("x" * 8000) is False
    runtime = compile_sql("a LIKE p")  # from a message: NULL, never a stall
    view = DictMessageView(application_properties={"a": "x" * MB, "p": too_long})
    assert runtime.evaluate(view) is None


def test_long_patterns_from_messages_are_not_cached() -> None:
    before = like._compile_cached.cache_info().currsize
    for n in range(5):
        assert compile_like("%" + "y" * 5000 + str(n) + "%")("y") is False
    assert like._compile_cached.cache_info().currsize == before
