"""What the stream tests share: messages, a clock the test moves, a reader without a link."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proton import Described, symbol

from filtex_proton.amqp import RawMessageView, Section
from filtex_proton.amqp.message import encode_message
from filtex_proton.plugin import FiltexPlugin, LinkFilter

PLUGIN = FiltexPlugin()


def message(n: int, padding: int = 0, **annotations: Any) -> bytes:
    return encode_message(
        message_annotations={symbol(k.replace("_", "-")): v for k, v in annotations.items()}
        or None,
        application_properties={"n": n, "region": "EU" if n % 2 else "US"},
        body=f"m{n}" + "x" * padding)


def offset_of(data: bytes) -> int:
    return int(RawMessageView(data).field(Section.MESSAGE_ANNOTATIONS, "x-stream-offset"))


def number_of(data: bytes) -> int:
    return int(RawMessageView(data).field(Section.APPLICATION_PROPERTIES, "n"))


def link_filter(**entries: Described) -> LinkFilter:
    return LinkFilter(PLUGIN.compile({symbol(k): v for k, v in entries.items()}), consumer=None)


@dataclass
class Clock:
    now: int = 1_000_000

    def __call__(self) -> int:
        return self.now


@dataclass(eq=False)  # a reader is a dict key of its stream: identity
class FakeReader:
    position: int = 0
    credit: int = 0
    filter: LinkFilter | None = None
    got: list[bytes] = field(default_factory=list)

    def deliver(self, data: bytes) -> None:
        self.credit -= 1
        self.got.append(data)
