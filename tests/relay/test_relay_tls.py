"""Relay mode over TLS: RabbitMQ's AMQPS listener with a throwaway CA (real TLS, real sockets)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from proton import Described, Message, Timeout, symbol
from proton.reactor import Filter
from proton.utils import BlockingConnection

from .relay_rabbit import Rabbit
from .relay_support import RelayFactory, RelayProcess

EVEN = Filter({symbol("f"): Described(symbol("amqp:sql-filter"), "even = TRUE")})


@pytest.fixture
def tls_rabbit(rabbit: Rabbit) -> Rabbit:
    if rabbit.tls_port is None:
        pytest.skip("the RabbitMQ node has no TLS listener (openssl is not installed)")
    return rabbit


def _wait_log(relay: RelayProcess, text: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in relay.log():
        assert time.monotonic() < deadline, f"{text!r} not in the relay's log:\n{relay.log()}"
        time.sleep(0.05)  # polling the relay's log file


def _round_trip(relay: RelayProcess) -> list[int]:
    """Publish six messages and read the even ones, all through the relay."""
    address = f"/queue/tls-{uuid.uuid4().hex[:8]}"
    conn = BlockingConnection(relay.address, timeout=20)
    sender = conn.create_sender(address)
    for i in range(6):
        sender.send(Message(id=i, body=f"m{i}", properties={"even": i % 2 == 0}))
    receiver = conn.create_receiver(address, options=EVEN, credit=10)
    got = []
    for _ in range(3):
        message = receiver.receive(timeout=10)
        got.append(int(message.id))
        receiver.accept()
    conn.close()
    return got


def _certs(rabbit: Rabbit) -> dict[str, str]:
    tls = rabbit.base / "tls"
    return {name: str(tls / name) for name in ("ca.pem", "client.pem", "client.key",
                                               "other-ca.pem")}


def test_relay_reaches_a_tls_upstream_it_trusts(
    tls_rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    files = _certs(tls_rabbit)
    relay = relay_factory(tls_rabbit.tls_url(), "--upstream-ca", files["ca.pem"])
    assert _round_trip(relay) == [0, 2, 4]
    assert "upstream amqps://localhost" in relay.log()


def test_relay_presents_a_client_certificate(
    tls_rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    files = _certs(tls_rabbit)
    relay = relay_factory(tls_rabbit.tls_url(), "--upstream-ca", files["ca.pem"],
                          "--upstream-cert", files["client.pem"],
                          "--upstream-key", files["client.key"])
    assert _round_trip(relay) == [0, 2, 4]


def test_a_certificate_for_another_host_is_refused_unless_told_otherwise(
    tls_rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    files = _certs(tls_rabbit)
    # The server certificate names localhost only: 127.0.0.1 does not match it.
    strict = relay_factory(tls_rabbit.tls_url("127.0.0.1"), "--upstream-ca", files["ca.pem"])
    _wait_log(strict, "reconnecting in")
    assert "certificate verify failed" in strict.log()
    assert "open (offers" not in strict.log()
    conn = BlockingConnection(strict.address, timeout=20)  # downstream still served
    receiver = conn.create_receiver(f"/queue/tls-{uuid.uuid4().hex[:8]}", credit=5)
    with pytest.raises(Timeout):
        receiver.receive(timeout=0.5)
    conn.close()

    relaxed = relay_factory(tls_rabbit.tls_url("127.0.0.1"), "--upstream-ca", files["ca.pem"],
                            "--no-upstream-verify-hostname")
    assert _round_trip(relaxed) == [0, 2, 4]


def test_an_untrusted_upstream_is_never_used(
    tls_rabbit: Rabbit, relay_factory: RelayFactory,
) -> None:
    files = _certs(tls_rabbit)
    relay = relay_factory(tls_rabbit.tls_url(), "--upstream-ca", files["other-ca.pem"])
    _wait_log(relay, "reconnecting in")
    assert "certificate verify failed" in relay.log()
    assert "open (offers" not in relay.log()


def test_a_ca_file_that_is_not_pem_is_reported_and_retried(
    tmp_path: Path, relay_factory: RelayFactory,
) -> None:
    bad = tmp_path / "bad-ca.pem"
    bad.write_text("this is not a certificate\n")
    relay = relay_factory("amqps://localhost:1", "--upstream-ca", str(bad))
    _wait_log(relay, "upstream TLS settings unusable")
    conn = BlockingConnection(relay.address, timeout=20)  # the relay keeps serving
    conn.create_receiver("/queue/anything", credit=1)
    conn.close()
