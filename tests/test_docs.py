"""The Python snippets in the docs run as they are (docs that rot are worse than none)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _snippets(name: str) -> list[str]:
    return _BLOCK.findall((ROOT / name).read_text())


@pytest.mark.parametrize("index", range(len(_snippets("docs/PLUGIN.md"))))
def test_plugin_doc_snippet_runs(index: int) -> None:
    code = _snippets("docs/PLUGIN.md")[index]
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr


def test_plugin_doc_refusal_snippet_prints_the_position() -> None:
    code = next(s for s in _snippets("docs/PLUGIN.md") if "client_text" in s)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, check=True)
    assert "syntax error: unexpected '='" in result.stdout
    assert "line 1, column 5" in result.stdout


def test_readme_library_snippet_evaluates_true() -> None:
    code = next(s for s in _snippets("README.md") if "compile_sql" in s)
    result = subprocess.run([sys.executable, "-c", code.replace("f.evaluate(", "print(f.evaluate(")
                             .replace("))  # True", ")))  # True")],
                            capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout.strip() == "True"
