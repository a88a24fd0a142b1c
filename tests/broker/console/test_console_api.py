"""The console's JSON API without a browser: every endpoint, the reactor-thread reads, and
the security rules (docs/CONSOLE.md). Real brokers, real Proton clients, real HTTP."""

from __future__ import annotations

import os
import ssl
import threading
import time
from pathlib import Path

import pytest

from filtex_broker.config import ConfigError, load_config
from filtex_broker.server import Broker

from ..broker_clients import (
    BrokerFactory,
    TopicOption,
    bodies,
    connect,
    message,
    nothing_more,
    refusal_of,
    send,
    sql,
    wait_for,
)
from ..certs import Certs, make_certs
from .console_clients import (
    ADMIN,
    VIEWER,
    Traffic,
    api,
    node_of,
    request,
    with_traffic,
    write_users,
)

pytest.importorskip("aiohttp")


@pytest.fixture
def traffic(broker_factory: BrokerFactory) -> Traffic:
    return with_traffic(broker_factory)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    from ...tls_material import openssl_missing

    missing = openssl_missing()
    if missing is not None:
        pytest.skip(missing)
    return make_certs(tmp_path_factory.mktemp("console-certs"))


# -- the overview ------------------------------------------------------------------------


def test_overview_lists_nodes_links_filters_and_counters(traffic: Traffic) -> None:
    state = api(traffic.running, "/api/overview")
    orders = node_of(state, "orders")
    assert (orders["kind"], orders["depth"], orders["in"], orders["consumers"]) == (
        "queue", 3, 3, 2)
    assert orders["bytes"] > 0
    links = {link["name"]: link for link in orders["links"]}
    assert set(links) == {"red-orders", "big-orders"}
    assert links["red-orders"]["filtered"] is True
    assert links["red-orders"]["filters"] == [{"key": "colour", "type": "amqp:sql-filter",
                                               "normalised": "color = 'red'",
                                               "descriptor": "amqp:sql-filter"}]
    news = node_of(state, "news")
    assert news["kind"] == "topic"
    (subscriber,) = news["links"]
    assert (subscriber["role"], subscriber["filters"][0]["normalised"]) == (
        "subscription", "region = 'eu'")
    # the topic evaluated its subscriber's filter on both messages: one matched
    assert subscriber["counters"]["evaluated"] == 2
    assert subscriber["counters"]["matched"] == 1
    assert subscriber["counters"]["not_matched"] == 1
    assert news["filtered_out"] == 1
    assert state["broker"]["connections"] == 1
    assert state["upstream"] is None


def test_counters_follow_the_traffic(traffic: Traffic) -> None:
    traffic.red.flow(5)
    assert bodies(traffic.red, 1) == ["m1"]
    traffic.big.flow(5)
    assert bodies(traffic.big, 1) == ["m2"]
    assert nothing_more(traffic.connection, traffic.big)
    orders = node_of(api(traffic.running, "/api/overview"), "orders")
    links = {link["name"]: link for link in orders["links"]}
    assert links["red-orders"]["sent"] == 1
    assert links["red-orders"]["counters"]["matched"] == 1
    assert links["big-orders"]["counters"]["matched"] == 1
    assert links["big-orders"]["counters"]["not_matched"] >= 1  # m3 is too small
    assert orders["out"] == 2
    wait_for(lambda: node_of(api(traffic.running, "/api/overview"), "orders")["depth"] == 1,
             "m3 left alone: nobody matches it")


def test_refusals_are_listed_with_their_reasons(traffic: Traffic) -> None:
    connection = connect(traffic.running.url)
    refusal_of(connection, "orders", sql("color = ", "broken"), name="broken-link")
    state = api(traffic.running, "/api/overview")
    recent = state["refusals"]["recent"]
    assert recent[0]["link"] == "broken-link"
    assert "syntax error" in recent[0]["detail"]
    assert state["refusals"]["counts"]["amqp:sql-filter"] == 1
    connection.close()


