"""filtex-broker: an AMQP 1.0 broker on python-qpid-proton that serves filtered links.

Filtering is entirely the plugin's (:mod:`filtex_proton.plugin`); this package
is the broker around it: listeners, nodes (queues, topics, browsers, dynamic
and dead-letter nodes), credit, settlement and shutdown. See docs/BROKER.md.
"""

from filtex_broker.config import BrokerConfig, load_config
from filtex_broker.server import Broker

__all__ = ["Broker", "BrokerConfig", "load_config"]
