"""Shared by the interop tests (a module, not conftest, so imports stay unambiguous)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BrokerAddress:
    """Where the interop broker listens."""

    host: str
    port: int

    @property
    def url(self) -> str:
        return f"{self.host}:{self.port}"
