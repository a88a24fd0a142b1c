"""SQL filter benchmark: compile time, and compiled vs reference evaluation rate.

Run:  python bench/bench_sql.py            (about 30 s)
      python bench/bench_sql.py --quick    (a smoke run)

The baseline is the reference interpreter (a plain tree walker) measured in the
same run against the same pre-decoded message views, so the ratio does not
depend on the machine. Results go into docs/PERFORMANCE.md.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable, Sequence
from decimal import Decimal

from proton import symbol, timestamp, ubyte, uint

from filtex_proton.amqp.view import DictMessageView, MessageView
from filtex_proton.sql import AMQP_SQL, JMS_SELECTOR, Dialect, compile_sql
from filtex_proton.sql.reference import interpret_truth

RABBITMQ_BLOG = (
    "p.subject='order.created' AND p.creation_time > UTC()-3600000 AND region IN ('EU','US') "
    "AND (h.priority>4 OR price>=99.99 OR premium_customer=TRUE)"
)
FILTERS: Sequence[tuple[str, str, Dialect]] = (
    ("rabbitmq blog", RABBITMQ_BLOG, AMQP_SQL),
    ("equality", "color = 'blue'", AMQP_SQL),
    ("header priority", "h.priority > 4", AMQP_SQL),
    ("IN list", "region IN ('EU', 'US', 'APAC', 'LATAM', 'MEA')", AMQP_SQL),
    ("LIKE prefix", "p.subject LIKE 'order.%'", AMQP_SQL),
    ("LIKE general", "p.subject LIKE '%.cr_ated%' ESCAPE '!'", AMQP_SQL),
    ("arithmetic", "price * quantity > 1000 AND currency = 'EUR'", AMQP_SQL),
    ("exists/null", "EXISTS(p.correlation-id) AND p.reply-to IS NOT NULL", AMQP_SQL),
    ("functions", "LOWER(customer) = 'acme' OR UPPER(region) = 'EU'", AMQP_SQL),
    ("map/list ref", "m.[x-opt-partition][0] = 3 AND NOT (cancelled = TRUE)", AMQP_SQL),
    ("jms selector", "JMSPriority > 4 AND JMSType = 'order' AND amount BETWEEN 100 AND 5000",
     JMS_SELECTOR),
)
#: A filter of 200 characters, for the compile-time target (< 1 ms).
COMPILE_200 = (
    "p.subject = 'order.created' AND region IN ('EU', 'US', 'APAC') AND "
    "(h.priority > 4 OR price >= 99.99) AND customer LIKE 'acme%' AND "
    "NOT cancelled AND EXISTS(p.reply-to) AND quantity * price < 10000"
)


def messages() -> list[MessageView]:
    """Eight varied messages: some match each filter, some do not, some lack fields."""
    now = int(time.time() * 1000)
    result: list[MessageView] = []
    for i in range(8):
        result.append(DictMessageView(
            header={"priority": ubyte(3 + i % 4), "durable": i % 2 == 0},
            properties={
                "subject": ["order.created", "order.cancelled", "invoice.sent"][i % 3],
                "creation-time": timestamp(now - 1000 * i),
                "correlation-id": f"c-{i}" if i % 2 else None,
                "reply-to": "replies" if i % 3 else None,
            },
            message_annotations={
                symbol("x-opt-partition"): [i % 4, 1], symbol("x-opt-jms-type"): "order",
            },
            application_properties={
                "region": ["EU", "US", "APAC", "LATAM"][i % 4],
                "price": 50.0 + 20 * i,
                "premium_customer": i % 5 == 0,
                "color": ["blue", "red"][i % 2],
                "quantity": uint(i * 3),
                "currency": ["EUR", "USD"][i % 2],
                "customer": ["ACME", "Initech"][i % 2],
                "cancelled": i % 4 == 1,
                "amount": Decimal("100.5") * i,
            },
        ))
    return result


def rate(evaluate: Callable[[MessageView], object], views: Sequence[MessageView],
         seconds: float) -> float:
    """Evaluations per second, over whole passes through ``views``, best of 3 runs."""
    best = 0.0
    for _ in range(3):
        count, start = 0, time.perf_counter()
        deadline = start + seconds / 3
        while True:
            for view in views:
                evaluate(view)
            count += len(views)
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, count / (now - start))
    return best


def compile_time_ms(text: str, runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        compile_sql(text)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs, for a smoke test")
    options = parser.parse_args(argv)
    seconds = 0.3 if options.quick else 2.0
    views = messages()

    compile_sql(COMPILE_200)  # build the parser once, as a running broker has
    print(f"compile ({len(COMPILE_200)}-char filter): "
          f"{compile_time_ms(COMPILE_200, 50 if options.quick else 500):.3f} ms median")
    print(f"compile (rabbitmq blog filter, {len(RABBITMQ_BLOG)} chars): "
          f"{compile_time_ms(RABBITMQ_BLOG, 50 if options.quick else 500):.3f} ms median\n")

    print(f"{'filter':<16} {'compiled/s':>12} {'reference/s':>12} {'ratio':>7}")
    ratios = []
    for name, text, dialect in FILTERS:
        compiled = compile_sql(text, dialect)
        tree = compiled.ast
        for view in views:  # the two executors must agree before their speed means anything
            assert compiled.evaluate(view) == interpret_truth(tree, view, dialect), (name, view)
        fast = rate(compiled.evaluate, views, seconds)
        slow = rate(functools.partial(interpret_truth, tree, dialect=dialect), views, seconds)
        ratios.append(fast / slow)
        print(f"{name:<16} {fast:>12,.0f} {slow:>12,.0f} {fast / slow:>6.1f}x")
    print(f"\ngeometric mean ratio compiled/reference: {statistics.geometric_mean(ratios):.1f}x")


if __name__ == "__main__":
    main()
