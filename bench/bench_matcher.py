"""Node matcher benchmark: one message against N registered filter sets.

Run:  python bench/bench_matcher.py            (about 3 minutes: 100,000 sets per shape)
      python bench/bench_matcher.py --quick    (up to 10,000 sets, a smoke run)
      --cpu: rates by the process's CPU time, not the wall clock (a machine shared with other
      work); PYTHONPATH=DIR runs another source tree's matcher with this bench

For each shape of filter set and each N, the baseline is the naive per-link
loop (every link's ``LinkFilter.matches``), measured in the same run on the same
messages, so the ratio does not depend on the machine; the two must agree on
every message measured. Messages are encoded bytes, wrapped in a fresh
``FilterMessage`` per match, so decoding the fields the index reads is counted;
the rate with the views already decoded is shown too. Shapes:

  equality     ``key = 'k<i>'``: one set matches each message
  mixed        IN lists, LIKE prefixes, ranges, property filters (exact and &p:),
               legacy direct bindings, conjunctions
  residue      ``LOWER(key) = 'k<i>'``: nothing indexable, every set evaluated

Then attach and detach: registers and unregisters per second with 10,000 links
on the node, and the matcher's memory per link (tracemalloc; the compiled sets
are not counted). Results go into docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import gc
import random
import time
import tracemalloc
from collections.abc import Callable

from proton import Described, symbol

from filtex_proton.amqp.message import encode_message
from filtex_proton.limits import Limits
from filtex_proton.matcher import NodeMatcher
from filtex_proton.plugin import FilterMessage, FiltexPlugin, LinkFilter

PLUGIN = FiltexPlugin(limits=Limits(eval_budget_ms=1e9))  # no budget noise in the timings
SQL = symbol("amqp:sql-filter")


def _link(filters: dict[str, Described]) -> LinkFilter:
    return LinkFilter(PLUGIN.compile({symbol(k): v for k, v in filters.items()}), None)


def _sql(text: str) -> dict[str, Described]:
    return {"f": Described(SQL, text)}


def equality(i: int) -> dict[str, Described]:
    return _sql(f"key = 'k{i}'")


def mixed(i: int) -> dict[str, Described]:
    shape = i % 6
    if shape == 0:
        return _sql(f"key IN ('k{i}', 'k{i + 1}', 'k{i + 2}')")
    if shape == 1:
        return _sql(f"key LIKE 'k{i}%'")
    if shape == 2:
        return _sql(f"amount BETWEEN {i} AND {i + 10} AND region = 'r{i % 50}'")
    if shape == 3:
        return {"p": Described(symbol("amqp:application-properties-filter"),
                               {"key": f"k{i}", "region": "&p:r"})}
    if shape == 4:
        return {"d": Described(symbol("apache.org:legacy-amqp-direct-binding:string"),
                               f"orders.k{i}")}
    return _sql(f"key = 'k{i}' AND amount > {i % 1000} AND EXISTS(region)")


def residue(i: int) -> dict[str, Described]:
    return _sql(f"LOWER(key) = 'k{i}'")


SHAPES: dict[str, Callable[[int], dict[str, Described]]] = {
    "equality": equality, "mixed": mixed, "residue": residue,
}


def messages(n_sets: int, count: int = 256) -> list[bytes]:
    rng = random.Random(7)
    out = []
    for _ in range(count):
        i = rng.randrange(max(n_sets, 1))
        out.append(encode_message(
            properties={"subject": f"orders.k{i}"},
            application_properties={"key": f"k{i}", "amount": i + 3, "region": f"r{i % 50}",
                                    "note": "x" * 20},
            body="payload"))
    return out


def _rate(run: Callable[[bytes], object], data: list[bytes], seconds: float,
          clock: Callable[[], float]) -> float:
    """Messages per second over at least ``seconds`` and at least two messages."""
    done, start = 0, clock()
    while True:
        for item in data:
            run(item)
            done += 1
            elapsed = clock() - start
            if elapsed >= seconds and done >= 2:
                return done / elapsed


def measure(shape: str, n_sets: int, seconds: float, clock: Callable[[], float]) -> None:
    build = SHAPES[shape]
    links = [_link(build(i)) for i in range(n_sets)]
    matcher: NodeMatcher[int] = NodeMatcher()
    for i, link in enumerate(links):
        matcher.register(i, link)
    data = messages(n_sets)
    pairs = list(enumerate(links))

    def naive(item: bytes) -> tuple[int, ...]:
        message = FilterMessage(item)
        return tuple(i for i, link in pairs if link.matches(message))

    def indexed(item: bytes) -> tuple[int, ...]:
        return matcher.match(FilterMessage(item)).matched

    for item in data[:32]:  # the two must agree before they are timed
        assert naive(item) == indexed(item), (shape, n_sets)
    views = [FilterMessage(item) for item in data]
    for view in views:
        view.view.section  # noqa: B018  (decode on first use; we want it done)
    by_view = dict(zip(data, views, strict=True))
    decoded_rate = _rate(lambda item: matcher.match(by_view[item]), data, seconds, clock)
    baseline = _rate(naive, data, seconds, clock)
    rate = _rate(indexed, data, seconds, clock)
    print(f"{shape:>9} {n_sets:>8,} sets: naive {baseline:>11,.0f} msg/s   "
          f"matcher {rate:>9,.0f} msg/s ({decoded_rate:>9,.0f} decoded)   "
          f"x{rate / baseline:>9,.1f}")
    gc.collect()


def attach_detach(n_links: int, clock: Callable[[], float]) -> None:
    links = [_link(mixed(i)) for i in range(n_links)]
    compiled = clock()
    _ = [_link(mixed(i)) for i in range(1000)]
    compile_rate = 1000 / (clock() - compiled)
    gc.collect()
    tracemalloc.start()
    matcher: NodeMatcher[int] = NodeMatcher()
    start = clock()
    for i, link in enumerate(links):
        matcher.register(i, link)
    registered = clock() - start
    memory, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    start = clock()
    for i in range(n_links):
        matcher.unregister(i)
    unregistered = clock() - start
    print(f"attach/detach with {n_links:,} mixed links: {n_links / registered:,.0f} registers/s, "
          f"{n_links / unregistered:,.0f} unregisters/s, {memory / n_links:,.0f} bytes per link "
          f"in the matcher (compiling a set: {compile_rate:,.0f}/s, not counted)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="up to 10,000 sets, short runs")
    parser.add_argument("--cpu", action="store_true",
                        help="rates by the process's CPU time (a shared machine)")
    args = parser.parse_args()
    sizes = (0, 1000, 10000) if args.quick else (0, 1000, 10000, 100000)
    seconds = 0.3 if args.quick else 1.5
    clock = time.process_time if args.cpu else time.perf_counter
    for shape in SHAPES:
        for n_sets in sizes:
            measure(shape, n_sets, seconds, clock)
    attach_detach(10000, clock)


if __name__ == "__main__":
    main()
