"""ActiveMQ Artemis from Maven Central as a private instance on a free loopback port.

The instance is made by ``artemis create`` with the distribution's defaults (what a
team that runs Artemis has: auto-created addresses and queues, the ``DLQ`` and
``ExpiryQueue`` addresses, a NIO journal), changed only where a test host needs it:
one AMQP acceptor on a free loopback port and no web console.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .maven import Distribution, unpacked
from .process import BrokerProcess, RunningBroker, free_port

__all__ = ["ARTEMIS", "Artemis", "start_artemis"]

ARTEMIS = Distribution("org.apache.activemq", "apache-artemis", "2.40.0",
                       "apache-artemis-2.40.0")
USER = PASSWORD = "artemis"


@dataclass
class Artemis(RunningBroker):
    """A running instance: its AMQP port, the credentials, the process."""

    instance: Path
    user: str = USER
    password: str = PASSWORD


def start_artemis(base: Path, *, queues: Sequence[str] = (), timeout: float = 120.0
                  ) -> Artemis:
    """Create an instance under ``base`` (anonymous allowed, user ``artemis``) with these anycast
    ``queues`` declared, and start it; raises RuntimeError if it cannot."""
    home = unpacked(ARTEMIS)
    instance = base / "artemis"
    command = [str(home / "bin" / "artemis"), "create", str(instance), "--user", USER,
               "--password", PASSWORD, "--allow-anonymous", "--silent", "--no-web", "--nio",
               "--no-autotune", "--host", "127.0.0.1", "--force"]
    if queues:
        command += ["--queues", ",".join(f"{name}:anycast" for name in queues)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"artemis create failed: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    port = free_port()
    _one_amqp_acceptor(instance / "etc" / "broker.xml", port)
    process = BrokerProcess("ActiveMQ Artemis", [str(instance / "bin" / "artemis"), "run"],
                            cwd=instance, log=base / "artemis.log", port=port)
    process.start(timeout)
    return Artemis(process, instance)


def _one_amqp_acceptor(broker_xml: Path, port: int) -> None:
    """Replace the acceptors (CORE, AMQP, STOMP, MQTT... on fixed ports) by the AMQP one,
    with its default parameters, on ``port`` of the loopback interface."""
    text = broker_xml.read_text()
    amqp = re.search(r'<acceptor name="amqp">tcp://[^:<]+:\d+\?([^<]*)</acceptor>', text)
    if amqp is None:
        raise RuntimeError(f"{broker_xml} has no amqp acceptor to start from")
    acceptor = f'<acceptor name="amqp">tcp://127.0.0.1:{port}?{amqp.group(1)}</acceptor>'
    text, count = re.subn(r"<acceptors>.*?</acceptors>",
                          f"<acceptors>\n         {acceptor}\n      </acceptors>", text,
                          flags=re.S)
    if count != 1:
        raise RuntimeError(f"{broker_xml} has no acceptors section")
    broker_xml.write_text(text)
