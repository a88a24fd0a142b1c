"""The repository's layout: one import mode for the tests, no name that shadows a product
package, no module that reaches into another module's private names.

Every test folder is a package under ``tests``, so a test module is imported as
``tests.<folder>.<module>`` and helpers by relative import; nothing in ``tests/`` goes on
``sys.path`` by itself. A folder without ``__init__.py`` (or ``pythonpath = ["tests"]``) would
put ``tests/filtex_proton`` or ``tests/broker`` where ``import filtex_proton`` finds it first,
and plain ``pytest`` (the README's command) would stop at collection.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import filtex_broker
import filtex_proton

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
PRODUCT_PACKAGES = {"filtex_proton", "filtex_broker"}
CODE_FOLDERS = ("filtex_proton", "broker", "bench", "examples")
"""Where no module may import another module's private names (tests may: they test them)."""


def _python_files(*folders: str | Path) -> list[Path]:
    """The Python files under ``folders`` (relative to the repository), in a stable order,
    without the interop clients' vendored ``node_modules``."""
    return [path for folder in folders for path in sorted((ROOT / folder).rglob("*.py"))
            if "node_modules" not in path.parts]


def _imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, at any depth (a function's lazy imports too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)]


def test_every_test_folder_is_a_package() -> None:
    folders = {path.parent for path in TESTS.rglob("*.py") if "node_modules" not in path.parts}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists())
    assert missing == [], f"test folders without __init__.py: {missing}"


def test_nothing_from_tests_goes_on_sys_path() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "pythonpath" not in config
    assert str(TESTS) not in sys.path


def test_the_product_packages_are_the_real_ones() -> None:
    assert (Path(filtex_broker.__file__).resolve().parent / "__main__.py").exists()
    assert (Path(filtex_proton.__file__).resolve().parent / "plugin.py").exists()


def test_the_broker_is_imported_as_filtex_broker_only() -> None:
    """The ``broker/`` folder is imported and installed as ``filtex_broker`` (through the
    ``filtex_broker`` link beside it), so the wheel puts no generic top-level name into
    site-packages; an ``import broker`` would load the same files a second time under another
    name (two module objects, two sets of globals)."""
    link = ROOT / "filtex_broker"
    assert link.is_symlink() and link.resolve() == (ROOT / "broker").resolve()
    offenders = []
    for path in _python_files(*CODE_FOLDERS, "tests", "fuzz", "upstreams"):
        for node in _imports(path):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] if node.level == 0 else []
            else:
                names = [alias.name for alias in node.names]
            if any(name.split(".")[0] == "broker" for name in names):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], offenders


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


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_imports(path: Path, ours: set[str]) -> list[str]:
    """``from x import _y`` lines where ``x`` is one of our modules (relative, or under a
    name in ``ours``); a dependency's internals are wrapped on purpose, with a start-up check."""
    found = []
    for node in _imports(path):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = "." * node.level + (node.module or "")
        if node.level == 0 and module.split(".")[0] not in ours:
            continue
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: from {module} import {alias.name}"
                  for alias in node.names if _is_private(alias.name)]
    return found


MODULE_LINES = 600
"""How long a module of the product, the benchmarks or the examples may grow: past it, it
holds more than one job (split it by job, as the relay's upstream and the Spark translation
were). Test modules are not held to it: a conformance table is long by nature."""


def test_no_module_is_over_its_length() -> None:
    long = [f"{path.relative_to(ROOT)}: {n} lines"
            for path in _python_files(*CODE_FOLDERS, "upstreams", "fuzz")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES]
    assert long == [], long


def test_no_module_imports_another_modules_private_names() -> None:
    """A private name is free to change with its module; one imported elsewhere is an API
    nobody documented. Make it public (named and documented) or keep it where it is used."""
    files = _python_files(*CODE_FOLDERS)
    ours = PRODUCT_PACKAGES | set(CODE_FOLDERS) | {
        path.stem for path in files if path.parent.name in ("bench", "examples")}
    violations = [line for path in files for line in _private_imports(path, ours)]
    assert violations == [], "\n".join(violations)


def test_no_test_module_imports_another() -> None:
    """What tests share lives in helper modules (``*_clients.py``, ``*_support.py``, cases):
    importing a test module would also collect, and couple, its tests."""
    offenders = []
    for path in _python_files(TESTS):
        if not path.name.startswith("test_"):
            continue
        for node in _imports(path):
            names = [alias.name for alias in node.names]
            if isinstance(node, ast.ImportFrom):
                names.append(node.module or "")
            if any(part.startswith("test_") for name in names for part in name.split(".")):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == [], offenders
