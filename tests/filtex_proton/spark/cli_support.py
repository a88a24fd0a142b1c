"""What the filtex-spark command tests share: the filter they select with, the command run in
this process, and what the engine says the answer is."""

from __future__ import annotations

import io

from filtex_proton.spark.cli import main

from .conftest import Corpus, engine_matches

FILTER = "p.subject LIKE 'order%' AND h.priority >= 4"


def run(argv: list[str], stdin: str = "") -> tuple[int, str]:
    """``filtex-spark ARGV`` in this process (the test session's Spark); status and stdout."""
    out = io.StringIO()
    status = main(argv, stdin=io.StringIO(stdin), stdout=out)
    return status, out.getvalue()


def expected_bytes(corpus: Corpus, text: str) -> list[bytes]:
    """The corpus messages the engine matches with ``text``, in archive order."""
    from filtex_proton.spark import as_filter_set

    filter_set = as_filter_set(text)
    return [data for data in corpus.data if engine_matches(filter_set, data)]
