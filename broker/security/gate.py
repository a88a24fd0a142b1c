"""Secured listeners: TLS handshake and SASL exchange on the socket, then a plain Proton transport.

For a connection accepted by a secured listener the broker - not Proton -
runs TLS (Python's ``ssl``) and the SASL layer (:mod:`filtex_broker.security.sasl`), driven
by selectable events while the connection is young. Once SASL succeeds it
does what Proton's ``Acceptor`` does (a connection, a server ``Transport``
without SASL, bound to the same selectable) and hands the socket to the fast
event loop; bytes the client pipelined after SASL are pushed into the
transport. The connection carries its :class:`Identity` as
``connection.broker_identity`` (grants are looked up per attach). Password
checks run on worker threads (:mod:`filtex_broker.security.verifier`); the SASL outcome goes
out when the result is back. Listeners without any security keep Proton's
own ``Acceptor``: their path is unchanged.
"""

from __future__ import annotations

import logging
import socket
import ssl
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from proton import Handler, Transport, Url

from filtex_broker.loop import proton_internals as internals
from filtex_broker.security.auth import AccessPolicy, ConnectionFacts, Identity, PlainCheck
from filtex_broker.security.sasl import SYS_TEMP, Outcome, SaslServer, State
from filtex_broker.security.tls import TlsSocket, peer_identity
from filtex_broker.security.verifier import Cancellable, Limits, PasswordVerifier

if TYPE_CHECKING:
    from proton import Event

    from filtex_broker.loop.fast import FastContainer

__all__ = ["Gate", "SecureAcceptor"]

log = logging.getLogger("filtex.broker.auth")

_CHUNK = 16384
_BUSY_LOG_INTERVAL = 10.0


class _Later(Handler):
    """A timer task running one function (a held-back authentication outcome)."""

    def __init__(self, function: Callable[[], None]) -> None:
        self.function = function

    def on_timer_task(self, event: Event) -> None:
        self.function()


class Gate:
    """What the secured listeners share: the policy, the TLS context, the young connections."""

    def __init__(self, policy: AccessPolicy, tls: ssl.SSLContext | None, timeout: float,
                 wake: Callable[[], None], limits: Limits | None = None) -> None:
        self.policy = policy
        self.tls = tls
        self.timeout = timeout
        self.pending: set[Handshake] = set()
        self.container: FastContainer | None = None
        self.verifier = PasswordVerifier(wake, self._later, limits)
        """Password checks on worker threads; :meth:`complete` delivers their results."""
        self._busy = 0
        self._busy_logged = float("-inf")

    def listen(self, container: FastContainer, host: str, port: int, *,
               tls: bool) -> SecureAcceptor:
        if tls and self.tls is None:
            raise ValueError("a TLS listener needs a certificate and key")
        self.container = container
        return SecureAcceptor(container, host, port, self, self.tls if tls else None)

    def _later(self, delay: float, function: Callable[[], None]) -> Cancellable:
        assert self.container is not None  # checks start only on a listener's connections
        task: Cancellable = self.container.schedule(delay, _Later(function))
        return task

    def busy(self, peer: str) -> None:
        """An attempt refused with sys-temp: summarised in the log (a flood must not flood it)."""
        self._busy += 1
        now = time.monotonic()
        if now - self._busy_logged >= _BUSY_LOG_INTERVAL:
            log.warning("authentication: %d attempt(s) failed fast with sys-temp since the last "
                        "such line (one every %g s at most): too many password checks in "
                        "progress, from one address or in total; latest peer=%s", self._busy,
                        _BUSY_LOG_INTERVAL, peer)
            self._busy = 0
            self._busy_logged = now

    def complete(self) -> None:
        """Reactor thread, on wake-up: deliver the password checks the workers finished."""
        self.verifier.complete()

    def shutdown(self) -> None:
        """Drop every connection still negotiating (the broker is stopping)."""
        for handshake in list(self.pending):
            handshake.drop("the broker is shutting down", quiet=True)
        self.verifier.close()


