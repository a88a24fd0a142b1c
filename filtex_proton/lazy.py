"""Package attributes imported on first use, for packages whose modules need an extra.

Why: ``filtex_proton.archive`` and ``filtex_proton.spark`` re-export names from modules that
import pyarrow or PySpark, which only the spark extra installs; yet planning a filter
(``filtex-spark explain``, the console's tester) needs only their pure parts. Importing the
package must therefore not import every module (PEP 562 module ``__getattr__``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Collection, Sequence

__all__ = ["lazy_attribute"]


def lazy_attribute(package: str, name: str, exported: Collection[str],
                   modules: Sequence[str]) -> object:
    """The value of ``package.name`` (one of ``exported``), found in the first of ``modules``
    (full module names, those without optional dependencies first) that defines it, and
    cached on the package."""
    if name not in exported:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    for module in modules:
        found = importlib.import_module(module)
        if hasattr(found, name):
            value: object = getattr(found, name)
            setattr(sys.modules[package], name, value)
            return value
    raise AttributeError(f"module {package!r} exports {name!r} but none of "
                         f"{', '.join(modules)} defines it")
