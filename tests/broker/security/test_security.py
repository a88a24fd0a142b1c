"""Access control end to end: TLS, SASL (PLAIN, EXTERNAL, ANONYMOUS) and per-user permissions.

Real brokers on real sockets, python-qpid-proton clients doing real TLS
handshakes and SASL negotiations; certificates made by ``openssl`` once per
session.
"""

from __future__ import annotations

import logging
import socket
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from proton import ConnectionException, Delivery, Message, SSLDomain
from proton.reactor import Copy
from proton.utils import BlockingConnection, LinkDetached, SendException

from filtex_broker.config import ConfigError, load_config
from filtex_broker.security.sasl import AMQP_HEADER, SASL_HEADER
from filtex_broker.security.users import hash_password

from ..broker_clients import TIMEOUT, BrokerFactory, RunningBroker, connect, message, send
from ..certs import Certs, Pair, make_certs

REPO = Path(__file__).resolve().parents[3]
UNAUTHORIZED = "amqp:unauthorized-access"

USERS = """
[users.alice]
password = "{alice}"
send = ["orders.#"]
receive = ["orders.*"]

[users.viewer]
password = "{viewer}"
browse = ["orders.*"]

[users.relay]
password = "{relay}"
send = ["orders.#", "replies/*"]

[users.billing]
subject = "CN=billing,O=Example"
receive = ["invoices.#"]

[users.bob]
send = ["bob.#"]
receive = ["bob.#"]

[users.anonymous]
browse = ["public.#"]
"""


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def users_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("users") / "users.toml"
    path.write_text(USERS.format(alice=hash_password("alice-pw"),
                                 viewer=hash_password("viewer-pw"),
                                 relay=hash_password("relay-pw")))
    return path


@pytest.fixture
def secured(broker_factory: BrokerFactory, users_file: Path) -> RunningBroker:
    """A loopback broker with the users file (PLAIN offered to loopback peers)."""
    return broker_factory(users=str(users_file))


@pytest.fixture
def tls_broker(broker_factory: BrokerFactory, users_file: Path,
               certs: Certs) -> Iterator[tuple[RunningBroker, str]]:
    """A broker with a plain and a TLS listener that requires client certificates."""
    running = broker_factory(users=str(users_file), listen_tls="127.0.0.1:0",
                             tls_cert=str(certs.server.cert), tls_key=str(certs.server.key),
                             tls_ca=str(certs.ca), tls_verify_client="optional")
    host, port = running.broker.addresses[1]
    yield running, f"amqps://{host}:{port}"


def client_tls(certs: Certs, pair: Pair | None = None) -> SSLDomain:
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    domain.set_trusted_ca_db(str(certs.ca))
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    if pair is not None:
        domain.set_credentials(str(pair.cert), str(pair.key), None)
    return domain


def plain(url: str, user: str, password: str, **kwargs: Any) -> BlockingConnection:
    return connect(url, user=user, password=password, allowed_mechs="PLAIN", **kwargs)


def until_closed(sock: socket.socket) -> bytes:
    """Everything the broker sends before it closes the socket (a reset counts as closed)."""
    data = b""
    try:
        while chunk := sock.recv(4096):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def refused(connection: BlockingConnection, address: str, **kwargs: Any) -> Any:
    """The condition the broker detached a receiver's attach with."""
    with pytest.raises(LinkDetached) as info:
        connection.create_receiver(address, **kwargs)
    return info.value.link.remote_condition


# -- SASL PLAIN and ANONYMOUS on a plaintext loopback listener -----------------------------------


def test_plain_with_the_right_password_gets_in(secured: RunningBroker) -> None:
    connection = plain(secured.url, "alice", "alice-pw")
    try:
        send(connection.create_sender("orders.eu"), message("hello"))
        receiver = connection.create_receiver("orders.eu")
        assert receiver.receive(timeout=TIMEOUT).body == "hello"
        receiver.accept()
    finally:
        connection.close()


def test_wrong_password_fails_and_is_logged_without_it(
    secured: RunningBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="filtex.broker.auth")
    with pytest.raises(ConnectionException, match=UNAUTHORIZED):
        plain(secured.url, "alice", "not-the-password-42")
    with pytest.raises(ConnectionException, match=UNAUTHORIZED):
        plain(secured.url, "mallory", "whatever-99")
    failures = [r.getMessage() for r in caplog.records if "authentication failed" in
                r.getMessage()]
    assert any("'alice': wrong password" in line for line in failures)
    assert any("'mallory': unknown" in line for line in failures)
    assert not any("not-the-password-42" in r.getMessage() or "whatever-99" in r.getMessage()
                   for r in caplog.records)


