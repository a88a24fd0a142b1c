"""filtex-proton: AMQP Filter Expressions 1.0 for Qpid Proton containers.

The library decodes, validates and compiles source filter sets and evaluates
them against messages; it opens no sockets. See README.md.
"""

from filtex_proton.errors import FilterError, SourcePosition
from filtex_proton.limits import DEFAULT_LIMITS, Limits

__all__ = ["DEFAULT_LIMITS", "FilterError", "Limits", "SourcePosition"]
__version__ = "0.1.0"
