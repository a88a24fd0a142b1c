"""Helpers of the console tests: HTTP requests to the JSON API, and a broker with traffic."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proton.utils import BlockingConnection, BlockingReceiver

from filtex_broker.security.users import hash_password

from ..broker_clients import (
    BrokerFactory,
    RunningBroker,
    TopicOption,
    connect,
    message,
    send,
    sql,
    wait_for,
)

ADMIN = ("ops", "ops-pw")
VIEWER = ("viewer", "viewer-pw")

USERS = """
[users.ops]
password = "{ops}"
admin = true

[users.viewer]
password = "{viewer}"
receive = ["#"]
"""


def write_users(path: Path) -> Path:
    path.write_text(USERS.format(ops=hash_password(ADMIN[1]), viewer=hash_password(VIEWER[1])))
    return path


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: Any


def request(url: str, *, data: Any = None, auth: tuple[str, str] | None = None,
            context: ssl.SSLContext | None = None, headers: dict[str, str] | None = None,
            raw: bytes | None = None) -> Answer:
    """One HTTP request; the JSON answer (or text) and the status, errors included."""
    sent = dict(headers or {})
    body = raw
    if data is not None:
        body = json.dumps(data).encode()
        sent.setdefault("Content-Type", "application/json")
    if auth is not None:
        sent["Authorization"] = "Basic " + base64.b64encode(
            f"{auth[0]}:{auth[1]}".encode()).decode()
    req = urllib.request.Request(url, data=body, headers=sent,
                                 method="POST" if body is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as response:
            status, got, payload = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        status, got, payload = exc.code, dict(exc.headers), exc.read()
    try:
        return Answer(status, got, json.loads(payload))
    except ValueError:
        return Answer(status, got, payload.decode(errors="replace"))


def api(running: RunningBroker, path: str, **kwargs: Any) -> Any:
    """A successful API answer's JSON (asserts the 200)."""
    console = running.broker.console
    assert console is not None
    answer = request(console.url + path.lstrip("/"), **kwargs)
    assert answer.status == 200, (answer.status, answer.body)
    return answer.body


def node_of(overview: dict[str, Any], name: str) -> dict[str, Any]:
    return next(node for node in overview["nodes"] if node["name"] == name)


@dataclass
class Traffic:
    """A broker with a queue (two filtered consumers, one unfiltered browser) and a topic
    (a filtered subscriber), and the real Proton clients attached to it."""

    running: RunningBroker
    connection: BlockingConnection
    red: BlockingReceiver
    big: BlockingReceiver
    news: BlockingReceiver


def with_traffic(broker_factory: BrokerFactory, **config: Any) -> Traffic:
    """Start a broker with the console on, attach filtered consumers, send a few messages."""
    running = broker_factory(console="127.0.0.1:0", **config)
    connection = connect(running.url)
    red = connection.create_receiver("orders", name="red-orders",
                                     options=sql("color = 'red'", "colour"), credit=0)
    big = connection.create_receiver("orders", name="big-orders",
                                     options=sql("amount > 100", "size"), credit=0)
    news = connection.create_receiver("news", name="eu-news",
                                      options=[TopicOption(), sql("region = 'eu'", "region")])
    sender = connection.create_sender("orders")
    send(sender, message("m1", color="red", amount=5), message("m2", color="blue", amount=500),
         message("m3", color="green", amount=1))
    news_sender = connection.create_sender("news", options=TopicOption())
    send(news_sender, message("n1", region="eu"), message("n2", region="us"))
    wait_for(lambda: _depth(running, "news") == 1, "the eu subscriber's copy")
    return Traffic(running, connection, red, big, news)


def _depth(running: RunningBroker, name: str) -> int:
    node = running.broker.registry.nodes.get(name)
    return node.depth() if node is not None else -1