def test_anonymous_is_refused_unless_enabled(secured: RunningBroker) -> None:
    with pytest.raises(ConnectionException, match=UNAUTHORIZED):
        connect(secured.url, allowed_mechs="ANONYMOUS")
    with pytest.raises(ConnectionException):
        connect(secured.url, sasl_enabled=False)  # no SASL at all: not let in either


def test_enabled_anonymous_gets_the_anonymous_entry(
    broker_factory: BrokerFactory, users_file: Path
) -> None:
    running = broker_factory(users=str(users_file), allow_anonymous=True)
    connection = connect(running.url, allowed_mechs="ANONYMOUS")
    try:
        browser = connection.create_receiver("public.news", options=Copy())
        assert browser.link.remote_source.address == "public.news"
        assert refused(connection, "public.news", name="consume").name == UNAUTHORIZED
        # browse, not consume
        with pytest.raises(LinkDetached):
            connection.create_sender("public.news")
    finally:
        connection.close()


def test_a_failed_connection_does_not_disturb_others(secured: RunningBroker) -> None:
    good = plain(secured.url, "alice", "alice-pw")
    try:
        sender = good.create_sender("orders.a")
        receiver = good.create_receiver("orders.a")
        host, port = secured.broker.addresses[0]
        with socket.create_connection((host, port), timeout=TIMEOUT) as junk:
            junk.sendall(b"GET / HTTP/1.1\r\n\r\n")
            # not AMQP: the header we speak (§2.2), then closed
            assert until_closed(junk) == SASL_HEADER
        with pytest.raises(ConnectionException):
            plain(secured.url, "alice", "wrong")
        send(sender, message(1), message(2))
        assert [receiver.receive(timeout=TIMEOUT).body for _ in range(2)] == [1, 2]
        receiver.accept()
    finally:
        good.close()


def test_a_silent_client_is_dropped_after_the_auth_timeout(
    broker_factory: BrokerFactory, users_file: Path
) -> None:
    running = broker_factory(users=str(users_file), auth_timeout=0.2)
    host, port = running.broker.addresses[0]
    with socket.create_connection((host, port), timeout=TIMEOUT) as silent:
        silent.sendall(SASL_HEADER)
        data = until_closed(silent)
    assert data.startswith(SASL_HEADER)  # mechanisms offered, then the door closed


def test_pipelined_amqp_after_sasl_reaches_the_transport(secured: RunningBroker) -> None:
    """A client may send the AMQP header right behind its sasl-init (no round trip)."""
    from filtex_broker.security.sasl import frame

    host, port = secured.broker.addresses[0]
    init = frame(0x41, [_symbol("PLAIN"), b"\0alice\0alice-pw"])
    with socket.create_connection((host, port), timeout=TIMEOUT) as raw:
        raw.sendall(SASL_HEADER + init + AMQP_HEADER)
        data = b""
        while AMQP_HEADER not in data:
            chunk = raw.recv(4096)
            assert chunk, f"closed before the AMQP header: {data!r}"
            data += chunk
    assert data.index(AMQP_HEADER) > data.index(b"\x00SD")  # outcome first, then AMQP


def _symbol(text: str) -> Any:
    from proton import symbol

    return symbol(text)


# -- permissions ----------------------------------------------------------------------------


def test_send_and_receive_permissions_follow_the_wildcards(secured: RunningBroker) -> None:
    connection = plain(secured.url, "alice", "alice-pw")
    try:
        connection.create_sender("orders.eu.paris")  # send orders.# : any depth
        connection.create_sender("orders")
        with pytest.raises(LinkDetached) as info:
            connection.create_sender("invoices.x")
        assert info.value.link.remote_condition.name == UNAUTHORIZED
        assert "no send permission for 'invoices.x'" in info.value.link.remote_condition.description
        connection.create_receiver("orders.eu")  # receive orders.* : one segment
        condition = refused(connection, "orders.eu.paris")
        assert condition.name == UNAUTHORIZED
        assert "no receive permission" in condition.description
    finally:
        connection.close()


def test_an_unauthorised_attach_creates_no_node(secured: RunningBroker) -> None:
    connection = plain(secured.url, "alice", "alice-pw")
    try:
        refused(connection, "secret.stuff")
        assert secured.broker.registry.lookup("secret.stuff") is None
    finally:
        connection.close()


