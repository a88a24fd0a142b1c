"""SQL dialects as data: the AMQP SQL filter (§6) and the JMS message selector.

Both are parsed by the same grammar and evaluated by the same engine; a dialect
only says how literals are spelled and typed, which words are reserved, what
unqualified names mean, which JMS header names exist, and how values that JMS
cannot compare are treated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from filtex_proton.amqp.types import HEADER_DEFAULTS, Kind, kind_of
from filtex_proton.amqp.view import MISSING, Section
from filtex_proton.sql.values import ORDERED_ALL, as_decimal, compare

__all__ = ["AMQP_SQL", "JMS_SELECTOR", "AliasSpec", "Dialect"]


@dataclass(frozen=True, slots=True)
class AliasSpec:
    """A dialect name for message fields: the first of ``reads`` that is present,
    else ``default``, passed through ``convert`` (which may return ``None``)."""

    reads: tuple[tuple[Section, str], ...]
    default: Any = None
    convert: Callable[[Any], Any] | None = None

    def resolve(self, lookup: Callable[[Section, str], Any]) -> Any:
        for section, name in self.reads:
            value = lookup(section, name)
            if value is not MISSING and value is not None:
                break
        else:
            value = self.default
        if value is None or self.convert is None:
            return value
        try:
            return self.convert(value)
        except (TypeError, ValueError):  # a field of the wrong type: unknown, not an error
            return None


@dataclass(frozen=True, slots=True)
class Dialect:
    """What distinguishes one SQL filter language from another, as data."""

    name: str
    decimal_literals: Literal["decimal", "double"]
    hex_literals: Literal["binary", "integer"]
    incomparable: bool | None
    """The result of comparing values of kinds that cannot be compared."""
    ordered: frozenset[Kind]
    """Kinds that support ``> >= < <=``; for others the result is ``incomparable``."""
    iso_strings: bool
    """Whether a string compared with a timestamp is read as ISO 8601 (§6.3.2)."""
    aliases: Mapping[str, AliasSpec] = field(default_factory=dict)
    value_view: Callable[[Any], Any] | None = None
    """Applied to every value read from the message (JMS sees AMQP values as JMS types)."""
    lexicon: Literal["sql", "java"] = "sql"
    """How numbers, identifiers and strings are spelled: the spec's §6.4.4.2 and §6.4.4.6
    productions exactly, or Java's literals and identifiers (JMS §3.8.1.1)."""
    reserved: frozenset[str] = frozenset()
    """Words that cannot be regular identifiers, upper case."""
    conditional_only: bool = False
    """Whether the whole expression must be a condition (JMS: "a conditional expression")."""
    empty_matches_all: bool = False
    """Whether empty text is no filter at all (JMS) rather than an error."""

    def compare(self, op: str, a: Any, b: Any) -> bool | None:
        """A comparison operator applied with this dialect's rules."""
        return compare(op, a, b, incomparable=self.incomparable, ordered=self.ordered,
                       iso_strings=self.iso_strings)


AMQP_SQL: Final = Dialect(
    name="amqp-sql",
    decimal_literals="decimal",
    hex_literals="binary",
    incomparable=None,
    ordered=ORDERED_ALL,
    iso_strings=True,
    lexicon="sql",
    # §6.4.4.6: delimited identifiers exist for "reserved words ... that would otherwise
    # cause parsing errors", so the grammar's words are not regular identifiers.
    reserved=frozenset({
        "AND", "OR", "NOT", "IS", "NULL", "LIKE", "ESCAPE", "IN", "BETWEEN", "EXISTS", "TRUE",
        "FALSE", "INF", "NAN",
    }),
)


# ---- JMS (apache-filters §2.2, Jakarta Messaging 3.1 §3.8.1) ----

def _jms_value(value: Any) -> Any:
    """AMQP values as the JMS types of apache-filters §2.2's mapping table."""
    kind = kind_of(value)
    if kind is Kind.DECIMAL:
        exact = as_decimal(value)
        return math.nan if exact.is_nan() else float(exact)  # float() refuses a signaling NaN
    if kind is Kind.TIMESTAMP:
        return int(value)
    if kind is Kind.SYMBOL:
        return str(value)
    if kind is Kind.UUID:
        return value.bytes
    return value


