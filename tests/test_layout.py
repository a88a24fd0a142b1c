"""The test suite's own layout: one import mode, no name that shadows a product package.

Every test folder is a package under ``tests``, so a test module is imported as
``tests.<folder>.<module>`` and helpers by relative import; nothing in ``tests/`` goes on
``sys.path`` by itself. A folder without ``__init__.py`` (or ``pythonpath = ["tests"]``) would
put ``tests/filtex_proton`` or ``tests/broker`` where ``import filtex_proton`` finds it first,
and plain ``pytest`` (the README's command) would stop at collection.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import broker
import filtex_proton

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
PRODUCT_PACKAGES = {"filtex_proton", "broker"}


def test_every_test_folder_is_a_package() -> None:
    folders = {path.parent for path in TESTS.rglob("*.py") if "node_modules" not in path.parts}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists())
    assert missing == [], f"test folders without __init__.py: {missing}"


def test_nothing_from_tests_goes_on_sys_path() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "pythonpath" not in config
    assert str(TESTS) not in sys.path


def test_the_product_packages_are_the_real_ones() -> None:
    assert (Path(broker.__file__).resolve().parent / "__main__.py").exists()
    assert (Path(filtex_proton.__file__).resolve().parent / "plugin.py").exists()


def test_plain_pytest_collects_from_the_repository_root() -> None:
    """As the ``pytest`` script runs (``-P``: the current folder is not put on sys.path)."""
    result = subprocess.run(
        [sys.executable, "-P", "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/filtex_proton/amqp", "tests/broker/nodes/test_units.py",
         "tests/relay/test_relay_units.py"],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = result.stdout.strip().splitlines()[-1]
    assert "tests collected" in summary and "error" not in summary, summary


def test_no_test_module_shares_a_product_import_name() -> None:
    stems = {path.stem for path in TESTS.rglob("*.py")}
    assert not stems & PRODUCT_PACKAGES
