"""Password checks off the event loop, alone: the late SASL outcome, the bounds, the back-off;
the users file reload and the per-message relay check.

The verifier runs real scrypt checks on its real worker threads; only the
reactor is played by the test (a wake-up event, a list of scheduled calls, a
clock it moves by hand).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from proton import Condition, Message, symbol

from filtex_broker.security.access import relay_refusal
from filtex_broker.security.auth import AccessPolicy, ConnectionFacts, PlainCheck
from filtex_broker.security.permissions import Action, Grants, Principal
from filtex_broker.security.sasl import SASL_HEADER, Outcome, SaslServer, State, frame
from filtex_broker.security.users import hash_password, load_users
from filtex_broker.security.verifier import Limits, PasswordVerifier
from filtex_proton.amqp import decode_value
from filtex_proton.plugin import FilterMessage

CHEAP = hash_password("right", n=16)  # a real scrypt hash, cheap enough for many checks


# -- the SASL state machine answers late --------------------------------------------------------


def _outcomes(data: bytes) -> list[object]:
    out, pos = [], 8 if data.startswith(SASL_HEADER) else 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        value, _ = decode_value(data[pos + 8:pos + size])
        if int(value.descriptor) == 0x44:
            out.append(value.value[0])
        pos += size
    return out


def _pending_server() -> SaslServer:
    server = SaslServer(("PLAIN",), lambda mechanism, response: None)
    server.feed(SASL_HEADER + frame(0x41, [symbol("PLAIN"), b"\0u\0p"]))
    assert server.state is State.CHECKING and _outcomes(bytes(server.output)) == []
    return server


def test_a_late_success_keeps_what_the_client_pipelined_meanwhile() -> None:
    server = _pending_server()
    server.feed(b"AMQP\x00\x01\x00\x00")
    server.feed(b"open...")
    server.conclude(Outcome("u"))
    assert server.state is State.DONE and server.user == "u"
    assert _outcomes(bytes(server.output)) == [0]
    assert server.leftover == b"AMQP\x00\x01\x00\x00open..."


def test_a_busy_broker_answers_sys_temp() -> None:
    server = _pending_server()
    server.conclude(Outcome(None, "busy", temporary=True))
    assert server.state is State.FAILED and server.failure == "busy"
    assert _outcomes(bytes(server.output)) == [4]  # sys-temp: the client may retry


def test_a_client_cannot_pile_up_bytes_while_we_check() -> None:
    server = _pending_server()
    server.feed(b"x" * 70_000)
    assert server.state is State.FAILED and "before the SASL outcome" in server.failure
    server.conclude(Outcome("u"))  # the check's late answer changes nothing any more
    assert server.state is State.FAILED and server.user is None


# -- the verifier ------------------------------------------------------------------------------


class Reactor:
    """What the broker's reactor does for the verifier: wake-ups, timers, a clock."""

    def __init__(self) -> None:
        self.woken = threading.Event()
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.now = 1000.0
        self.cancelled = 0

    def schedule(self, delay: float, function: Callable[[], None]) -> Reactor:
        self.timers.append((delay, function))
        return self

    def cancel(self) -> None:
        self.cancelled += 1

    def run_until(self, verifier: PasswordVerifier, done: list[bool], count: int) -> None:
        """Deliver results as the broker's wake-up does, until ``count`` came back."""
        while len(done) + len(self.timers) < count:
            assert self.woken.wait(30), "no result from the workers"
            self.woken.clear()
            verifier.complete()


@pytest.fixture
def reactor() -> Reactor:
    return Reactor()


def _verifier(reactor: Reactor, **limits: Any) -> PasswordVerifier:
    return PasswordVerifier(reactor.woken.set, reactor.schedule, Limits(**limits),
                            clock=lambda: reactor.now)


def test_checks_run_on_workers_and_report_on_complete(reactor: Reactor) -> None:
    verifier = _verifier(reactor)
    done: list[bool] = []
    assert verifier.submit("10.0.0.1", "right", CHEAP, done.append)
    assert verifier.submit("10.0.0.2", "wrong", CHEAP, done.append)
    assert done == []  # nothing is delivered outside complete() (the reactor thread)
    reactor.run_until(verifier, done, 2)
    assert sorted(done) == [False, True]
    verifier.close()