# -- the peek and the tester -------------------------------------------------------------


def test_a_topic_peek_lists_each_message_once(traffic: Traffic) -> None:
    """Every subscription holds its own entry of a message, sharing its bytes: listed once."""
    second = traffic.connection.create_receiver("news", name="all-news", options=TopicOption(),
                                                credit=0)
    sender = traffic.connection.create_sender("news", name="news-again", options=TopicOption())
    send(sender, message("n3", region="eu"))
    wait_for(lambda: node_of(api(traffic.running, "/api/overview"), "news")["depth"] >= 2,
             "n3 held by both subscriptions")
    peeked = api(traffic.running, "/api/messages?node=news&limit=10&body=1")
    assert [m["message"]["body"] for m in peeked["messages"]].count(["n3"]) == 1
    second.close()


def test_messages_are_peeked_without_bodies_unless_asked(traffic: Traffic) -> None:
    peeked = api(traffic.running, "/api/messages?node=orders&limit=2")
    assert [m["position"] for m in peeked["messages"]] == [1, 2]  # the last two, oldest first
    assert all("body" not in m["message"] for m in peeked["messages"])
    assert peeked["messages"][0]["message"]["application-properties"]["color"] == "blue"
    with_body = api(traffic.running, "/api/messages?node=orders&limit=1&body=1")
    assert with_body["messages"][0]["message"]["body"] == ["m3"]
    # nothing was consumed or reordered: the consumers still get them, in order
    traffic.red.flow(5)
    assert bodies(traffic.red, 1) == ["m1"]
    assert nothing_more(traffic.connection, traffic.red)  # (and the accept goes out)
    wait_for(lambda: node_of(api(traffic.running, "/api/overview"), "orders")["depth"] == 2,
             "m1 accepted, the two others still held")


def test_the_tester_checks_normalises_and_evaluates(traffic: Traffic) -> None:
    answer = api(traffic.running, "/api/test", data={
        "text": "color IN ('red', 'green') and amount < 10", "kind": "sql", "node": "orders",
        "limit": 10})
    assert answer["check"]["valid"] is True
    assert answer["check"]["filters"][0]["normalised"] == (
        "(color IN ('red', 'green')) AND (amount < 10)")
    assert answer["pushdown"]["selector"] is not None
    assert "spark" in answer["spark"]
    results = [(m["message"]["application-properties"]["color"], m["result"])
               for m in answer["messages"]]
    assert results == [("red", "TRUE"), ("blue", "FALSE"), ("green", "TRUE")]
    null = api(traffic.running, "/api/test", data={"text": "missing > 1", "node": "orders"})
    assert {m["result"] for m in null["messages"]} == {"NULL"}
    assert "NULL" in null["messages"][0]["reason"]


def test_the_tester_shows_where_a_filter_is_wrong(traffic: Traffic) -> None:
    answer = api(traffic.running, "/api/test", data={"text": "color = 'red' AND", "kind": "sql"})
    error = answer["check"]["error"]
    assert answer["check"]["valid"] is False
    assert (error["line"], error["column"]) == (1, 18)
    assert "^" in error["message"]
    assert answer["messages"] is None


def test_the_tester_takes_jms_selectors_and_typed_json_sets(traffic: Traffic) -> None:
    jms = api(traffic.running, "/api/test", data={"text": "JMSPriority > 3", "kind": "jms"})
    assert jms["check"]["filters"][0]["type"] == "apache.org:selector-filter:string"
    typed = api(traffic.running, "/api/test", data={
        "kind": "json", "node": "orders",
        "text": '{"p": {"descriptor": "amqp:application-properties-filter", '
                '"value": {"color": "blue"}}}'})
    assert typed["check"]["filters"][0]["type"] == "amqp:application-properties-filter"
    assert [m["result"] for m in typed["messages"]] == ["FALSE", "TRUE", "FALSE"]