def test_browse_permission_allows_copy_mode_only(secured: RunningBroker) -> None:
    feeder = plain(secured.url, "alice", "alice-pw")
    viewer = plain(secured.url, "viewer", "viewer-pw")
    try:
        send(feeder.create_sender("orders.eu"), message("look"))
        browser = viewer.create_receiver("orders.eu", options=Copy())
        assert browser.receive(timeout=TIMEOUT).body == "look"
        browser.accept()
        assert refused(viewer, "orders.eu", name="consume").name == UNAUTHORIZED
        consumer = feeder.create_receiver("orders.eu")  # still there: browsing took nothing
        assert consumer.receive(timeout=TIMEOUT).body == "look"
        consumer.accept()
    finally:
        feeder.close()
        viewer.close()


def test_anonymous_relay_checks_each_message(secured: RunningBroker) -> None:
    connection = plain(secured.url, "relay", "relay-pw")
    alice = plain(secured.url, "alice", "alice-pw")
    try:
        relay = connection.create_sender(None)
        relay.send(Message(address="orders.a", body="allowed"), timeout=TIMEOUT)
        relay.send(Message(address="replies/x", body="allowed too"), timeout=TIMEOUT)
        with pytest.raises(SendException) as info:
            relay.send(Message(address="invoices.a", body="denied"), timeout=TIMEOUT)
        assert info.value.state == Delivery.REJECTED
        relay.send(Message(address="orders.b", body="link still usable"), timeout=TIMEOUT)
        receiver = alice.create_receiver("orders.a")
        assert receiver.receive(timeout=TIMEOUT).body == "allowed"
        receiver.accept()
        assert secured.broker.registry.lookup("invoices.a") is None
    finally:
        connection.close()
        alice.close()


def test_dynamic_nodes_need_no_grant(secured: RunningBroker) -> None:
    connection = plain(secured.url, "viewer", "viewer-pw")  # may only browse orders.*
    try:
        receiver = connection.create_receiver(None, dynamic=True)
        address = receiver.link.remote_source.address
        assert address and secured.broker.registry.lookup(address) is not None
    finally:
        connection.close()


def test_stopping_drops_connections_still_negotiating(
    broker_factory: BrokerFactory, users_file: Path
) -> None:
    running = broker_factory(users=str(users_file), auth_timeout=600)
    with socket.create_connection(running.broker.addresses[0], timeout=TIMEOUT) as half:
        half.sendall(SASL_HEADER)  # then nothing: waits in the middle of SASL
        assert half.recv(8) == SASL_HEADER
        running.broker.stop()
        running.thread.join(TIMEOUT)
        assert not running.thread.is_alive()
        assert b"\x00SD" not in until_closed(half)  # closed without any sasl-outcome


