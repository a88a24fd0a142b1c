"""Reading a broker's Prometheus metrics (``--metrics``) over HTTP, for the tests."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from .broker_clients import RunningBroker

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(broker: RunningBroker) -> Samples:
    metrics = broker.broker.metrics
    assert metrics is not None and metrics.address is not None
    host, port = metrics.address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=30) as response:
        assert response.status == 200
        text = response.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
