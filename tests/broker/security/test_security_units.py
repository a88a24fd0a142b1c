"""The security building blocks alone: patterns, users file, hashing, SASL frames, TLS socket."""

from __future__ import annotations

import socket
import ssl
import struct
import threading
from pathlib import Path

import pytest
from proton import Described, symbol

from filtex_broker.security.auth import (
    AccessPolicy,
    ConnectionFacts,
    PlainCheck,
    anonymous_default,
    is_loopback,
)
from filtex_broker.security.permissions import Action, Grants, PatternError, compile_pattern
from filtex_broker.security.sasl import AMQP_HEADER, SASL_HEADER, Outcome, SaslServer, State, frame
from filtex_broker.security.tls import TlsSettings, TlsSocket, server_context
from filtex_broker.security.users import UsersError, hash_password, load_users, verify_password
from filtex_broker.security.users_cli import main as users_main
from filtex_proton.amqp import decode_value, encode_value

from ..certs import Certs, make_certs

# -- address patterns -------------------------------------------------------------------------


@pytest.mark.parametrize(("pattern", "address", "matches"), [
    ("orders.*", "orders.eu", True),
    ("orders.*", "orders", False),
    ("orders.*", "orders.eu.paris", False),
    ("orders.#", "orders", True),
    ("orders.#", "orders.eu.paris", True),
    ("orders.#", "ordersx", False),
    ("#", "", True),
    ("#", "any/thing.at.all", True),
    ("#.dlq", "dlq", True),
    ("#.dlq", "a.b.dlq", True),
    ("#.dlq", "adlq", False),
    ("a.#.z", "a.z", True),
    ("a.#.z", "a.b.c.z", True),
    ("a.#.z", "az", False),
    ("queue/*", "queue/x", True),
    ("queue/*", "queue.x", False),
    ("x+y.(z)", "x+y.(z)", True),
    ("x+y.(z)", "xxy.z", False),
])
def test_pattern_syntax(pattern: str, address: str, matches: bool) -> None:
    assert bool(compile_pattern(pattern).fullmatch(address)) is matches


@pytest.mark.parametrize("pattern", ["", "ord*", "a.b#", "a..b"])
def test_bad_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(PatternError):
        compile_pattern(pattern)


def test_receive_implies_browse_but_not_send() -> None:
    grants = Grants(send=["out.#"], receive=["in.*"])
    assert grants.allows(Action.BROWSE, "in.x")
    assert grants.allows(Action.RECEIVE, "in.x")
    assert not grants.allows(Action.SEND, "in.x")
    assert grants.allows(Action.SEND, "out")
    assert not Grants().allows(Action.BROWSE, "anything")


# -- users file and hashing -----------------------------------------------------------------


def test_password_hashes_are_salted_and_verified() -> None:
    first, second = hash_password("s3cret"), hash_password("s3cret")
    assert first != second  # a fresh salt each time
    assert first.startswith("scrypt$16384$8$1$")
    assert verify_password("s3cret", first) and verify_password("s3cret", second)
    assert not verify_password("s3cret!", first)
    assert not verify_password("s3cret", "md5$whatever")