def _jms_message_id(value: Any, *, bare_strings: bool) -> str | None:
    """The string Qpid JMS shows for an AMQP message-id/correlation-id."""
    kind = kind_of(value)
    if kind in (Kind.STRING, Kind.SYMBOL):
        text = str(value)
        if bare_strings:
            return text
        if text.startswith("ID:AMQP_"):  # would read as a typed id: mark it as a string
            return "ID:AMQP_STRING:" + text
        if text.startswith("ID:"):
            return text
        return "ID:AMQP_NO_PREFIX:" + text
    if kind is Kind.UUID:
        return "ID:AMQP_UUID:" + str(value)
    if kind is Kind.INTEGER:
        return f"ID:AMQP_ULONG:{int(value)}"
    if kind is Kind.BINARY:
        return "ID:AMQP_BINARY:" + bytes(value).hex().upper()
    return None


def _utf8(value: Any) -> str | None:
    try:
        return bytes(value).decode("utf-8") if isinstance(value, bytes) else None
    except UnicodeDecodeError:
        return None


_P, _H, _M = Section.PROPERTIES, Section.HEADER, Section.MESSAGE_ANNOTATIONS

JMS_HEADERS: Final[Mapping[str, AliasSpec]] = MappingProxyType({
    "JMSMessageID": AliasSpec(
        ((_P, "message-id"),), convert=lambda v: _jms_message_id(v, bare_strings=False)),
    "JMSCorrelationID": AliasSpec(
        ((_P, "correlation-id"),), convert=lambda v: _jms_message_id(v, bare_strings=True)),
    # apache-filters maps JMSType to the x-opt-jms-type annotation; the AMQP JMS
    # mapping used by current Qpid JMS puts it in properties.subject. Read both.
    "JMSType": AliasSpec(((_M, "x-opt-jms-type"), (_P, "subject")), convert=str),
    "JMSPriority": AliasSpec(((_H, "priority"),), default=HEADER_DEFAULTS["priority"]),
    "JMSDeliveryMode": AliasSpec(
        ((_H, "durable"),), default=False,
        convert=lambda durable: "PERSISTENT" if durable is True else "NON_PERSISTENT"),
    "JMSTimestamp": AliasSpec(((_P, "creation-time"),), convert=int),
    "JMSExpiration": AliasSpec(((_P, "absolute-expiry-time"),), default=0, convert=int),
    "JMSRedelivered": AliasSpec(((_H, "delivery-count"),), default=0, convert=lambda n: n > 0),
    "JMSDestination": AliasSpec(((_P, "to"),), convert=str),
    "JMSReplyTo": AliasSpec(((_P, "reply-to"),), convert=str),
    "JMSXUserID": AliasSpec(((_P, "user-id"),), convert=_utf8),
    "JMSXGroupID": AliasSpec(((_P, "group-id"),), convert=str),
    "JMSXGroupSeq": AliasSpec(((_P, "group-sequence"),), convert=int),
    "JMSXDeliveryCount": AliasSpec(((_H, "delivery-count"),), default=0, convert=lambda n: n + 1),
})

JMS_SELECTOR: Final = Dialect(
    name="jms-selector",
    decimal_literals="double",
    hex_literals="integer",
    incomparable=False,
    ordered=frozenset({Kind.INTEGER, Kind.FLOAT, Kind.TIMESTAMP}),  # timestamp = JMS long
    iso_strings=False,
    aliases=JMS_HEADERS,
    value_view=_jms_value,
    lexicon="java",
    # JMS §3.8.1.1: "Identifiers cannot be the names NULL, TRUE, and FALSE. Identifiers
    # cannot be NOT, AND, OR, BETWEEN, LIKE, IN, IS, or ESCAPE."
    reserved=frozenset({
        "NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE",
    }),
    conditional_only=True,
    empty_matches_all=True,
)