class SecureAcceptor(Handler):
    """A listening socket whose connections authenticate before Proton sees them."""

    def __init__(self, container: FastContainer, host: str, port: int, gate: Gate,
                 tls: ssl.SSLContext | None) -> None:
        self._container = container
        self._gate = gate
        self._tls = tls
        sock = internals.listen(host, port)
        selectable: Any = container.selectable(handler=cast(Any, self), delegate=sock)
        selectable.reading = True
        internals.unbind_transport(selectable)
        self._selectable = selectable
        container.update(selectable)

    def close(self) -> None:
        if not self._selectable.is_terminal:
            self._selectable.terminate()
            self._selectable.update()

    def on_selectable_readable(self, event: Event) -> None:
        try:
            sock, address = internals.accept(self._selectable)
        except BlockingIOError:
            return
        except OSError as exc:
            log.warning("accept failed: %s", exc)
            return
        try:
            Handshake(self, sock, address)
        except Exception:  # never let one client stop the listener (or the broker)
            log.exception("cannot start negotiating with %s", address)
            sock.close()


class Handshake(Handler):
    """One accepted socket until it is authenticated (or dropped)."""

    def __init__(self, acceptor: SecureAcceptor, sock: socket.socket, address: Any) -> None:
        self.acceptor = acceptor
        self.gate = acceptor._gate
        container = acceptor._container
        self.container = container
        self.address = address
        self.peer = f"{address[0]}:{address[1]}"
        self.tls: TlsSocket | None = None
        self.stream: Any = sock
        if acceptor._tls is not None:
            wrapped = acceptor._tls.wrap_socket(sock, server_side=True,
                                                do_handshake_on_connect=False)
            self.tls = TlsSocket(wrapped, container.buffered)
            self.stream = self.tls
        self.sasl: SaslServer | None = None
        self.facts: ConnectionFacts | None = None
        self.out = bytearray()
        self.finished = False
        self.reported = False
        selectable: Any = container.selectable(handler=cast(Any, self),
                                               delegate=self.stream)
        selectable.reading = True
        internals.unbind_transport(selectable)
        self.selectable = selectable
        container.update(selectable)
        self.timer = container.schedule(self.gate.timeout, self)
        self.gate.pending.add(self)
        if self.tls is None:
            self._start_sasl(ConnectionFacts(str(address[0]), tls=False))

    # -- events ------------------------------------------------------------------------

    def on_selectable_readable(self, event: Event) -> None:
        self._step(writable=False)

    def on_selectable_writable(self, event: Event) -> None:
        self._step(writable=True)

    def on_timer_task(self, event: Event) -> None:
        if not self.finished:
            self.drop(f"no successful authentication within {self.gate.timeout:g} s")

    # -- the negotiation -------------------------------------------------------------------

    def _start_sasl(self, facts: ConnectionFacts) -> None:
        self.facts = facts
        policy = self.gate.policy
        self.sasl = SaslServer(policy.mechanisms(facts), self._authenticate,
                               accept_bare_amqp=policy.allow_anonymous)

    def _authenticate(self, mechanism: str, response: bytes | None) -> Outcome | None:
        """The policy's verdict; a password check goes to the workers (None: answer later)."""
        assert self.facts is not None
        verdict = self.gate.policy.authenticate(self.facts, mechanism, response)
        if not isinstance(verdict, PlainCheck):
            return verdict
        if self.gate.verifier.submit(self.facts.peer, verdict.password, verdict.stored,
                                     lambda ok: self._checked(verdict, ok)):
            return None
        return Outcome(None, "too many password checks in progress (from this address or in "
                       "total): sys-temp, try again", temporary=True)

    def _checked(self, check: PlainCheck, ok: bool) -> None:
        """Reactor thread: the password check is back; send the outcome (if still connected)."""
        if self.finished or self.sasl is None:
            return
        self.sasl.conclude(self.gate.policy.checked(check, ok))
        self._step(writable=False)

    def _step(self, *, writable: bool) -> None:
        """Contained: whatever goes wrong costs this connection only."""
        if self.finished:
            return
        try:
            self._advance(writable=writable)
        except OSError as exc:  # the peer's doing (ssl.SSLError is an OSError)
            self.drop(f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            log.exception("internal error while authenticating %s", self.peer)
            self.drop(f"internal error: {type(exc).__name__}", quiet=True)

    def _advance(self, *, writable: bool) -> None:
        if self.sasl is None and not self._tls_handshake():
            return
        self._read()
        if self.sasl is not None and self.sasl.state is State.FAILED and not self.reported:
            self.reported = True  # logged before the outcome goes, once
            if self.sasl.code == SYS_TEMP:
                self.gate.busy(self.peer)
            else:
                self._report(self.sasl.failure, self.sasl.mechanism)
        self._write()
        sasl = self.sasl
        assert sasl is not None
        if self.out:
            return  # finish sending first (the outcome must precede any AMQP frame)
        if sasl.state is State.DONE:
            # Only from a writable event: after a readable one, proton's IO handler (which
            # sees every selectable event after us) would read the socket it now owns.
            if writable:
                self._hand_over(sasl)
            else:
                self._interest(writing=True)
        elif sasl.state is State.FAILED:
            self.drop(sasl.failure, quiet=True)

    def _tls_handshake(self) -> bool:
        tls = self.tls
        assert tls is not None
        try:
            tls.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._interest(writing=False)
            return False
        except ssl.SSLWantWriteError:
            self._interest(writing=True)
            return False
        identity = peer_identity(tls.sock)
        subject, common_name = identity if identity is not None else (None, None)
        self._start_sasl(ConnectionFacts(str(self.address[0]), tls=True, subject=subject,
                                         common_name=common_name))
        return True

    def _read(self) -> None:
        sasl = self.sasl
        assert sasl is not None
        while sasl.state not in (State.DONE, State.FAILED):
            try:
                data = self.stream.recv(_CHUNK)
            except BlockingIOError:
                break
            if not data:
                raise ConnectionResetError(
                    "the client closed the connection" + (
                        f" after we offered {list(sasl.mechanisms)}" if sasl.state is State.INIT
                        else ""))
            sasl.feed(data)
        self.out += sasl.output
        sasl.output.clear()

    def _write(self) -> None:
        while self.out:
            try:
                sent = self.stream.send(bytes(self.out))
            except BlockingIOError:
                break
            if not sent:
                break  # TLS: OpenSSL waits for the socket
            del self.out[:sent]
        self._interest(writing=bool(self.out))

    def _interest(self, *, writing: bool) -> None:
        self.selectable.reading = not writing
        self.selectable.writing = writing
        self.container.update(self.selectable)

    # -- endings ------------------------------------------------------------------------------

    def _finish(self) -> None:
        self.finished = True
        self.timer.cancel()
        self.gate.pending.discard(self)

    def _report(self, reason: str, mechanism: str = "") -> None:
        """The structured log line of a failed authentication (never a password)."""
        log.warning("authentication failed: peer=%s tls=%s mechanism=%s reason=%s",
                    self.peer, self.tls is not None, mechanism or "-", reason)

    def drop(self, reason: str, *, quiet: bool = False) -> None:
        """Authentication failed (or timed out): log it unless already logged, and close."""
        if self.finished:
            return
        self._finish()
        if not quiet:
            self._report(reason, self.sasl.mechanism if self.sasl is not None else "")
        selectable = self.selectable
        selectable.terminate()
        selectable.update()  # final event: proton's IO handler closes the socket

    def _hand_over(self, sasl: SaslServer) -> None:
        """Authenticated: the connection, a server transport, and the fast event loop take over."""
        self._finish()
        identity = Identity(self.gate.policy, sasl.user, sasl.mechanism)
        principal = identity.principal()
        container = self.container
        connection: Any = container.connection(container.handler)
        internals.mark_accepted(connection, self.acceptor)  # "this connection has its socket"
        connection.url = Url(  # type: ignore[no-untyped-call]
            host=str(self.address[0]), port=int(self.address[1]))
        connection.broker_identity = identity
        transport = Transport(Transport.SERVER)
        transport.bind(connection)
        selectable = self.selectable
        selectable.handler = None
        internals.bind_transport(selectable, transport)
        if self.tls is not None:
            self.tls.selectable = selectable
            if self.tls.sock.pending():
                container.buffered.add(selectable)
        if sasl.leftover:
            transport.push(sasl.leftover)
        internals.update_io(transport, selectable, container.now)
        log.info("authenticated: peer=%s tls=%s mechanism=%s user=%s", self.peer,
                 self.tls is not None, sasl.mechanism, principal.name)
