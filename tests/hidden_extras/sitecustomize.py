"""Started as ``sitecustomize`` (this directory first on PYTHONPATH): the modules named in
``FILTEX_HIDE_MODULES`` (comma-separated top-level names) look absent, as in an install
without the extra that brings them: importing one raises ModuleNotFoundError and
``importlib.util.find_spec`` answers None for it. (CI also runs each install for real in a
fresh virtualenv: .ci/installs.py.)"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

HIDDEN = frozenset(filter(None, os.environ.get("FILTEX_HIDE_MODULES", "").split(",")))


class _Hidden(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> None:
        if fullname.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)


def _find_spec(name: str, package: str | None = None) -> ModuleSpec | None:
    if name.partition(".")[0] in HIDDEN:
        return None
    return _real_find_spec(name, package)


_real_find_spec = importlib.util.find_spec
importlib.util.find_spec = _find_spec
sys.meta_path.insert(0, _Hidden())
