"""Qpid Broker-J from Maven Central as a private instance on a free loopback port.

The broker's own defaults where they matter to a client: the distribution's ``Plain``
authentication provider with its ``guest`` user, a JSON virtual host node holding a
``BDB`` virtual host (Berkeley DB JE ships with the broker: messages and queues survive a
restart, nothing else to install), and the exchanges every virtual host has (``amq.direct``,
``amq.topic``, ``amq.fanout``, ``amq.match``). Broker-J's default virtual host creates no
queue on attach (an unknown address is refused with ``amqp:not-found``); a deployment
declares its queues, or names a pattern its applications may create queues under (a
``nodeAutoCreationPolicies`` entry): both are parameters here. Changed for a test host:
one AMQP port on a free loopback port, no HTTP port or management plugin (nothing on a
fixed port), the log on standard output, the work directory under the caller's base.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .maven import Distribution, unpacked
from .process import BrokerProcess, RunningBroker, free_port

__all__ = ["BROKER_J", "BrokerJ", "start_broker_j"]

BROKER_J = Distribution("org.apache.qpid", "apache-qpid-broker-j", "9.2.1", "qpid-broker/9.2.1")
USER = PASSWORD = "guest"
VIRTUAL_HOST = "default"
READY = "BRK-1004"
"""The log line saying the broker is ready: its AMQP port answers (and refuses connections
to the virtual host) before the virtual host is up."""


@dataclass
class BrokerJ(RunningBroker):
    """A running instance: its AMQP port, the credentials, the process."""

    work: Path
    user: str = USER
    password: str = PASSWORD


def start_broker_j(base: Path, *, queues: Sequence[str] = (), auto_create: str | None = None,
                   timeout: float = 120.0) -> BrokerJ:
    """Start an instance under ``base`` with these durable ``queues`` declared and, with
    ``auto_create`` (a Java regular expression), durable queues created on the first
    attach or publish to a matching address; raises RuntimeError if it cannot."""
    home = unpacked(BROKER_J)
    work = base / "work"
    work.mkdir(parents=True, exist_ok=True)
    config = base / "initial-config.json"
    config.write_text(json.dumps(_initial_config(queues, auto_create), indent=2))
    port = free_port()
    command = [str(home / "bin" / "qpid-server"), "--initial-config-path", str(config),
               "--config-property", f"qpid.amqp_port={port}"]
    process = BrokerProcess("Qpid Broker-J", command, cwd=base, log=base / "broker-j.log",
                            port=port, env={"QPID_WORK": str(work)},
                            ready_marker=READY)
    process.start(timeout)
    return BrokerJ(process, work)


def _initial_config(queues: Sequence[str], auto_create: str | None) -> dict[str, Any]:
    """The broker's configuration store on first start (later starts keep what it became)."""
    host: dict[str, Any] = {
        "type": "BDB",
        "queues": [{"name": name, "durable": True} for name in queues],
    }
    if auto_create is not None:
        host["nodeAutoCreationPolicies"] = [{
            "pattern": auto_create, "nodeType": "Queue", "attributes": {"durable": True},
            "createdOnPublish": True, "createdOnConsume": True}]
    operational = [("Root", "ROOT", "WARN"), ("Qpid", "org.apache.qpid.*", "INFO"),
                   ("Operational", "qpid.message.*", "INFO")]
    return {
        "name": "broker-j",
        "modelVersion": "8.0",
        "authenticationproviders": [{
            "name": "plain", "type": "Plain", "secureOnlyMechanisms": [],
            "users": [{"name": USER, "type": "managed", "password": PASSWORD}]}],
        "brokerloggers": [{
            "name": "console", "type": "Console",
            "brokerloginclusionrules": [{"name": name, "type": "NameAndLevel", "level": level,
                                         "loggerName": logger}
                                        for name, logger, level in operational]}],
        "ports": [{
            "name": "AMQP", "port": "${qpid.amqp_port}", "bindingAddress": "127.0.0.1",
            "authenticationProvider": "plain",
            "virtualhostaliases": [{"name": "nameAlias", "type": "nameAlias"},
                                   {"name": "defaultAlias", "type": "defaultAlias"},
                                   {"name": "hostnameAlias", "type": "hostnameAlias"}]}],
        "virtualhostnodes": [{
            "name": VIRTUAL_HOST, "type": "JSON", "defaultVirtualHostNode": "true",
            "virtualHostInitialConfiguration": json.dumps(host)}],
    }