def test_bounds_per_address_and_in_total_fail_fast(reactor: Reactor) -> None:
    verifier = _verifier(reactor, per_peer=2, total=3)
    done: list[bool] = []
    assert verifier.submit("10.0.0.1", "right", CHEAP, done.append)
    assert verifier.submit("10.0.0.1", "right", CHEAP, done.append)
    assert not verifier.submit("10.0.0.1", "right", CHEAP, done.append)  # per address
    assert verifier.submit("10.0.0.2", "right", CHEAP, done.append)
    assert not verifier.submit("10.0.0.3", "right", CHEAP, done.append)  # in total
    assert verifier.refused == 2
    reactor.run_until(verifier, done, 3)
    assert done == [True, True, True]
    assert verifier.submit("10.0.0.1", "right", CHEAP, done.append)  # slots given back
    reactor.run_until(verifier, done, 4)
    verifier.close()


def test_repeated_failures_from_one_address_are_held_back(reactor: Reactor) -> None:
    verifier = _verifier(reactor, per_peer=1, free_failures=2, base_delay=0.5, max_delay=2.0,
                         window=60.0)
    done: list[bool] = []
    delays = []
    for attempt in range(6):
        assert verifier.submit("10.0.0.9", "wrong", CHEAP, done.append)
        reactor.run_until(verifier, done, attempt + 1)
        if reactor.timers:
            delay, deliver = reactor.timers.pop()
            assert not verifier.submit("10.0.0.9", "x", CHEAP, done.append)  # slot still held
            delays.append(delay)
            deliver()
    assert delays == [0.5, 1.0, 2.0, 2.0]  # after two free failures: doubling, capped
    assert done == [False] * 6
    # Another address is not slowed down; and once the window is over, neither is this one.
    assert verifier.submit("10.0.0.8", "wrong", CHEAP, done.append)
    reactor.run_until(verifier, done, 7)
    reactor.now += 61
    assert verifier.submit("10.0.0.9", "wrong", CHEAP, done.append)
    reactor.run_until(verifier, done, 8)
    assert reactor.timers == []
    verifier.close()


def test_close_answers_held_checks_and_refuses_new_ones(reactor: Reactor) -> None:
    verifier = _verifier(reactor, free_failures=0)
    done: list[bool] = []
    assert verifier.submit("10.0.0.1", "wrong", CHEAP, done.append)
    reactor.run_until(verifier, done, 1)
    assert len(reactor.timers) == 1 and done == []
    verifier.close()
    assert done == [False] and reactor.cancelled == 1
    assert not verifier.submit("10.0.0.1", "right", CHEAP, done.append)


# -- the users file, reloaded ------------------------------------------------------------------


def test_reload_swaps_a_valid_file_and_keeps_the_old_one_otherwise(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "users.toml"
    path.write_text(f"[users.a]\npassword = '{CHEAP}'\nsend = ['x']\n")
    policy = AccessPolicy(load_users(path), allow_anonymous=False, allow_plain_without_tls=False)
    facts = ConnectionFacts("127.0.0.1", tls=False)
    check = policy.authenticate(facts, "PLAIN", b"\0a\0right")
    assert isinstance(check, PlainCheck)
    assert policy.checked(check, True) == Outcome("a")  # remembered for the next connection

    path.write_text(f"[users.a]\npassword = '{hash_password('new', n=16)}'\nsend = ['y']\n")
    assert policy.reload()
    principal = policy.principal("a", "PLAIN")
    assert principal.allows(Action.SEND, "y") and not principal.allows(Action.SEND, "x")
    assert isinstance(policy.authenticate(facts, "PLAIN", b"\0a\0right"), PlainCheck)  # no cache

    path.write_text("[users.a]\nsend = ['ord*']\n")
    assert not policy.reload()
    assert "NOT reloaded" in caplog.text and "ord*" in caplog.text
    assert policy.principal("a", "PLAIN").allows(Action.SEND, "y")  # the previous file stays


# -- the per-message check of anonymous-relay links (ours and relay mode's) -----------------------


def test_relay_refusal_reads_properties_to() -> None:
    principal = Principal("p", "PLAIN", Grants(send=["orders.#"]))

    def verdict(message: Message) -> Condition | None:
        return relay_refusal(principal, "link", FilterMessage(message.encode(), None))

    assert verdict(Message(address="orders.eu", body="x")) is None
    assert verdict(Message(body="no to")) is None  # unroutable: refused as such downstream
    refused = verdict(Message(address="billing", body="x"))
    assert refused is not None and refused.name == "amqp:unauthorized-access"
    assert "no send permission for 'billing'" in str(refused.description)
    everyone = Principal("q", "ANONYMOUS", None)  # no users file: no restrictions
    assert relay_refusal(everyone, "link", FilterMessage(
        Message(address="billing").encode(), None)) is None
    broken = relay_refusal(principal, "link", FilterMessage(b"\x00Sp\xff", None))
    assert broken is not None and broken.name == "amqp:decode-error"
