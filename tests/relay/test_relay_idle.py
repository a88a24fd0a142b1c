"""A silent upstream (``--upstream-idle-timeout``): RabbitMQ frozen with SIGSTOP, and a real
partition between the relay and its upstream (network namespaces, packets dropped, not refused).

Either way the upstream's TCP connection stays up and says nothing: the relay must notice within
its idle-timeout, log it, reconnect once the upstream answers again, and keep its clients' links;
every message is accepted at least once and none is lost. The partition needs root (network
namespaces, iproute2); without it that test skips and says so.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from proton import Message, Timeout
from proton.utils import BlockingConnection

from .relay_rabbit import Rabbit
from .relay_support import ROOT, RelayFactory

IDLE = 2.0
SILENCE = 2.5 * IDLE
TOTAL = 30
TAKEN_BEFORE = 10


def _relayed_run(relay_url: str, address: str, silence: Callable[[], None],
                 speak: Callable[[], None]) -> list[int]:
    """Send TOTAL messages through the relay, take some, fall silent, speak again, take the
    rest; the numbers received, in order (a number twice is a redelivery)."""
    producer = BlockingConnection(relay_url, timeout=60)
    sender = producer.create_sender(address)
    for n in range(TOTAL):
        sender.send(Message(id=n, body=n, durable=True))  # accepted once the upstream has it
    producer.close()
    consumer = BlockingConnection(relay_url, timeout=60)
    receiver = consumer.create_receiver(address, credit=5)
    got = []
    for _ in range(TAKEN_BEFORE):
        got.append(int(receiver.receive(timeout=30).id))
        receiver.accept()
    silence()
    time.sleep(SILENCE)  # the client is not pumped: well within the relay's own 60 s
    speak()
    deadline = time.monotonic() + 60
    while set(got) != set(range(TOTAL)) and time.monotonic() < deadline:
        try:
            message = receiver.receive(timeout=1)
        except Timeout:
            continue
        got.append(int(message.id))
        receiver.accept()
    consumer.close()
    return got


def _assert_nothing_lost(got: list[int], relay_log: str) -> None:
    assert set(got) == set(range(TOTAL)), f"lost: {sorted(set(range(TOTAL)) - set(got))}"
    assert "(upstream-idle-timeout): giving the connection up" in relay_log, relay_log
    assert relay_log.count(" open (offers") >= 2, "the relay did not reconnect"


def test_a_frozen_rabbitmq_is_given_up_and_reconnected_to(
        rabbit: Rabbit, relay_factory: RelayFactory) -> None:
    queue = rabbit.declare_durable_queue(f"idle_{uuid.uuid4().hex[:8]}")
    relay = relay_factory(rabbit.url, "--upstream-idle-timeout", str(IDLE))
    group = os.getpgid(rabbit.process.pid)
    got = _relayed_run(relay.address, queue, lambda: os.killpg(group, signal.SIGSTOP),
                       lambda: os.killpg(group, signal.SIGCONT))
    _assert_nothing_lost(got, relay.log())


# -- a partition: relay | router | upstream, in network namespaces ---------------------------


def _ip(*argv: str, namespace: str | None = None) -> None:
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    subprocess.run([*prefix, "ip", *argv], check=True, capture_output=True, timeout=30)


def _namespaces_unavailable() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    return None


class Partition:
    """The root namespace (the relay) -- a router namespace -- the upstream's namespace, two
    veth pairs; :meth:`cut` drops every packet at the router (blackhole routes: no ICMP, no
    RST), :meth:`restore` lets them through again."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 10000}"
        self.router, self.far = f"fxr{tag}", f"fxu{tag}"
        subnet = 100 + os.getpid() % 100
        self.near_ip, self.router_near = f"10.{subnet}.1.1", f"10.{subnet}.1.2"
        self.router_far, self.far_ip = f"10.{subnet}.2.1", f"10.{subnet}.2.2"
        self.veth = f"fxa{tag}"
        try:
            self._create(subnet, tag)
        except subprocess.CalledProcessError as exc:
            self.remove()
            pytest.skip(f"network namespaces could not be set up here: {exc.stderr!r}")

    def _create(self, subnet: int, tag: str) -> None:
        _ip("netns", "add", self.router)
        _ip("netns", "add", self.far)
        _ip("link", "add", self.veth, "type", "veth", "peer", "name", f"fxb{tag}")
        _ip("link", "set", f"fxb{tag}", "netns", self.router)
        _ip("link", "add", f"fxc{tag}", "type", "veth", "peer", "name", f"fxd{tag}")
        _ip("link", "set", f"fxc{tag}", "netns", self.router)
        _ip("link", "set", f"fxd{tag}", "netns", self.far)
        _ip("addr", "add", f"{self.near_ip}/24", "dev", self.veth)
        _ip("link", "set", self.veth, "up")
        _ip("route", "add", f"10.{subnet}.2.0/24", "via", self.router_near)
        for name, address in ((f"fxb{tag}", self.router_near), (f"fxc{tag}", self.router_far)):
            _ip("addr", "add", f"{address}/24", "dev", name, namespace=self.router)
            _ip("link", "set", name, "up", namespace=self.router)
        subprocess.run(["ip", "netns", "exec", self.router, "sh", "-c",
                        "echo 1 > /proc/sys/net/ipv4/ip_forward"], check=True, timeout=30)
        _ip("addr", "add", f"{self.far_ip}/24", "dev", f"fxd{tag}", namespace=self.far)
        _ip("link", "set", f"fxd{tag}", "up", namespace=self.far)
        _ip("link", "set", "lo", "up", namespace=self.far)
        _ip("route", "add", "default", "via", self.router_far, namespace=self.far)

    def cut(self) -> None:
        for address in (self.far_ip, self.near_ip):
            _ip("route", "add", "blackhole", f"{address}/32", namespace=self.router)

    def restore(self) -> None:
        for address in (self.far_ip, self.near_ip):
            _ip("route", "del", "blackhole", f"{address}/32", namespace=self.router)

    def remove(self) -> None:
        for argv in (["link", "del", self.veth], ["netns", "del", self.router],
                     ["netns", "del", self.far]):
            subprocess.run(["ip", *argv], capture_output=True, timeout=30, check=False)


