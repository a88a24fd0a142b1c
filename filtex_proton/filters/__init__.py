"""The filter types of spec §3-§6 and the Apache registry, decoded from described values.

One module per family: :mod:`~.group` (§3 and the Apache logic filters),
:mod:`~.property` with :mod:`~.matching` (§4), :mod:`~.constant` (§5),
:mod:`~.sql` (§6 and the JMS selector), :mod:`~.apache` (legacy bindings,
no-local). :mod:`~.registry` is the one table from descriptors to decoders,
:mod:`~.wire` moves values in and out of ``proton.Data`` without recursion, and
:mod:`~.typed_json` is the hand-written notation of the ``filtex`` command.

Most users want :func:`filtex_proton.filterset.decode_filter_set` instead.
"""

from filtex_proton.filters.base import (
    DecodeContext,
    EvaluationContext,
    Filter,
    FilterBase,
    describe_descriptor,
)
from filtex_proton.filters.registry import (
    ALL_CAPABILITIES,
    FILTER_TYPES,
    FilterType,
    decode_filter,
    display_descriptor,
    lookup,
)

__all__ = [
    "ALL_CAPABILITIES",
    "FILTER_TYPES",
    "DecodeContext",
    "EvaluationContext",
    "Filter",
    "FilterBase",
    "FilterType",
    "decode_filter",
    "describe_descriptor",
    "display_descriptor",
    "lookup",
]
