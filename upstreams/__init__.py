"""Real brokers to put the relay in front of, on this machine, without Docker.

Each comes from the registry its project publishes to (ActiveMQ Artemis, Qpid
Broker-J and ActiveMQ Classic from Maven Central; RabbitMQ from Debian, see
``bench/rabbit_node.py``) and runs as an ordinary child process under a directory of
its own, on free loopback ports. Used by the integration tests, and by
``python -m upstreams`` (the README's "relay in front of Artemis" without Docker).
Not part of the installed product.
"""
