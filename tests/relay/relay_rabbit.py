"""The relay tests' RabbitMQ node: ``bench/rabbit_node.py``, shared with ``bench/bench_relay.py``
(kept there so that the benchmark does not import the tests)."""

from __future__ import annotations

from bench.rabbit_node import Rabbit, free_port, rabbit_available, start_rabbit

__all__ = ["Rabbit", "free_port", "rabbit_available", "start_rabbit"]
