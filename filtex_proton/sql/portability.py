"""What a valid filter does that another broker may not: notes for people, not errors.

A function the broker does not understand is valid and evaluates to NULL
(§6.4.4.3), which is rarely what its writer meant: the broker logs it and
``filtex check`` shows it. The few forms AMQP SQL accepts beyond the spec's
grammar (docs/SEMANTICS.md) are valid here but may be refused elsewhere:
``filtex check`` says so, so that filters stay portable between brokers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from filtex_proton.amqp.view import Section
from filtex_proton.errors import SourcePosition
from filtex_proton.sql import ast
from filtex_proton.sql.dialects import Dialect
from filtex_proton.sql.functions import understood

__all__ = ["Note", "notes"]

# §6.4.4.2.3's exponent is 'E' <digit> {<digit>}: upper case, no sign.
_EXPONENT: Final = re.compile(r"\d+\.\d+([eE])([+-]?)", re.ASCII)


JMS_HABITS: Final = {
    "JMSPriority": "h.priority", "JMSType": "p.subject", "JMSCorrelationID": "p.correlation_id",
    "JMSMessageID": "p.message_id", "JMSTimestamp": "p.creation_time",
    "JMSExpiration": "p.absolute_expiry_time", "JMSDeliveryMode": "h.durable",
    "JMSRedelivered": "h.delivery_count > 0", "JMSDestination": "p.to",
    "JMSReplyTo": "p.reply_to", "JMSXUserID": "p.user_id", "JMSXGroupID": "p.group_id",
    "JMSXGroupSeq": "p.group_sequence", "JMSXDeliveryCount": "h.delivery_count + 1",
}
"""JMS header names and what AMQP SQL writes for the field JMS means (docs/SEMANTICS.md)."""


@dataclass(frozen=True, slots=True)
class Note:
    """One remark on a valid filter, with where it applies."""

    kind: Literal["null-function", "not-portable", "jms-habit"]
    text: str
    position: SourcePosition | None = None

    def render(self) -> str:
        where = f" at {self.position}" if self.position is not None else ""
        label = "not portable" if self.kind == "not-portable" else "warning"
        return f"{label}: {self.text}{where}"


def notes(root: ast.Expr, text: str, dialect: Dialect) -> tuple[Note, ...]:
    """The notes on a parsed filter, in source order."""
    found: list[Note] = []
    for node, _depth in ast.walk(root):
        if isinstance(node, ast.Call) and understood(node.name, node.vendor) is None:
            name = f"{node.vendor}:{node.name}" if node.vendor is not None else node.name
            found.append(Note(
                "null-function",
                f"function {name}() is not understood by this broker: it evaluates to NULL "
                "whatever its arguments (§6.4.4.3)", node.pos))
        if dialect.lexicon != "sql":
            continue
        if isinstance(node, ast.Field) and node.section is Section.APPLICATION_PROPERTIES \
                and node.name in JMS_HABITS:
            found.append(Note(
                "jms-habit",
                f"{node.name} is an application property here, not the JMS header: an AMQP "
                f"SQL filter writes {JMS_HABITS[node.name]} (or use a JMS selector, "
                "apache.org:selector-filter:string)", node.pos))
        if isinstance(node, ast.Between):
            found.append(Note(
                "not-portable",
                "BETWEEN is JMS's (JMS §3.8.1.2), not in the spec's grammar (§6.4.1); "
                "write x >= low AND x <= high", node.pos))
        elif isinstance(node, ast.Literal) and isinstance(node.value, float) and node.pos:
            exponent = _EXPONENT.match(text, node.pos.offset)
            if exponent is not None and (exponent.group(1) == "e" or exponent.group(2)):
                found.append(Note(
                    "not-portable",
                    "the spec's approximate_number_constant writes its exponent 'E' and "
                    "unsigned (§6.4.4.2.3); a lower-case 'e' or a sign (without which no "
                    "exponent could be negative) may be refused elsewhere", node.pos))
    found.sort(key=lambda n: n.position.offset if n.position is not None else -1)
    return tuple(found)
