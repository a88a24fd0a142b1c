"""Relay mode: how the relay's two connections reach the upstream broker.

* **Credentials**: with ``--upstream-user`` (and ``--upstream-password``) SASL PLAIN, else
  ANONYMOUS or PLAIN as the upstream offers.
* **Idle timeout**: ``--upstream-idle-timeout`` is declared (as half) in our open frame, and
  Proton gives the upstream up when it sends nothing for that long.
* **TLS**: an ``amqps://`` upstream is reached with ``--upstream-ca``,
  ``--upstream-cert``/``--upstream-key`` and host name verification
  (``--no-upstream-verify-hostname`` to switch it off).
* **Container ids**: ``<container-id>-relay`` for the consumers' connection,
  ``<container-id>-relay-producers`` for the producers'.
"""

from __future__ import annotations

from typing import Any

from proton import SSLDomain

from filtex_broker.settings import BrokerConfig

__all__ = ["connect_options", "upstream_ssl_domain"]


def connect_options(config: BrokerConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``container.connect`` keyword arguments of the consumers' and the producers'
    connections (raises ``SSLException`` for TLS settings Proton cannot use)."""
    options: dict[str, Any] = {"reconnect": False,
                               "container_id": f"{config.container_id}-relay"}
    if config.upstream_idle_timeout:
        # declared (as half) in our open frame; Proton gives the upstream up after it
        options["heartbeat"] = config.upstream_idle_timeout
    if config.upstream_user:
        options.update(user=config.upstream_user, password=config.upstream_password,
                       allowed_mechs="PLAIN", allow_insecure_mechs=True)
    else:
        options.update(allowed_mechs="ANONYMOUS PLAIN")
    if config.upstream.startswith("amqps://"):
        options["ssl_domain"] = upstream_ssl_domain(config)
    # a container-id of its own: ActiveMQ Classic takes it as the JMS client ID and
    # refuses a second connection with one already connected (amqp:invalid-field)
    producers = {**options, "container_id": f"{options['container_id']}-producers"}
    return options, producers


def upstream_ssl_domain(config: BrokerConfig) -> SSLDomain:
    """The client TLS settings for an amqps:// upstream (without --upstream-ca: the
    system's default trust store)."""
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    if config.upstream_ca:
        domain.set_trusted_ca_db(config.upstream_ca)
    if config.upstream_cert:
        domain.set_credentials(config.upstream_cert, config.upstream_key, None)
    domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME if config.upstream_verify_hostname
                                   else SSLDomain.VERIFY_PEER)
    return domain
