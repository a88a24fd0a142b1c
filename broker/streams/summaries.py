"""A segment's summaries: one :class:`~filtex_proton.matcher.BatchSummary` per block of
:data:`BLOCK` consecutive messages.

Segments are sized for retention and for the disk (up to 8 MiB, tens of thousands of
messages); a summary that large would admit a selective filter in most segments, since one
matching message anywhere admits the whole batch. Blocks of a few thousand messages keep the
skipping fine-grained while a block's summary stays small beside it (a few hundred bytes per
tracked field). All blocks of a segment track the fields the segment started with.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from filtex_proton.amqp import decode_value, encode_value
from filtex_proton.matcher import BatchSummary, Condition, FieldRef
from filtex_proton.plugin import FilterMessage

__all__ = ["BLOCK", "SegmentSummary"]

BLOCK: Final = 4096
"""Messages per block: a block whose summary rules a filter out is passed over whole."""


class SegmentSummary:
    """The summaries of a segment's blocks, in offset order."""

    __slots__ = ("blocks", "refs")

    def __init__(self, refs: Iterable[FieldRef] = (),
                 blocks: list[BatchSummary] | None = None) -> None:
        self.refs = frozenset(refs)
        """The fields its blocks track."""
        self.blocks: list[BatchSummary] = [] if blocks is None else blocks

    def add(self, message: FilterMessage) -> None:
        """Take the segment's next message (a new block every :data:`BLOCK` messages)."""
        blocks = self.blocks
        if not blocks or blocks[-1].messages >= BLOCK:
            blocks.append(BatchSummary(self.refs))
        blocks[-1].add(message)

    def may_match(self, at: int, condition: Condition) -> bool:
        """Whether the block holding the segment's ``at``-th message may match (True for a
        message it has no block for: nothing is ruled out unseen)."""
        block = at // BLOCK
        return block >= len(self.blocks) or self.blocks[block].may_match(condition)

    def encode(self) -> bytes:
        """Every block's summary, as one AMQP list of their encodings."""
        return encode_value([block.encode() for block in self.blocks])

    @classmethod
    def decode(cls, data: bytes) -> SegmentSummary:
        """What :meth:`encode` wrote. Raises ``ValueError`` on anything else."""
        try:
            encoded, _ = decode_value(data)
            blocks = [BatchSummary.decode(bytes(item)) for item in encoded]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a segment summary: {exc}") from None
        refs = blocks[0].fields.keys() if blocks else ()
        return cls(refs, blocks)