def test_users_command_help_shows_an_example() -> None:
    result = subprocess.run([sys.executable, "-m", "filtex_broker.security.users_cli", "--help"],
                            cwd=REPO,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0
    assert "filtex-broker-users add users.toml alice --send 'orders.#'" in result.stdout


def test_unsecured_broker_has_no_gate(broker: RunningBroker) -> None:
    assert broker.broker.gate is None  # Proton's own acceptor: the fast path as before
    connection = connect(broker.url)
    try:
        connection.create_receiver("anything.at.all")
    finally:
        connection.close()


# -- TLS ---------------------------------------------------------------------------------------


def test_plain_over_tls(tls_broker: tuple[RunningBroker, str], certs: Certs) -> None:
    _, url = tls_broker
    connection = plain(url, "alice", "alice-pw", ssl_domain=client_tls(certs), sni="localhost")
    try:
        send(connection.create_sender("orders.tls"), *(message(i) for i in range(200)))
        receiver = connection.create_receiver("orders.tls", credit=200)
        assert [receiver.receive(timeout=TIMEOUT).body for _ in range(200)] == list(range(200))
        receiver.accept()
    finally:
        connection.close()


def test_large_messages_over_tls_arrive_whole(
    tls_broker: tuple[RunningBroker, str], certs: Certs
) -> None:
    """Bigger than a TLS record and the transport's window: the buffered-record path."""
    _, url = tls_broker
    connection = plain(url, "alice", "alice-pw", ssl_domain=client_tls(certs), sni="localhost")
    try:
        body = "x" * 300_000
        send(connection.create_sender("orders.big"), *(message(body + str(i)) for i in range(5)))
        receiver = connection.create_receiver("orders.big", credit=5)
        got = [receiver.receive(timeout=TIMEOUT).body for _ in range(5)]
        receiver.accept()
        assert got == [body + str(i) for i in range(5)]
    finally:
        connection.close()


def test_external_maps_the_certificate_subject(
    tls_broker: tuple[RunningBroker, str], certs: Certs
) -> None:
    _, url = tls_broker
    connection = connect(url, ssl_domain=client_tls(certs, certs.billing), sni="localhost",
                         allowed_mechs="EXTERNAL")
    try:
        connection.create_receiver("invoices.2026")
        assert refused(connection, "orders.eu").name == UNAUTHORIZED
    finally:
        connection.close()


def test_external_maps_the_common_name_to_a_user(
    tls_broker: tuple[RunningBroker, str], certs: Certs
) -> None:
    _, url = tls_broker
    connection = connect(url, ssl_domain=client_tls(certs, certs.bob), sni="localhost",
                         allowed_mechs="EXTERNAL")
    try:
        connection.create_receiver("bob.inbox")
        assert refused(connection, "invoices.x").name == UNAUTHORIZED
    finally:
        connection.close()


def test_untrusted_client_certificate_is_refused(
    tls_broker: tuple[RunningBroker, str], certs: Certs
) -> None:
    _, url = tls_broker
    with pytest.raises(ConnectionException):
        connect(url, ssl_domain=client_tls(certs, certs.stranger), sni="localhost",
                allowed_mechs="EXTERNAL")


def test_required_client_certificate_missing_fails_others_go_on(
    broker_factory: BrokerFactory, users_file: Path, certs: Certs
) -> None:
    running = broker_factory(users=str(users_file), listen_tls="127.0.0.1:0",
                             tls_cert=str(certs.server.cert), tls_key=str(certs.server.key),
                             tls_ca=str(certs.ca), tls_verify_client="required")
    host, port = running.broker.addresses[1]
    url = f"amqps://{host}:{port}"
    good = connect(url, ssl_domain=client_tls(certs, certs.bob), sni="localhost",
                   allowed_mechs="EXTERNAL")
    try:
        with pytest.raises(ConnectionException):
            plain(url, "alice", "alice-pw", ssl_domain=client_tls(certs), sni="localhost")
        with socket.create_connection((host, port), timeout=TIMEOUT) as raw:
            raw.sendall(SASL_HEADER)  # plaintext on a TLS port: a failed handshake
            assert SASL_HEADER not in until_closed(raw)  # at most a TLS alert
        sender = good.create_sender("bob.inbox")
        send(sender, message("still fine"))
        receiver = good.create_receiver("bob.inbox")
        assert receiver.receive(timeout=TIMEOUT).body == "still fine"
        receiver.accept()
    finally:
        good.close()


def test_tls_handshake_with_python_ssl_then_plain(
    tls_broker: tuple[RunningBroker, str], certs: Certs
) -> None:
    """The server certificate verifies with a different TLS stack too (Python's ssl)."""
    running, _ = tls_broker
    host, port = running.broker.addresses[1]
    context = ssl.create_default_context(cafile=str(certs.ca))
    with socket.create_connection((host, port), timeout=TIMEOUT) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(SASL_HEADER)
        data = b""
        while b"PLAIN" not in data:
            chunk = tls.recv(4096)
            assert chunk
            data += chunk
    assert data.startswith(SASL_HEADER)
    assert b"EXTERNAL" not in data  # no client certificate: EXTERNAL is not offered


# -- start-up rules -----------------------------------------------------------------------------


def test_refuses_to_listen_beyond_loopback_without_auth() -> None:
    with pytest.raises(ConfigError, match=r"beyond loopback.*--users FILE.*--allow-anonymous"):
        load_config(["--listen", "0.0.0.0:0"], env={})
    assert load_config(["--listen", "0.0.0.0:0", "--allow-anonymous"], env={}).allow_anonymous
    result = subprocess.run([sys.executable, "-m", "filtex_broker", "--listen", "0.0.0.0:0"],
                            cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "without authentication" in result.stderr


@pytest.mark.parametrize(("argv", "expected"), [
    (["--listen-tls", "127.0.0.1:0"], "needs tls_cert and tls_key"),
    (["--tls-verify-client", "maybe"], "none, optional or required"),
    (["--tls-verify-client", "required"], "needs tls_ca"),
    (["--users", "/nonexistent/users.toml"], "cannot read users file"),
    (["--no-allow-anonymous"], "nobody could connect"),
])
def test_bad_security_settings_are_refused(argv: list[str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load_config(argv, env={})


def test_bad_tls_files_are_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ConfigError, match="cannot load certificate"):
        load_config(["--listen-tls", "127.0.0.1:0", "--tls-cert", str(junk), "--tls-key",
                     str(junk)], env={})