def test_bad_requests_get_clear_errors(traffic: Traffic) -> None:
    url = traffic.running.broker.console.url  # type: ignore[union-attr]
    assert request(url + "api/test", data={"text": ""}).status == 400
    assert request(url + "api/test", data={"text": "a = 1", "kind": "xml"}).status == 400
    assert request(url + "api/test", data={"text": "a = 1", "limit": 10_000}).status == 400
    missing = request(url + "api/test", data={"text": "a = 1", "node": "nowhere"})
    assert (missing.status, missing.body["error"]) == (404, "no node 'nowhere'")
    form = request(url + "api/test", raw=b"text=a", headers={
        "Content-Type": "application/x-www-form-urlencoded"})
    assert form.status == 415
    assert request(url + "api/messages?node=nowhere").status == 404
    assert request(url + "api/messages").status == 400
    assert request(url + "static/../server.py").status == 404
    # the broker keeps serving after all that
    assert node_of(api(traffic.running, "/api/overview"), "orders")["depth"] == 3


def test_the_page_and_its_script_are_served(traffic: Traffic) -> None:
    url = traffic.running.broker.console.url  # type: ignore[union-attr]
    page = request(url)
    assert page.status == 200 and "/static/console.js" in page.body
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    script = request(url + "static/console.js")
    assert script.status == 200 and "/api/overview" in script.body


def test_the_open_console_answers_loopback_names_only(traffic: Traffic) -> None:
    url = traffic.running.broker.console.url  # type: ignore[union-attr]
    rebound = request(url + "api/overview", headers={"Host": "evil.example:80"})
    assert rebound.status == 403


# -- the reactor thread -------------------------------------------------------------------


def test_reads_run_on_the_reactor_thread(traffic: Traffic) -> None:
    broker = traffic.running.broker
    assert broker.call_on_reactor(lambda: threading.current_thread().name) == "filtex-broker"
    with pytest.raises(ZeroDivisionError):
        broker.call_on_reactor(lambda: 1 // 0)
    assert broker.call_on_reactor(lambda: 7) == 7  # the reactor survived the error


def test_calls_fail_once_the_broker_stopped(broker_factory: BrokerFactory) -> None:
    running = broker_factory()
    running.broker.stop()
    running.thread.join(30)
    with pytest.raises(RuntimeError, match="stopped"):
        running.broker.call_on_reactor(lambda: 1, timeout=5)


# -- relay mode ----------------------------------------------------------------------------


def test_relay_mode_shows_the_upstream_and_what_was_pushed_down(
        broker_factory: BrokerFactory) -> None:
    upstream = broker_factory()
    relay = broker_factory(upstream=f"amqp://{upstream.url}", console="127.0.0.1:0",
                           upstream_selector="always")
    connection = connect(relay.url)
    connection.create_receiver("orders", name="relayed", options=sql("color = 'red'"), credit=10)

    def shown() -> bool:
        state = api(relay, "/api/overview")
        return bool(state["upstream"]["connected"] and state["nodes"])

    wait_for(shown, "the relay's upstream and link in the overview")
    state = api(relay, "/api/overview")
    assert state["upstream"]["product"] is not None
    (node,) = state["nodes"]
    (link,) = node["links"]
    assert (node["name"], link["name"], link["filtered"]) == ("orders", "relayed", True)
    assert state["upstream"]["pushdown"] is True
    assert link["pushed_down"] == "color = 'red'"
    assert state["upstream"]["product"] == "filtex-broker"
    assert link["received"] == 0

    # the upstream applies the pushed selector: only the red message reaches the relay's link
    send(connect(upstream.url).create_sender("orders"), *(message(color=color) for color in
                                                           ("blue", "red", "green")))
    wait_for(lambda: api(relay, "/api/overview")["nodes"][0]["links"][0]["received"] == 1,
             "the relay's link received the red message")
    connection.close()


# -- security ------------------------------------------------------------------------------


def test_beyond_loopback_without_tls_and_users_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"beyond loopback.*--tls-cert, --tls-key, --users"):
        load_config(["--console", "0.0.0.0:0"], env={})
    with pytest.raises(ConfigError, match="beyond loopback"):
        load_config([], env={"FILTEX_CONSOLE": "0.0.0.0:8443"})
    toml = tmp_path / "broker.toml"
    toml.write_text('[broker]\nconsole = "0.0.0.0:8443"\n')
    with pytest.raises(ConfigError, match="beyond loopback"):
        load_config(["--config", str(toml)], env={})
    assert load_config(["--console", "127.0.0.1:0"], env={}).console == "127.0.0.1:0"