@pytest.mark.parametrize(("text", "expected"), [
    ("[users.a]\npassword = 'plain-text'\n", "not a hash"),
    ("[users.a]\nsend = ['ord*']\n", "wildcards must be whole segments"),
    ("[users.a]\nsned = ['x']\n", "unknown keys"),
    ("[users.anonymous]\npassword = '{hash}'\n", "anonymous entry cannot have a password"),
    ("[users.a]\nsubject = 'CN=x'\n[users.b]\nsubject = 'CN = x'\n", "given to both"),
    ("[other]\n", r"only \[users.NAME\] tables"),
    ("[users.a\n", "users file"),
    ("[users.a]\nadmin = 'yes'\n", "admin must be true or false"),
])
def test_users_file_errors_name_the_problem(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "users.toml"
    path.write_text(text.replace("{hash}", hash_password("x")))
    with pytest.raises(UsersError, match=expected):
        load_users(path)


def test_users_cli_adds_checks_and_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "users.toml"
    path.write_text("# operators' comment\n")
    monkeypatch.setattr("sys.stdin", _Lines("pw-1\n"))
    assert users_main(["add", str(path), "alice", "--password-stdin", "--send", "orders.#",
                       "--receive", "orders.*"]) == 0
    assert users_main(["add", str(path), "billing", "--subject", "CN=billing,O=Ex",
                       "--receive", "#"]) == 0
    assert path.read_text().startswith("# operators' comment\n")
    users = load_users(path)
    alice = users.get("alice")
    assert alice is not None and alice.password_hash is not None
    assert verify_password("pw-1", alice.password_hash)
    assert users.for_subject("CN=billing, O=Ex", "billing") is users.get("billing")
    assert users_main(["check", str(path)]) == 0
    assert "alice: password; send=['orders.#']" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", _Lines("pw-2\n"))
    assert users_main(["add", str(path), "alice", "--password-stdin"]) == 1
    assert users_main(["add", str(path), "eve", "--no-password", "--send", "a*"]) == 1
    err = capsys.readouterr().err
    assert "exists already" in err and "whole segments" in err and ".tmp" not in err
    assert load_users(path).get("eve") is None  # the bad entry was not written
    monkeypatch.setattr("sys.stdin", _Lines("pw-3\n"))
    assert users_main(["add", str(path), "ops", "--password-stdin", "--admin"]) == 0
    users = load_users(path)
    assert users.get("ops").admin and not users.get("alice").admin  # type: ignore[union-attr]
    assert users_main(["check", str(path)]) == 0
    assert "ops: password; send=[]; receive=[]; browse=[]; admin" in capsys.readouterr().out


class _Lines:
    def __init__(self, text: str) -> None:
        self._lines = text.splitlines(keepends=True)

    def readline(self) -> str:
        return self._lines.pop(0) if self._lines else ""


# -- the policy -------------------------------------------------------------------------------


def test_anonymous_default_and_loopback() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("") and not is_loopback("10.1.2.3")
    assert anonymous_default(["127.0.0.1", "::1"], None)
    assert not anonymous_default(["127.0.0.1", "0.0.0.0"], None)


def test_plain_is_not_offered_in_clear_text_beyond_loopback(tmp_path: Path) -> None:
    path = tmp_path / "users.toml"
    path.write_text(f"[users.a]\npassword = '{hash_password('x')}'\n")
    policy = AccessPolicy(load_users(path), allow_anonymous=False,
                          allow_plain_without_tls=False)
    assert policy.mechanisms(ConnectionFacts("10.0.0.5", tls=False)) == []
    assert policy.mechanisms(ConnectionFacts("127.0.0.1", tls=False)) == ["PLAIN"]
    assert policy.mechanisms(ConnectionFacts("10.0.0.5", tls=True)) == ["PLAIN"]
    assert policy.mechanisms(ConnectionFacts("10.0.0.5", tls=True, subject="CN=a")) == \
        ["EXTERNAL", "PLAIN"]
    opened = AccessPolicy(load_users(path), allow_anonymous=True, allow_plain_without_tls=True)
    assert opened.mechanisms(ConnectionFacts("10.0.0.5", tls=False)) == ["PLAIN", "ANONYMOUS"]
    facts = ConnectionFacts("127.0.0.1", tls=False)
    first = policy.authenticate(facts, "PLAIN", b"\0a\0x")
    assert isinstance(first, PlainCheck) and first.known  # scrypt: for the workers
    assert policy.checked(first, verify_password(first.password, first.stored)).user == "a"
    assert policy.authenticate(facts, "PLAIN", b"\0a\0x") == Outcome("a")  # the cached path
    wrong = policy.authenticate(facts, "PLAIN", b"\0a\0y")
    assert isinstance(wrong, PlainCheck)
    assert "wrong password" in policy.checked(wrong, False).reason
    unknown = policy.authenticate(facts, "PLAIN", b"\0nobody\0x")
    assert isinstance(unknown, PlainCheck) and not unknown.known
    assert policy.checked(unknown, True).user is None  # never in, whatever the dummy hash says
    assert policy.authenticate(facts, "PLAIN", b"b\0a\0x") == Outcome(
        None, "user 'a' may not act as 'b'")
    assert policy.authenticate(facts, "PLAIN", b"garbage") == Outcome(
        None, "malformed PLAIN response")
    assert policy.principal(None, "ANONYMOUS").allows(Action.BROWSE, "x") is False


# -- SASL frames ------------------------------------------------------------------------------


def _server(*mechanisms: str, bare: bool = False) -> SaslServer:
    def authenticate(mechanism: str, response: bytes | None) -> Outcome:
        if mechanism == "PLAIN" and response == b"\0u\0p":
            return Outcome("u")
        return Outcome(None, "no")

    return SaslServer(mechanisms or ("PLAIN",), authenticate, accept_bare_amqp=bare)


def _frames(data: bytes) -> list[tuple[int, list[object]]]:
    out = []
    pos = 8 if data.startswith(SASL_HEADER) else 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big")
        value, _ = decode_value(data[pos + 8:pos + size])
        out.append((int(value.descriptor), value.value))
        pos += size
    return out


def test_sasl_plain_byte_by_byte_with_pipelined_amqp() -> None:
    server = _server("PLAIN", "ANONYMOUS")
    stream = SASL_HEADER + frame(0x41, [symbol("PLAIN"), b"\0u\0p"]) + AMQP_HEADER + b"more"
    for i in range(len(stream)):
        server.feed(stream[i:i + 1])
    assert server.state is State.DONE and server.user == "u"
    frames = _frames(bytes(server.output))
    assert frames[0][0] == 0x40 and list(frames[0][1][0]) == ["PLAIN", "ANONYMOUS"]
    assert frames[1] == (0x44, [0])
    assert server.leftover == AMQP_HEADER + b"more"



def test_sasl_frames_with_symbolic_descriptors_are_understood() -> None:
    """AMQP 1.0 §1.5: a described type may carry its symbolic descriptor instead of the code."""
    server = _server("PLAIN")
    init = encode_value(Described(symbol("amqp:sasl-init:list"), [symbol("PLAIN")]))
    response = encode_value(Described(symbol("amqp:sasl-response:list"), [b"\0u\0p"]))
    for body in (init, response):
        server.feed((SASL_HEADER if body is init else b"")
                    + struct.pack(">IBBH", 8 + len(body), 2, 1, 0) + body)
    assert server.state is State.DONE and server.user == "u"
    assert _frames(bytes(server.output))[-1] == (0x44, [0])


def test_sasl_plain_without_initial_response_gets_a_challenge() -> None:
    server = _server()
    server.feed(SASL_HEADER + frame(0x41, [symbol("PLAIN")]))
    assert server.state is State.RESPONSE
    server.feed(frame(0x43, [b"\0u\0p"]))
    assert server.state is State.DONE
    assert [d for d, _ in _frames(bytes(server.output))] == [0x40, 0x42, 0x44]


@pytest.mark.parametrize(("stream", "failure", "code"), [
    (SASL_HEADER + frame(0x41, [symbol("PLAIN"), b"\0u\0bad"]), "no", 1),
    (SASL_HEADER + frame(0x41, [symbol("CRAM-MD5"), b""]), "not offered", 1),
    (SASL_HEADER + frame(0x44, [0]), "unexpected SASL frame", 3),
    (SASL_HEADER + b"\x7f\xff\xff\xff\x02\x01\x00\x00", "malformed SASL frame", None),
    (SASL_HEADER + b"\x00\x00\x00\x0a\x02\x01\x00\x00\xff\xff", "undecodable", None),
    (AMQP_HEADER, "did not start SASL", None),
    (b"HTTP/1.1", "not an AMQP SASL protocol header", None),
    (b"GET", "not an AMQP protocol header", None),
])
def test_sasl_failures(stream: bytes, failure: str, code: int | None) -> None:
    server = _server()
    server.feed(stream)
    assert server.state is State.FAILED
    assert failure in server.failure
    outcomes = [f for f in _frames(bytes(server.output)) if f[0] == 0x44]
    assert outcomes == ([(0x44, [code])] if code is not None else [])


def test_bare_amqp_is_anonymous_when_allowed() -> None:
    server = _server("ANONYMOUS", bare=True)
    server.feed(AMQP_HEADER + b"open")
    assert server.state is State.DONE and server.mechanism == "none"
    assert server.leftover == AMQP_HEADER + b"open" and not server.output


# -- the TLS socket --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("unit-certs"))


def test_tls_socket_reports_records_it_holds(certs: Certs) -> None:
    """A read smaller than the decrypted record leaves bytes ``select`` cannot see."""
    left, right = socket.socketpair()
    server = server_context(TlsSettings(certs.server.cert, certs.server.key, None, "none"))
    client = ssl.create_default_context(cafile=str(certs.ca))
    tls_client = client.wrap_socket(left, server_hostname="localhost",
                                    do_handshake_on_connect=False)
    thread = threading.Thread(target=tls_client.do_handshake)
    thread.start()
    raw = server.wrap_socket(right, server_side=True)
    thread.join()
    buffered: set[object] = set()
    stream = TlsSocket(raw, buffered)
    stream.selectable = marker = object()
    tls_client.sendall(b"x" * 10_000)  # one TLS record
    raw.setblocking(False)
    first = stream.recv(100)
    assert first == b"x" * 100
    assert buffered == {marker}
    rest = b""
    while len(rest) < 9_900:
        rest += stream.recv(100_000)
    assert rest == b"x" * 9_900
    with pytest.raises(BlockingIOError):
        stream.recv(10)
    stream.close()
    assert not buffered
    tls_client.close()
