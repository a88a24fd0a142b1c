"""Helpers for the hostile-input tests: the fuzz targets' fixed inputs, and refusal checks.

The fixed views, seeds and structured builders live with the fuzz targets
(``fuzz/fuzz_views.py``) so that the fuzzers and these tests agree on them;
this module puts ``fuzz/`` on the import path (without atheris) and re-exports
what the tests use.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from filtex_proton.errors import GENERIC_LIMIT_TEXT, FilterError

ROOT = Path(__file__).resolve().parents[2]
FUZZ_DIR = ROOT / "fuzz"
os.environ.setdefault("FILTEX_FUZZ_PLAIN", "1")  # no atheris instrumentation in the test run
if str(FUZZ_DIR) not in sys.path:
    sys.path.insert(0, str(FUZZ_DIR))

fuzz_views: Any = importlib.import_module("fuzz_views")


def fuzz_target(name: str) -> ModuleType:
    """One of the fuzz targets (``fuzz_sql``, ``fuzz_filter_set``, ``fuzz_message``)."""
    return importlib.import_module(name)


def refusal(action: Callable[[], object]) -> FilterError:
    """The FilterError ``action`` raises (anything else, or nothing, fails the test)."""
    with pytest.raises(FilterError) as info:
        action()
    return info.value


def assert_masked(error: FilterError, *secrets: str) -> None:
    """A limit refusal: the client hears the generic text only, none of ``secrets`` (§7.1),
    while the full reason is still there for the log."""
    assert error.limit is True, error.render()
    client = error.client_text()
    assert client.endswith(GENERIC_LIMIT_TEXT), client
    assert error.reason and error.reason not in client
    for secret in secrets:
        assert secret not in client, f"client text quotes {secret[:40]!r}"
    assert len(client) <= len(GENERIC_LIMIT_TEXT) + 120
    assert error.reason in error.render()


def deep_parens(depth: int, inner: str = "a = 1") -> str:
    return "(" * depth + inner + ")" * depth
