"""AMQP 1.0 values, message sections and the message view the filters read.

No networking here: this package turns values and bytes into something the
filter engine can ask questions of, keeping *absent* distinct from *default*.

The names below are the package's public face (for containers such as filtex-broker that
rewrite or inspect messages: a redelivery's header, a relay's annotations, the SASL frames);
the modules behind them are the library's own and may change.
"""

from filtex_proton.amqp.decode import DecodeError, decode_value, skip_value
from filtex_proton.amqp.encode import encode_value
from filtex_proton.amqp.message import (
    MESSAGE_ANNOTATIONS,
    RawMessageView,
    encode_message,
    scan_sections,
)
from filtex_proton.amqp.validate import InvalidMessageError, validate_message
from filtex_proton.amqp.view import MISSING, Section

__all__ = [
    "MESSAGE_ANNOTATIONS",
    "MISSING",
    "DecodeError",
    "InvalidMessageError",
    "RawMessageView",
    "Section",
    "decode_value",
    "encode_message",
    "encode_value",
    "scan_sections",
    "skip_value",
    "validate_message",
]
