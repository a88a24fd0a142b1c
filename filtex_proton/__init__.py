"""filtex-proton: AMQP Filter Expressions 1.0 for Qpid Proton containers.

The library decodes, validates and compiles source filter sets and evaluates
them against messages; it opens no sockets. See README.md.
"""

from typing import Any

from filtex_proton.errors import FilterError, SourcePosition
from filtex_proton.limits import DEFAULT_LIMITS, Limits

__all__ = [
    "DEFAULT_LIMITS", "FilterError", "Limits", "NodeMatch", "NodeMatcher", "SourcePosition",
    "Verdict",
]
__version__ = "0.1.0"

#: Public names imported on first use: the matcher pulls in proton and every filter family,
#: which ``import filtex_proton`` alone should not.
_LAZY = {"NodeMatch": "filtex_proton.matcher", "NodeMatcher": "filtex_proton.matcher",
         "Verdict": "filtex_proton.matcher"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'filtex_proton' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
