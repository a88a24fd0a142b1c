"""The server side of the AMQP SASL layer (AMQP 1.0 part 5, §5.3), as a byte-fed state machine.

Why our own: the python-qpid-proton wheel is built without Cyrus SASL, and
Proton's built-in server SASL only knows ANONYMOUS and EXTERNAL - it cannot
verify a PLAIN password. The exchange is small: the ``AMQP 3.1.0.0`` header
both ways, then ``sasl-mechanisms``, ``sasl-init`` (``sasl-challenge`` /
``sasl-response``), ``sasl-outcome`` frames (frame type 1). This class knows
only the frames; who may come in is the ``authenticate`` callback's business.
No sockets here: :meth:`feed` takes bytes, :attr:`output` holds the bytes to send.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from proton import UNDESCRIBED, Array, Data, Described, symbol, ubyte, ulong

from filtex_proton.amqp import DecodeError, decode_value, encode_value

__all__ = ["AMQP_HEADER", "SASL_HEADER", "SYS_TEMP", "Outcome", "SaslServer", "State"]

SASL_HEADER: Final = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER: Final = b"AMQP\x00\x01\x00\x00"
MAX_FRAME: Final = 65536
"""Largest SASL frame accepted (the spec's minimum is 512; a PLAIN response is tiny)."""

_MECHANISMS: Final = 0x40
_INIT: Final = 0x41
_CHALLENGE: Final = 0x42
_RESPONSE: Final = 0x43
_OUTCOME: Final = 0x44
_SASL_FRAME: Final = 1
_SYMBOLIC: Final = {"amqp:sasl-init:list": _INIT, "amqp:sasl-response:list": _RESPONSE}
"""The frames a client sends, by their symbolic descriptors (AMQP 1.0 §1.5 allows either)."""
_HEAD: Final = struct.Struct(">IBBH")

OK: Final = 0
AUTH: Final = 1
SYS_PERM: Final = 3
SYS_TEMP: Final = 4


class State(Enum):
    HEADER = "header"
    INIT = "init"
    RESPONSE = "response"
    CHECKING = "checking"
    """The authenticator answers later (:meth:`SaslServer.conclude`); input is buffered."""
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the authenticator decided: a user name, or a reason (for the log) to refuse."""

    user: str | None
    reason: str = ""
    temporary: bool = False
    """Refused for now (the broker is too busy to check): ``sys-temp``, the client may retry."""


Authenticate = Callable[[str, bytes | None], Outcome | None]
"""(mechanism, initial response or response; None if the client sent none) -> outcome, or
None when the outcome comes later through :meth:`SaslServer.conclude`."""

_NEGOTIATING: Final = frozenset({State.HEADER, State.INIT, State.RESPONSE})


def frame(descriptor: int, fields: list[Any]) -> bytes:
    """One SASL frame carrying the described list ``descriptor`` (``fields``)."""
    body = encode_value(Described(ulong(descriptor), fields))
    return _HEAD.pack(8 + len(body), 2, _SASL_FRAME, 0) + body


class SaslServer:
    """One connection's SASL negotiation; ``authenticate`` runs once the client has spoken."""

    def __init__(self, mechanisms: Sequence[str], authenticate: Authenticate,
                 *, accept_bare_amqp: bool = False) -> None:
        self.mechanisms = tuple(mechanisms)
        self._authenticate = authenticate
        self._accept_bare = accept_bare_amqp
        self._buffer = bytearray()
        self._mechanism = ""
        self.state = State.HEADER
        self.output = bytearray()
        """Bytes to send to the client, in order."""
        self.user: str | None = None
        self.failure = ""
        """Why the negotiation failed (for the log; never contains a password)."""
        self.code: int | None = None
        """The failed outcome's code (None: none was sent)."""
        self.leftover = b""
        """Bytes the client sent after the SASL exchange (pipelined AMQP): for the transport."""

    @property
    def mechanism(self) -> str:
        return self._mechanism

    def feed(self, data: bytes) -> None:
        """Consume bytes from the client; afterwards check :attr:`state` and :attr:`output`."""
        if self.state is State.DONE:
            self.leftover += data  # for the transport, like what followed the last frame
            return
        if self.state is State.FAILED:
            return
        self._buffer += data
        if self.state is State.CHECKING and len(self._buffer) > MAX_FRAME:
            self._fail(f"more than {MAX_FRAME} bytes sent before the SASL outcome")
            return
        while self.state in _NEGOTIATING:
            if self.state is State.HEADER:
                if not self._header():
                    return
            elif not self._frame():
                return

    def _fail(self, reason: str, code: int | None = None) -> None:
        self.failure = reason
        self.code = code
        if code is not None:
            self.output += frame(_OUTCOME, [ubyte(code)])
        self.state = State.FAILED

    def _header(self) -> bool:
        if len(self._buffer) < 8:
            if not SASL_HEADER.startswith(bytes(self._buffer[:8])) and \
                    not AMQP_HEADER.startswith(bytes(self._buffer[:8])):
                self._fail("not an AMQP protocol header")
                return False
            return False
        header = bytes(self._buffer[:8])
        if header == AMQP_HEADER and self._accept_bare:
            self.user = None
            self._mechanism = "none"
            self.leftover = bytes(self._buffer)  # the transport reads the header itself
            self.state = State.DONE
            return False
        if header != SASL_HEADER:
            self.output += SASL_HEADER  # tell the client what we wanted (§2.2), then close
            self._fail("the client did not start SASL" if header == AMQP_HEADER
                       else "not an AMQP SASL protocol header")
            return False
        del self._buffer[:8]
        undescribed: Any = UNDESCRIBED
        mechs = Array(undescribed, Data.SYMBOL, *(symbol(m) for m in self.mechanisms))
        self.output += SASL_HEADER + frame(_MECHANISMS, [mechs])
        self.state = State.INIT
        return True

    def _frame(self) -> bool:
        """Read one frame, if it is all there, and answer it; whether to read on."""
        buffer = self._buffer
        if len(buffer) < 8:
            return False
        size, doff, kind, _channel = _HEAD.unpack_from(buffer)
        if size > MAX_FRAME or size < 8 or doff < 2 or kind != _SASL_FRAME or doff * 4 > size:
            self._fail(f"malformed SASL frame header (size {size}, doff {doff}, type {kind})")
            return False
        if len(buffer) < size:
            return False
        body = bytes(buffer[doff * 4:size])
        del buffer[:size]
        if not body:
            return True  # an empty frame (heartbeat)
        try:
            value, _ = decode_value(body)
        except DecodeError as exc:
            self._fail(f"undecodable SASL frame: {exc}")
            return False
        if not isinstance(value, Described) or not isinstance(value.value, list):
            self._fail("a SASL frame without a described list")
            return False
        descriptor = value.descriptor
        if isinstance(descriptor, str):
            descriptor = _SYMBOLIC.get(descriptor, descriptor)
        expected, answer = _ANSWERS[self.state]
        if descriptor != expected:
            self._fail(f"unexpected SASL frame {descriptor!r} in state "
                       f"{self.state.value}", SYS_PERM)
            return False
        return answer(self, value.value)

    def _on_init(self, fields: list[Any]) -> bool:
        """``sasl-init``: the mechanism the client chose, and its initial response (PLAIN
        without one is asked for it with an empty challenge: True, read the response)."""
        if not fields or not isinstance(fields[0], str):
            self._fail("sasl-init without a mechanism", SYS_PERM)
            return False
        self._mechanism = str(fields[0])
        response = fields[1] if len(fields) > 1 else None
        if self._mechanism not in self.mechanisms:
            self._fail(f"mechanism {self._mechanism!r} not offered", AUTH)
            return False
        if response is None and self._mechanism == "PLAIN":
            self.output += frame(_CHALLENGE, [b""])  # ask for the credentials
            self.state = State.RESPONSE
            return True
        return self._answered(response)

    def _on_response(self, fields: list[Any]) -> bool:
        """``sasl-response``: the answer to our challenge."""
        return self._answered(fields[0] if fields else None)

    def _answered(self, response: Any) -> bool:
        """The client has given its credentials: decide (False: no more frames to read)."""
        if self._decide(response):
            self._keep_leftover()
        return False

    def _keep_leftover(self) -> None:
        self.leftover = bytes(self._buffer)
        self._buffer.clear()

    def _decide(self, response: Any) -> bool:
        """Ask the authenticator; True if the client is in (False: out, or not decided yet)."""
        if response is not None and not isinstance(response, bytes):
            self._fail("the SASL response is not binary", AUTH)
            return False
        outcome = self._authenticate(self._mechanism, response)
        if outcome is None:
            self.state = State.CHECKING
            return False
        return self._settle(outcome)

    def _settle(self, outcome: Outcome) -> bool:
        if outcome.user is None:
            self._fail(outcome.reason or "authentication failed",
                       SYS_TEMP if outcome.temporary else AUTH)
            return False
        self.user = outcome.user
        self.output += frame(_OUTCOME, [ubyte(OK)])
        self.state = State.DONE
        return True

    def conclude(self, outcome: Outcome) -> None:
        """The authenticator's late answer (state CHECKING); check :attr:`state` afterwards."""
        if self.state is State.CHECKING and self._settle(outcome):
            self._keep_leftover()  # what the client pipelined while we were checking


_ANSWERS: Final[dict[State, tuple[int, Callable[[SaslServer, list[Any]], bool]]]] = {
    State.INIT: (_INIT, SaslServer._on_init),
    State.RESPONSE: (_RESPONSE, SaslServer._on_response),
}
"""The frame the client must send in each state, and how it is answered."""