def test_a_users_file_without_an_admin_refuses_to_start(tmp_path: Path, certs: Certs) -> None:
    users = tmp_path / "users.toml"
    users.write_text("[users.app]\nreceive = ['#']\n")
    with pytest.raises(ConfigError, match="no admin user"):
        load_config(["--console", "0.0.0.0:0", "--tls-cert", str(certs.server.cert),
                     "--tls-key", str(certs.server.key), "--users", str(users),
                     "--allow-anonymous"], env={})


@pytest.fixture
def secured(broker_factory: BrokerFactory, tmp_path: Path,
            certs: Certs) -> tuple[str, ssl.SSLContext]:
    users = write_users(tmp_path / "users.toml")
    config = load_config(["--console", "127.0.0.1:0", "--tls-cert", str(certs.server.cert),
                          "--tls-key", str(certs.server.key), "--users", str(users)], env={})
    running = broker_factory(console=config.console, tls_cert=config.tls_cert,
                             tls_key=config.tls_key, users=config.users)
    console = running.broker.console
    assert console is not None and console.secured
    context = ssl.create_default_context(cafile=str(certs.ca))
    return console.url, context


def test_tls_and_an_admin_user_get_in(secured: tuple[str, ssl.SSLContext]) -> None:
    url, context = secured
    assert url.startswith("https://")
    answer = request(url + "api/overview", auth=ADMIN, context=context)
    assert answer.status == 200 and "nodes" in answer.body
    again = request(url + "api/overview", auth=ADMIN, context=context)  # remembered
    assert again.status == 200


def test_no_or_wrong_credentials_get_401(secured: tuple[str, ssl.SSLContext]) -> None:
    url, context = secured
    missing = request(url + "api/overview", context=context)
    assert missing.status == 401
    assert missing.headers["WWW-Authenticate"].startswith("Basic")
    assert request(url + "api/overview", auth=(ADMIN[0], "wrong"), context=context).status == 401
    assert request(url + "api/overview", auth=("nobody", "x"), context=context).status == 401
    assert request(url, context=context).status == 401  # the page too


def test_a_user_who_is_not_admin_gets_403(secured: tuple[str, ssl.SSLContext]) -> None:
    url, context = secured
    answer = request(url + "api/overview", auth=VIEWER, context=context)
    assert answer.status == 403
    assert "not an admin" in answer.body["error"]


def test_plain_http_to_the_tls_console_gets_nothing(
        secured: tuple[str, ssl.SSLContext]) -> None:
    url, _ = secured
    with pytest.raises(OSError):
        request(url.replace("https://", "http://") + "api/overview")


def test_the_console_changes_nothing(traffic: Traffic) -> None:
    broker: Broker = traffic.running.broker
    before = broker.call_on_reactor(lambda: [(e.pos, e.owner) for e in
                                             broker.registry.nodes["orders"].entries()])
    for _ in range(3):
        api(traffic.running, "/api/overview")
        api(traffic.running, "/api/messages?node=orders&limit=50&body=1")
        api(traffic.running, "/api/test", data={"text": "color = 'red'", "node": "orders"})
    after = broker.call_on_reactor(lambda: [(e.pos, e.owner) for e in
                                            broker.registry.nodes["orders"].entries()])
    assert after == before
    links = node_of(api(traffic.running, "/api/overview"), "orders")["links"]
    assert all(link["counters"]["evaluated"] == 0 for link in links)  # no credit yet


