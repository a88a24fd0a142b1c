"""Prometheus metrics (``--metrics``): scraped over HTTP after real AMQP traffic."""

from __future__ import annotations

import os
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from filtex_broker.config import BrokerConfig, ConfigError, load_config
from filtex_broker.server import Broker
from filtex_proton.amqp.message import encode_message

from .broker_clients import (
    POISON,
    BrokerFactory,
    RunningBroker,
    bodies,
    connect,
    failing_filters,
    message,
    nothing_more,
    raw_receiver,
    refusal_of,
    send,
    send_raw,
    sql,
    wait_received,
)
from .metrics_clients import scrape, value


def poisoned() -> bytes:
    """A well-formed message on which every SQL filter fails (:func:`failing_filters`)."""
    return encode_message(application_properties={"k": 0, POISON: True})


@pytest.fixture
def metered(broker_factory: BrokerFactory) -> RunningBroker:
    return broker_factory(metrics="127.0.0.1:0")


def test_traffic_filters_refusals_and_depths_are_counted(
    metered: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing_filters(monkeypatch)
    conn = connect(metered.url)
    low = conn.create_receiver("q", credit=100, options=sql("k < 5"), name="low")
    sender = conn.create_sender("q")
    send(sender, *(message(f"m{k}", k=k) for k in range(10)))
    send_raw(conn, sender, poisoned())
    assert bodies(low, 5) == [f"m{k}" for k in range(5)]
    assert nothing_more(conn, low)
    rest, handler = raw_receiver(conn, "q", name="rest")  # accepts what it gets, as bytes
    assert len(wait_received(conn, handler, 6, flow=100, link=rest.link)) == 6
    assert nothing_more(conn, rest)  # a round trip: the broker has had every accept
    held = conn.create_sender("held")
    send(held, message(1), message(2), message(3))
    refusal_of(conn, "q", sql("k = = 1"), name="bad-sql")
    refusal_of(conn, None, name="no-such-subscription")

    samples = scrape(metered)
    assert value(samples, "filtex_messages_in_total", node="q") == 11
    assert value(samples, "filtex_messages_in_total", node="held") == 3
    assert value(samples, "filtex_messages_out_total", node="q") == 11
    assert value(samples, "filtex_messages_filtered_out_total", node="q") == 6  # 5 + the poison
    assert value(samples, "filtex_evaluation_errors_total", node="q") == 1
    assert value(samples, "filtex_induced_evaluation_errors_total") == 1
    assert value(samples, "filtex_consumer_links", filter_type="amqp:sql-filter") == 1
    assert value(samples, "filtex_consumer_links", filter_type="none") == 1
    assert value(samples, "filtex_link_refusals_total", reason="amqp:sql-filter") == 1
    assert value(samples, "filtex_link_refusals_total", reason="amqp:not-found") == 1
    assert value(samples, "filtex_node_depth", kind="queue", node="held") == 3
    assert value(samples, "filtex_node_depth", kind="queue", node="q") == 0
    assert value(samples, "filtex_connections") == 1

    # Counters never go down: a detached link's counts stay with its node.
    low.close()
    after = scrape(metered)
    assert value(after, "filtex_messages_filtered_out_total", node="q") == 6
    assert value(after, "filtex_messages_out_total", node="q") == 11
    assert value(after, "filtex_consumer_links", filter_type="amqp:sql-filter") == 0
    conn.close()


def test_the_evaluation_latency_is_sampled(metered: RunningBroker) -> None:
    conn = connect(metered.url)
    receiver = conn.create_receiver("q", credit=200, options=sql("k >= 0"))
    sender = conn.create_sender("q")
    send(sender, *(message(k, k=k) for k in range(128)))
    assert len(bodies(receiver, 128)) == 128
    samples = scrape(metered)
    assert value(samples, "filtex_evaluation_seconds_count") == 2  # 1 in 64
    assert 0 < value(samples, "filtex_evaluation_seconds_sum") < 10
    assert value(samples, "filtex_evaluation_seconds_bucket", le="+Inf") == 2
    conn.close()


def test_topic_subscriptions_are_counted_per_topic(metered: RunningBroker) -> None:
    from .broker_clients import TopicOption

    conn = connect(metered.url)
    red = conn.create_receiver("news", credit=10, options=[TopicOption(), sql("c = 'red'")],
                               name="red")
    sender = conn.create_sender("news", options=TopicOption())
    send(sender, message("r", c="red"), message("b", c="blue"))
    assert bodies(red, 1) == ["r"]
    samples = scrape(metered)
    assert value(samples, "filtex_messages_in_total", node="news") == 2
    assert value(samples, "filtex_messages_out_total", node="news") == 1
    assert value(samples, "filtex_messages_filtered_out_total", node="news") == 1
    conn.close()


def test_deleted_dynamic_nodes_fold_into_one_series(metered: RunningBroker) -> None:
    """A temporary queue per request must not grow /metrics: a dynamic node's counts move to
    ``node="dynamic/*"`` when it is deleted, and the totals never go down."""
    conn = connect(metered.url)
    names = []
    for round_trip in range(3):
        reply = conn.create_receiver(None, dynamic=True, credit=10, name=f"reply-{round_trip}")
        address = reply.link.remote_source.address
        names.append(address)
        sender = conn.create_sender(address)
        send(sender, message(f"r{round_trip}"), message("x"))
        assert bodies(reply, 2) == [f"r{round_trip}", "x"]
        live = scrape(metered)
        assert value(live, "filtex_messages_in_total", node=address) == 2
        assert value(live, "filtex_messages_in_total", node="dynamic/*") == 2 * round_trip
        sender.close()
        reply.close()
    samples = scrape(metered)
    assert value(samples, "filtex_messages_in_total", node="dynamic/*") == 6
    assert value(samples, "filtex_messages_out_total", node="dynamic/*") == 6
    named = {dict(labels).get("node") for _, labels in samples}
    assert not named & set(names), "a deleted dynamic node still has series of its own"
    conn.close()


def test_the_endpoint_stops_with_the_broker(broker_factory: BrokerFactory) -> None:
    running = broker_factory(metrics="127.0.0.1:0")
    assert scrape(running)  # serving
    metrics = running.broker.metrics
    assert metrics is not None and metrics.address is not None
    host, port = metrics.address
    running.broker.stop()
    running.thread.join(60)
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5)


