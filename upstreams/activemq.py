"""ActiveMQ Classic 5.18 from Maven Central as a private instance on a free loopback port.

The instance is the distribution's own ``conf/`` copied under a base directory of
its own (``activemq.base``, ``activemq.conf``, ``activemq.data``), with
ActiveMQ's defaults as a team runs them (KahaDB persistence, the ``ActiveMQ.DLQ``
dead-letter queue, queues and topics created on first use, anonymous access),
changed only where a test host needs it: one transport connector, AMQP, on a free
loopback port (no OpenWire, STOMP, MQTT or WebSocket listener on fixed ports) and
no Jetty web console. JMX stays in the process (``createConnector="false"``, no remote
agent).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from .maven import Distribution, unpacked
from .process import BrokerProcess, RunningBroker, free_port

__all__ = ["ACTIVEMQ", "DLQ", "ActiveMQ", "start_activemq"]

ACTIVEMQ = Distribution("org.apache.activemq", "apache-activemq", "5.18.3",
                        "apache-activemq-5.18.3")
DLQ = "ActiveMQ.DLQ"
"""The default dead-letter queue (``SharedDeadLetterStrategy``), for every destination."""
_CONNECTOR_OPTIONS = "maximumConnections=1000&amp;wireFormat.maxFrameSize=104857600"
"""The options of the distribution's own connectors (connection limit, 100 MB frames)."""


@dataclass
class ActiveMQ(RunningBroker):
    """A running instance: its AMQP port, its base directory, the process."""

    base: Path
    user: str | None = None
    """Anonymous access (no authentication plugin, as shipped): no user, no password."""
    password: str | None = None


def start_activemq(base: Path, *, queues: Sequence[str] = (), timeout: float = 120.0
                   ) -> ActiveMQ:
    """Make an instance under ``base`` with these ``queues`` declared (others are created on
    first use) and start it in the foreground; raises RuntimeError if it does not answer AMQP
    within ``timeout``."""
    home = unpacked(ACTIVEMQ)
    instance = base / "activemq"
    conf = instance / "conf"
    if not conf.exists():
        shutil.copytree(home / "conf", conf)
    for name in ("data", "tmp"):
        (instance / name).mkdir(parents=True, exist_ok=True)
    port = free_port()
    _amqp_only(conf / "activemq.xml", port, queues)
    process = BrokerProcess("ActiveMQ Classic", _command(home, instance), cwd=instance,
                            log=base / "activemq.log", port=port)
    process.start(timeout)
    return ActiveMQ(process, instance)


def _command(home: Path, instance: Path) -> list[str]:
    """What ``bin/activemq console`` runs for Java 17 with ``bin/env``'s defaults, as one
    ``java`` process: the script runs it as a child of ``sh -c``, where the parent-death
    signal would reach the shell only and leave the JVM behind; and without
    ``-Dcom.sun.management.jmxremote``, whose local agent listens on every interface."""
    conf, data = instance / "conf", instance / "data"
    opens = [f"--add-opens=java.base/{package}=ALL-UNNAMED" for package in (
        "java.security", "java.net", "java.lang", "java.util", "java.util.concurrent",
        "java.util.concurrent.atomic")]
    opens += ["--add-opens=java.naming/javax.naming.spi=ALL-UNNAMED",
              "--add-opens=java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED"]
    return ["java", "-Xms64M", "-Xmx1G", "-Djava.util.logging.config.file=logging.properties",
            f"-Djava.security.auth.login.config={conf / 'login.config'}",
            "-Djava.awt.headless=true", f"-Djava.io.tmpdir={instance / 'tmp'}",
            "--add-reads=java.xml=java.logging", *opens,
            f"-Dactivemq.classpath={conf}", f"-Dactivemq.home={home}",
            f"-Dactivemq.base={instance}", f"-Dactivemq.conf={conf}", f"-Dactivemq.data={data}",
            "-jar", str(home / "bin" / "activemq.jar"), "start"]


def _amqp_only(activemq_xml: Path, port: int, queues: Sequence[str]) -> None:
    """One transport connector, AMQP on ``port`` of the loopback interface, with the
    distribution's connector options; no ``jetty.xml`` (the web console, port 8161); these
    ``queues`` declared at start-up."""
    text = activemq_xml.read_text()
    if queues:
        declared = "".join(f'<queue physicalName="{escape(name, {chr(34): "&quot;"})}"/>'
                           for name in queues)
        text, count = re.subn(r"(<broker [^>]*>)", rf"\1\n        <destinations>{declared}"
                              "</destinations>", text, count=1)
        if count != 1:
            raise RuntimeError(f"{activemq_xml} has no broker element")
    connector = (f'<transportConnector name="amqp" '
                 f'uri="amqp://127.0.0.1:{port}?{_CONNECTOR_OPTIONS}"/>')
    text, count = re.subn(r"<transportConnectors>.*?</transportConnectors>",
                          f"<transportConnectors>\n            {connector}\n"
                          "        </transportConnectors>", text, flags=re.S)
    if count != 1:
        raise RuntimeError(f"{activemq_xml} has no transportConnectors section")
    text = re.sub(r'\s*<import resource="jetty.xml"/>', "", text)
    activemq_xml.write_text(text)
