"""The message view: what a filter may ask of a message.

A filter never sees a ``proton.Message``: its defaults hide absent fields
(priority 4, durable False ...), and EXISTS, IS NULL and the property filters
must tell *absent* from *present with the default value*. A view answers three
questions (a section, a field of it, whether that field is present) and is
shared by every link that evaluates the same message.

Header and properties are composite (list-encoded) sections; a view presents
them as a mapping from the canonical, hyphenated field name to the value, with
only the fields that carry a value (AMQP encodes "no value" as null, so a null
field is absent). The other four sections are maps and are presented as they
are: a key with a null value *is* present.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, Final, Protocol, runtime_checkable

__all__ = ["MISSING", "DictMessageView", "MessageView", "Section"]


class Section(enum.Enum):
    """The six message sections filters can read (AMQP 1.0 §3.2); the body is never one."""

    HEADER = "header"
    DELIVERY_ANNOTATIONS = "delivery-annotations"
    MESSAGE_ANNOTATIONS = "message-annotations"
    PROPERTIES = "properties"
    APPLICATION_PROPERTIES = "application-properties"
    FOOTER = "footer"

    # Members are singletons: identity hashing is correct, and it keeps dict lookups
    # keyed by a section (on the per-message hot path) in C instead of Enum.__hash__.
    __hash__ = object.__hash__

    @property
    def is_composite(self) -> bool:
        """True for the list-encoded sections whose fields are known by name."""
        return self in (Section.HEADER, Section.PROPERTIES)


class _Missing:
    """The sentinel for "no such field"; distinct from ``None`` (a present null)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()


@runtime_checkable
class MessageView(Protocol):
    """The read-only questions a filter asks of one message."""

    def section(self, section: Section) -> Mapping[Any, Any] | None:
        """The section's entries, or ``None`` when the message has no such section."""
        ...

    def field(self, section: Section, key: Any) -> Any:
        """The value of one field or map entry, or :data:`MISSING` when it is absent."""
        ...

    def has_field(self, section: Section, key: Any) -> bool:
        """Whether the field has a value (composite sections) or the key exists (maps)."""
        ...


class DictMessageView:
    """A message view over sections already decoded into Python mappings.

    The library's own users build one directly; the broker's lazy view over raw
    bytes implements the same protocol.
    """

    __slots__ = ("_sections",)

    def __init__(
        self,
        *,
        header: Mapping[str, Any] | None = None,
        delivery_annotations: Mapping[Any, Any] | None = None,
        message_annotations: Mapping[Any, Any] | None = None,
        properties: Mapping[str, Any] | None = None,
        application_properties: Mapping[str, Any] | None = None,
        footer: Mapping[Any, Any] | None = None,
    ) -> None:
        def composite(fields: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
            # A null field carries no value: drop it so that "present" means "has a value".
            if fields is None:
                return None
            return {k: v for k, v in fields.items() if v is not None}

        self._sections: dict[Section, Mapping[Any, Any] | None] = {
            Section.HEADER: composite(header),
            Section.DELIVERY_ANNOTATIONS: delivery_annotations,
            Section.MESSAGE_ANNOTATIONS: message_annotations,
            Section.PROPERTIES: composite(properties),
            Section.APPLICATION_PROPERTIES: application_properties,
            Section.FOOTER: footer,
        }

    def section(self, section: Section) -> Mapping[Any, Any] | None:
        return self._sections[section]

    def field(self, section: Section, key: Any) -> Any:
        entries = self._sections[section]
        if entries is None:
            return MISSING
        return entries.get(key, MISSING)

    def has_field(self, section: Section, key: Any) -> bool:
        entries = self._sections[section]
        return entries is not None and key in entries

    def __repr__(self) -> str:
        present = {s.value: dict(m) for s, m in self._sections.items() if m is not None}
        return f"DictMessageView({present!r})"