def test_two_brokers_in_one_process_have_their_own_registries(
    broker_factory: BrokerFactory,
) -> None:
    one, two = broker_factory(metrics="127.0.0.1:0"), broker_factory(metrics="127.0.0.1:0")
    conn = connect(one.url)
    send(conn.create_sender("q"), message(1))
    assert value(scrape(one), "filtex_messages_in_total", node="q") == 1
    assert value(scrape(two), "filtex_messages_in_total", node="q") == 0
    conn.close()


def test_archive_counters_are_exposed(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    running = broker_factory(metrics="127.0.0.1:0", archive=str(tmp_path))
    assert "filtex_archive_offered_total" not in {name for name, _ in scrape(
        broker_factory(metrics="127.0.0.1:0"))}  # no archive, no archive metrics
    conn = connect(running.url)
    sender = conn.create_sender("q")
    for i in range(5):
        send(sender, message(i))
    conn.close()
    archive = running.broker.archive
    assert archive is not None
    deadline = time.monotonic() + 60
    while archive.stats.appended < 5:
        assert time.monotonic() < deadline, "the archive writer did not append"
        time.sleep(0.02)
    os.kill(archive.writer_pid, signal.SIGKILL)
    while archive.stats.restarts < 1:
        assert time.monotonic() < deadline, "the archive writer was not restarted"
        time.sleep(0.02)
    samples = scrape(running)
    assert value(samples, "filtex_archive_offered_total") == 5
    assert value(samples, "filtex_archive_appended_total") == 5
    assert value(samples, "filtex_archive_writer_restarts_total") == 1
    assert value(samples, "filtex_archive_pending_bytes") == 0
    for name in ("errors", "dropped", "stalls"):
        assert (f"filtex_archive_{name}_total", ()) in samples


def test_metrics_are_off_by_default_and_checked_when_on() -> None:
    assert Broker(BrokerConfig(listen=(("127.0.0.1", 0),))).metrics is None
    with pytest.raises(ConfigError, match="listen address"):
        load_config(["--metrics", "nowhere"], env={})
    assert load_config(["--metrics", "127.0.0.1:9108"], env={}).metrics == "127.0.0.1:9108"


def test_a_metrics_address_in_use_fails_the_start() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = Broker(BrokerConfig(listen=(("127.0.0.1", 0),), metrics=f"127.0.0.1:{port}"))
        with pytest.raises(RuntimeError, match="failed to start"):
            broker.start_in_thread()
    assert isinstance(broker.error, OSError)