def test_with_metrics_too_the_in_counts_are_shared(broker_factory: BrokerFactory) -> None:
    pytest.importorskip("prometheus_client")
    traffic = with_traffic(broker_factory, metrics="127.0.0.1:0")
    broker = traffic.running.broker
    assert broker.metrics is not None and broker.messages_in is broker.metrics.messages_in
    assert node_of(api(traffic.running, "/api/overview"), "orders")["in"] == 3


def test_a_changed_users_file_applies_without_a_restart(
        secured: tuple[str, ssl.SSLContext], tmp_path: Path) -> None:
    url, context = secured
    users = tmp_path / "users.toml"
    assert request(url + "api/overview", auth=VIEWER, context=context).status == 403
    users.write_text(users.read_text().replace('receive = ["#"]', 'receive = ["#"]\nadmin = true'))
    os.utime(users, (time.time() + 5, time.time() + 5))  # a new mtime, whatever the clock
    assert request(url + "api/overview", auth=VIEWER, context=context).status == 200


def test_browser_tests_say_why_they_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    from .. import browser

    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    reason = browser.chromium_missing()
    assert reason is not None and "Chromium is not installed" in reason


def test_the_history_has_rates_depth_and_memory_from_the_first_request(
        broker_factory: BrokerFactory) -> None:
    """Sampled whether or not a page is open: a page opened later draws what came before."""
    traffic = with_traffic(broker_factory, console_sample_interval=0.2)
    running = traffic.running
    wait_for(lambda: len(api(running, "/api/history")["times"]) >= 2, "two samples")
    sender = traffic.connection.create_sender("charted")
    send(sender, *(message(f"c{i}", amount=i) for i in range(7)))
    overview = api(running, "/api/overview")
    wait_for(lambda: api(running, "/api/history")["times"][-1] > overview["time"],
             "a sample after the sends")
    history = api(running, "/api/history")
    assert history["interval"] == 0.2 and history["span"] == pytest.approx(900.0)
    times, charted = history["times"], history["nodes"]["charted"]
    assert all(len(column) == len(times) for column in charted.values())
    stored = sum(rate * (times[i] - times[i - 1])
                 for i, rate in enumerate(charted["in"]) if rate is not None)
    assert stored == pytest.approx(7, abs=0.05)  # every message, once, in some interval
    assert charted["depth"][-1] == 7
    assert history["memory"]["limit"] == overview["broker"]["memory"]["limit"] > 0
    assert history["memory"]["used"][-1] == overview["broker"]["memory"]["used"] > 0
    filtered = {link["id"] for node in overview["nodes"] for link in node["links"]
                if link["filtered"]}
    assert set(history["links"]) == filtered and len(filtered) == 3


def test_an_unusable_sample_interval_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"console_sample_interval must be from 0\.1 to 60"):
        load_config(["--console", "127.0.0.1:0", "--console-sample-interval", "0"])


def test_a_request_in_flight_does_not_hold_the_brokers_stop(
        broker_factory: BrokerFactory) -> None:
    """A browser in the middle of a request when the broker stops (its POST body not all
    sent): the console's thread ends with the broker instead of being left behind."""
    import socket

    running = broker_factory(console="127.0.0.1:0")
    console = running.broker.console
    assert console is not None and console.address is not None
    host, port = console.address
    with socket.create_connection((host, port), timeout=10) as browser:
        browser.sendall(b"POST /api/test HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        time.sleep(0.2)  # the request has reached its handler
        thread = console._thread  # what is at stake: the thread left running
        assert thread is not None
        running.broker.stop()
        running.thread.join(60)
        assert not thread.is_alive(), "the console's thread outlived the broker"