@pytest.fixture
def partition() -> Iterator[Partition]:
    reason = _namespaces_unavailable()
    if reason is not None:
        pytest.skip(reason)
    made = Partition()
    try:
        yield made
    finally:
        made.remove()


def test_a_partition_from_the_upstream_is_detected_and_healed(
        partition: Partition, relay_factory: RelayFactory, tmp_path: Path) -> None:
    """The upstream is filtex-broker in its own namespace, with ``--idle-timeout`` as short as
    the relay's: when the path is cut each side gives the other up, and the upstream hands
    back what the relay's old connection held."""
    ready = tmp_path / "upstream.ready"
    log = (tmp_path / "upstream.log").open("w")
    upstream = subprocess.Popen(
        ["ip", "netns", "exec", partition.far, sys.executable, "-m", "filtex_broker", "--listen",
         f"{partition.far_ip}:5672", "--allow-anonymous", "--ready-file", str(ready),
         "--idle-timeout", str(IDLE)],
        cwd=ROOT, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert upstream.poll() is None and time.monotonic() < deadline, \
                (tmp_path / "upstream.log").read_text()
            time.sleep(0.05)  # waiting for the ready file
        relay = relay_factory(f"amqp://{partition.far_ip}:5672", "--upstream-idle-timeout",
                              str(IDLE))
        got = _relayed_run(relay.address, "orders", partition.cut, partition.restore)
        _assert_nothing_lost(got, relay.log())
        upstream_log = (tmp_path / "upstream.log").read_text()
        assert "(idle-timeout)" in upstream_log, upstream_log  # it gave the relay up too
    finally:
        upstream.send_signal(signal.SIGTERM)
        upstream.wait(30)
        log.close()
