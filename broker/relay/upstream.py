"""Relay mode: nodes live on an upstream broker; this broker adds the filters.

With ``--upstream amqp://host:port`` the broker keeps no nodes of its own.

* A downstream **receiver** (a link the broker sends on) is first accepted or
  refused by the plugin (refusals stay local, the upstream never hears of
  them: :mod:`filtex_broker.relay.attach`); then an upstream receiver is opened on the
  same address. Messages
  taken from the upstream are matched against the link's filter: matches go
  downstream, and the upstream delivery is settled with the downstream
  consumer's outcome only when that outcome arrives (accepted, rejected,
  released; ``modified`` goes upstream as ``modified`` with its fields where the
  upstream honours it, else as ``released``, because RabbitMQ ends the session on
  ``modified``, or held like a non-match if undeliverable-here). A relay crash
  therefore loses nothing: the upstream still holds every unsettled message
  (at-least-once).
* Non-matching messages on a **queue** are not consumed. Where the upstream
  honours ``modified`` with undeliverable-here (``upstream_non_match``; ``auto``
  asks :mod:`filtex_broker.relay.brokers`), they are settled so at once: the upstream
  offers them to its other consumers and never again to this link. Elsewhere they
  are held, unsettled, while the link lives (at most ``upstream_held`` per link; then the
  link takes no more from the upstream until it detaches) and released when it
  detaches. Releasing them at once would loop on RabbitMQ (a released message is
  redelivered at once to any link with credit, the releasing one included) and
  ``modified`` with undeliverable-here ends RabbitMQ's session. On a **topic**
  (source capability ``topic``) a subscriber's non-matches are simply accepted
  upstream (skipped): the subscription's copy is for this link alone. RabbitMQ's ``/topic/``
  and ``/exchange/`` addresses are treated as topics too.
* A **browser** (distribution-mode ``copy``) reads through an upstream link
  asking for ``copy``; its upstream deliveries are settled without an outcome.
  A **dynamic** source or target is answered with the upstream's dynamic node (closed
  with ``amqp:resource-deleted`` if the upstream connection goes, as the node
  does). Browse and dynamic links get no upstream credit until the upstream's
  attach grants what they asked; upstreams known not to do either
  (:mod:`filtex_broker.relay.brokers`: RabbitMQ echoes ``copy`` and consumes) are
  refused with ``amqp:not-implemented``, and so is a dynamic attach the upstream does not
  answer in time (:mod:`filtex_broker.relay.deadlines`).
* A downstream **sender**'s messages are forwarded, as the bytes that arrived
  plus one message annotation naming the relay connection (for no-local on the
  way back: :mod:`filtex_broker.relay.origin`), to an upstream sender on the same
  address (an anonymous one, for a producer without a target address, if the
  upstream offers ``ANONYMOUS-RELAY``); the downstream delivery is settled
  with the upstream's outcome. The downstream credit mirrors the upstream's.
* **Reaching the upstream** (credentials, TLS, the idle timeout):
  :mod:`filtex_broker.relay.connect`.
* **Pushdown**: when selectors are pushed (``upstream_selector`` ``always``, or
  ``auto`` and the upstream offers ``APACHE.ORG:SELECTOR`` or names a product
  known to evaluate selectors: :mod:`filtex_broker.relay.brokers`), the part of the
  downstream filter set that a JMS selector expresses (:mod:`filtex_proton.pushdown`:
  a client's own JMS selector as it is, plus the translatable SQL, property, group
  and constant filters) is put on the upstream source; the whole filter set is
  still evaluated here, and the selector is implied by it, so this is exact
  whatever the upstream does. An upstream whose parser refuses the selector
  (``amqp:invalid-field`` before the link took anything) gets the link again without it.
* **Connections**: consumers and producers use two upstream connections (RabbitMQ reads
  a connection in one process: a consumer's flow would queue behind the producers'
  transfers), which open, fail and reconnect together.
* **Reconnect**: when the upstream connection goes away the downstream links
  stay attached; the relay reconnects with exponential backoff (0.2 s to 5 s)
  and re-opens every upstream link. Deliveries in flight are redelivered by the
  upstream (duplicates possible, never losses); downstream outcomes for
  deliveries of the lost connection are settled locally only. The upstream ending a session
  a link uses (RabbitMQ ends them all before it drops its connections) counts as a loss.
* **Sessions**: each consumer's upstream link has a session of its own, ended when the link
  detaches; where the upstream may mix up a new session with one being ended, new consumer
  sessions wait for those ends (:mod:`filtex_broker.relay.session_ends`).

This module holds the two connections' lifecycle, the answers to their events, and the
opening of each link's upstream side.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from proton import (
    Condition,
    Connection,
    Endpoint,
    Handler,
    Link,
    Receiver,
    Sender,
    Session,
    SSLException,
)

from filtex_broker.client import ClientConnection, is_idle_timeout
from filtex_broker.loop.engine import impl
from filtex_broker.nodes.registry import Registry
from filtex_broker.relay.attach import relay_consumer, relay_producer
from filtex_broker.relay.brokers import (
    KnownBroker,
    decide_non_match,
    decide_pushdown,
    identify,
    topic_address,
)
from filtex_broker.relay.common import (
    ANONYMOUS_RELAY,
    BACKOFF_MAX,
    BACKOFF_MIN,
    INVALID_FIELD,
    NOT_IMPLEMENTED,
    UpstreamSide,
)
from filtex_broker.relay.connect import connect_options
from filtex_broker.relay.consumers import RelayConsumer
from filtex_broker.relay.deadlines import AttachDeadlines
from filtex_broker.relay.link_names import UpstreamLinkNames
from filtex_broker.relay.origin import OriginStamp
from filtex_broker.relay.producers import RelayProducer
from filtex_broker.relay.session_ends import SessionEnds
from filtex_broker.relay.sharing import QueueSharing
from filtex_broker.settings import BrokerConfig
from filtex_broker.terminus import TerminusRequest
from filtex_proton.plugin import (
    DecodeError,
    FilterMessage,
    FiltexPlugin,
)

if TYPE_CHECKING:

    from proton import Event

    from filtex_broker.loop.fast import FastContainer

__all__ = ["RelayLink", "Upstream"]

log = logging.getLogger("filtex.broker.relay")

RelayLink = RelayConsumer | RelayProducer


class Upstream(Handler):
    """The connections to the upstream broker (consumers', producers'), with their reconnect
    loop."""

    def __init__(self, config: BrokerConfig, plugin: FiltexPlugin) -> None:
        super().__init__()
        self.config = config
        self.plugin = plugin
        self.container: FastContainer | None = None
        self.connection: Connection | None = None
        """The consumers' connection (each consumer link in a session of its own)."""
        self.producer_connection: Connection | None = None
        """The producers' connection: RabbitMQ reads a connection's frames in one process,
        where a consumer's flow and outcomes would queue behind the producers' transfers."""
        self.session: Session | None = None
        """The producers' session, on ``producer_connection``."""
        self.ready = False
        self.pushdown = False
        self.non_match_modified = False
        """A queue consumer's non-matches go back at once as modified (undeliverable-here),
        and a downstream modified goes up as modified; else they are held / released."""
        self.product: KnownBroker | None = None
        """The upstream broker, if its open frame names one we know."""
        self.origins = OriginStamp()
        """Marks forwarded messages with their connection, for no-local on the way back."""
        self.offered: frozenset[str] = frozenset()
        """The capabilities the upstream offered in its open frame."""
        self.properties: dict[Any, Any] = {}
        """The connection properties of the upstream's open frame."""
        self.links: dict[RelayLink, None] = {}
        self.sharing = QueueSharing(self.message)
        """Our consumers of each upstream queue, indexed by their filters: a message one of
        them does not match is handed to a candidate, not offered to every link."""
        self.deadlines = AttachDeadlines(self.schedule, config.upstream_attach_timeout)
        """Dynamic attaches sent upstream and not answered yet, with their deadline."""
        self.ends = SessionEnds(self.schedule, self._open_waited)
        """Sessions of detached links being ended, and the consumers waiting for them."""
        self.names = UpstreamLinkNames(self.schedule, self._open_named)
        """The upstream links by name, and the durable subscriptions waiting for theirs."""
        self.backoff = BACKOFF_MIN
        self.stopping = False
        self.idle_losses = 0
        """Upstream connections given up because the upstream sent nothing for
        ``--upstream-idle-timeout`` (a hung broker, a partition)."""

    # -- the connection ---------------------------------------------------------------

    def start(self, container: FastContainer) -> None:
        self.container = container
        self._connect()

    def _connect(self) -> None:
        if self.stopping or self.container is None:
            return
        try:
            consumers, producers = connect_options(self.config)
        except SSLException as exc:  # e.g. a CA file that is not PEM: the operator fixes it
            log.error("upstream TLS settings unusable (%s); retrying in %.1f s", exc,
                      BACKOFF_MAX)
            self.container.schedule(BACKOFF_MAX, self)
            return
        log.info("connecting to upstream %s", self.config.upstream)
        self.connection = self.container.connect(self.config.upstream, handler=self,
                                                 **consumers)
        self.producer_connection = self.container.connect(self.config.upstream, handler=self,
                                                          **producers)

    def schedule(self, delay: float, handler: Handler) -> bool:
        """Call ``handler``'s ``on_timer_task`` in ``delay`` seconds (False: not started)."""
        if self.container is None:
            return False
        self.container.schedule(delay, handler)
        return True

    def on_connection_remote_open(self, event: Event) -> None:
        connection = event.connection
        if connection is None or not self._current(connection):
            return
        if self.producer_connection is not None and impl(connection) == impl(
                self.producer_connection):
            self.session = connection.session()
            self.session.open()
        else:
            self._learn(connection)
            self.ready = True
        self._open_all()

    def _learn(self, connection: Connection) -> None:
        """What the upstream's open frame tells: its capabilities and product, and so whether
        selectors are pushed down and what becomes of a queue consumer's non-matches."""
        offered = connection.remote_offered_capabilities or []
        names = {str(c) for c in (offered if isinstance(offered, list | tuple) else [offered])}
        self.offered = frozenset(names)
        decision = decide_pushdown(self.config.upstream_selector, names,
                                   connection.remote_properties)
        self.pushdown = decision.pushdown
        self.properties = dict(connection.remote_properties or {})
        self.product = identify(connection.remote_properties)
        log.info("upstream %s open (offers %s; selector pushdown %s: %s)", self.config.upstream,
                 sorted(names) or "nothing", "on" if self.pushdown else "off", decision.reason)
        non_match = decide_non_match(self.config.upstream_non_match, connection.remote_properties)
        self.non_match_modified = non_match.modified
        log.info("upstream %s: queue non-matches without pushdown are %s: %s",
                 self.config.upstream, "modified (undeliverable-here)" if non_match.modified
                 else "held while the link lives", non_match.reason)

    def _open_all(self) -> None:
        """Both connections are open: open the upstream side of every link."""
        if not self.ready or self.session is None:
            return
        self.backoff = BACKOFF_MIN
        for link in list(self.links):
            self._open(link)

    def on_link_remote_open(self, event: Event) -> None:
        link = event.link
        if link is not None:
            log.info("upstream link %r attached to %r", link.name,
                     (link.remote_source if link.is_receiver else link.remote_target).address)
            owner = self._owner_of(link)
            if owner is not None:
                self.deadlines.answered(owner)
                owner.upstream_attached(link)
                if isinstance(owner, RelayConsumer):
                    self.sharing.readdressed(owner)

    def on_link_remote_close(self, event: Event) -> None:
        if event.link is not None:
            self._link_closed(event.link)

    def on_link_remote_detach(self, event: Event) -> None:
        if event.link is not None:
            self._link_closed(event.link)

    def _link_closed(self, link: Link) -> None:
        self.names.link_closed(link)
        owner = self._owner_of(link)
        condition = link.remote_condition
        if owner is not None and self._selector_refused(owner, condition):
            assert condition is not None
            log.warning("upstream refused link %r with the selector pushed down (%s: %s): "
                        "attaching it again without one, its filters are evaluated here only",
                        link.name, condition.name, condition.description)
            _free(link)
            self._open(owner)
            return
        if owner is not None:
            log.warning("upstream closed link %r: %s", link.name,
                        f"{condition.name}: {condition.description}" if condition else "no error")
            owner.upstream_closed(condition)
        _free(link)

    def _selector_refused(self, owner: RelayLink, condition: Condition | None) -> bool:
        """The upstream refused the selector pushed down with a consumer, which forgot its
        upstream link to attach again without one (:meth:`RelayConsumer.drop_selector`)."""
        return (self.pushdown and isinstance(owner, RelayConsumer) and condition is not None
                and condition.name == INVALID_FIELD and owner.drop_selector())

    def _owner_of(self, link: Link) -> RelayLink | None:
        for owner in self.links:
            if owner.up is not None and impl(owner.up) == impl(link):
                return owner
        return None

    def on_connection_remote_close(self, event: Event) -> None:
        connection = event.connection
        condition = connection.remote_condition if connection is not None else None
        log.warning("upstream closed the connection%s",
                    f": {condition.name}: {condition.description}" if condition else "")
        if connection is not None and connection.state & Endpoint.LOCAL_ACTIVE:
            connection.close()
        self._lost(connection)

    def on_transport_closed(self, event: Event) -> None:
        self._lost(event.connection)

    def on_transport_error(self, event: Event) -> None:
        transport = event.transport
        condition = transport.condition if transport is not None else None
        if condition is None:
            return
        if is_idle_timeout(condition):
            self.idle_losses += 1
            log.warning("upstream %s sent nothing for %g s (upstream-idle-timeout): giving the "
                        "connection up", self.config.upstream, self.config.upstream_idle_timeout)
        else:
            log.warning("upstream transport error: %s: %s", condition.name,
                        condition.description)

    def on_timer_task(self, event: Event) -> None:
        self._connect()

    def _lost(self, connection: Connection | None) -> None:
        if not self._current(connection):
            return
        for other in (self.connection, self.producer_connection):  # the pair goes together
            if other is not None and (connection is None or impl(other) != impl(connection)) \
                    and other.state & Endpoint.LOCAL_ACTIVE:
                other.close()
        self.connection = None
        self.producer_connection = None
        self.session = None
        self.ends.clear()
        self.names.clear()
        self.ready = False
        for link in list(self.links):
            if link.up is not None:
                self.unregister(link.up)
            link.upstream_lost()
            if link.dynamic:
                link.upstream_closed(Condition("amqp:resource-deleted", "relay mode: the "
                                               "upstream's dynamic node went with its connection"))
        if self.stopping or self.container is None:
            return
        delay = self.backoff
        self.backoff = min(self.backoff * 2, BACKOFF_MAX)
        log.warning("upstream %s lost; reconnecting in %.1f s", self.config.upstream, delay)
        self.container.schedule(delay, self)

    def end_session(self, session: Session) -> None:
        """End a link's session (:mod:`filtex_broker.relay.session_ends`)."""
        self.names.session_ending(session)
        self.ends.end(session)

    def on_session_remote_open(self, event: Event) -> None:
        if event.session is not None:
            self.ends.begun(event.session)

    def on_session_remote_close(self, event: Event) -> None:
        session = event.session
        if session is None:
            return
        if not self.ends.answered(session) and self._current(session.connection):
            self._session_taken(session)
        self.names.session_ended(session)
        if session.state & Endpoint.LOCAL_ACTIVE:
            session.close()
        session.free()
        self.ends.release_waiting()

    def _session_taken(self, session: Session) -> None:
        """The upstream ended a session we still use (RabbitMQ ends every session, with
        "shutdown", a few seconds before it drops its connections). Freeing it frees its
        links and their deliveries, which our links still hold (settling one later crashed
        the relay), and leaves those links without an upstream side: lose the connection
        pair instead, so that every link forgets what it took and reattaches."""
        condition = session.remote_condition
        log.warning("upstream ended a session the relay uses%s: reconnecting",
                    f" ({condition.name}: {condition.description})" if condition else "")
        connection = session.connection
        if connection.state & Endpoint.LOCAL_ACTIVE:
            connection.close()
        self._lost(connection)

    def _current(self, connection: Connection | None) -> bool:
        """Whether an event's connection is the one we use now (wrappers are not unique)."""
        return connection is not None and any(
            current is not None and impl(connection) == impl(current)
            for current in (self.connection, self.producer_connection))

    def close(self) -> None:
        self.stopping = True
        for connection in (self.connection, self.producer_connection):
            if connection is not None and connection.state & Endpoint.LOCAL_ACTIVE:
                connection.close()

    # -- links ------------------------------------------------------------------------------

    def register(self, link: Link, side: UpstreamSide) -> None:
        if self.container is not None:
            self.container.register(link, side)

    def unregister(self, link: Link) -> None:
        if self.container is not None:
            self.container.unregister(link)

    def track(self, relay_link: RelayLink) -> None:
        self.links[relay_link] = None
        if isinstance(relay_link, RelayConsumer) and not relay_link.copies:
            self.sharing.index(relay_link)
        if self._open(relay_link) and isinstance(relay_link, RelayConsumer):
            self.sharing.offer_held(relay_link, self.links)

    def _open_waited(self, consumer: RelayConsumer, *, wait: bool = False) -> None:
        """Open the upstream side of a consumer that waited for session ends (``wait``: or
        for its link's name, and then for session ends too), if it still needs one."""
        if consumer in self.links and consumer.up is None and not consumer.closed \
                and self._open(consumer, wait=wait):
            self.sharing.offer_held(consumer, self.links)

    def _open_named(self, consumer: RelayConsumer) -> None:
        self._open_waited(consumer, wait=True)

    def _open(self, relay_link: RelayLink, *, wait: bool = True) -> bool:
        """Open the upstream side of a link, unless the upstream cannot serve it (or, ``wait``,
        a consumer's session has to wait for sessions being ended)."""
        if not self.ready or self.session is None or self.connection is None:
            return False
        if isinstance(relay_link, RelayConsumer):
            reason = self.unsupported(browse=relay_link.browse, dynamic=relay_link.dynamic)
        else:
            reason = self.unsupported(dynamic=relay_link.dynamic, anonymous=not relay_link.dynamic
                                      and relay_link.address is None)
        if reason is not None:
            relay_link.upstream_closed(Condition(NOT_IMPLEMENTED, reason))
            return False
        if isinstance(relay_link, RelayConsumer) and relay_link.durable_as is not None:
            name = relay_link.durable_as  # it names the subscription upstream
            if self.names.must_wait(relay_link, name):
                return False
        else:
            name = self.names.free_name(f"{relay_link.name}@relay")
        if wait and isinstance(relay_link, RelayConsumer) \
                and self.ends.hold(relay_link, self.product):
            return False
        if isinstance(relay_link, RelayConsumer):
            pushed = self.pushdown and not self._topic_quirk(relay_link)
            self._say_pushdown(relay_link, pushed)
            relay_link.open_upstream(self.connection, self.session, pushed, name)
        elif self.producer_connection is not None:
            relay_link.open_upstream(self.producer_connection, self.session, self.pushdown,
                                     name)
        if relay_link.up is not None:
            self.names.hold(relay_link.up, until_session_ends=isinstance(relay_link,
                                                                         RelayConsumer))
        return True

    def _say_pushdown(self, consumer: RelayConsumer, pushed: bool) -> None:
        """One line per upstream attach: what is pushed upstream, or that nothing is, and why."""
        if consumer.selector is None:
            log.info("link %r: nothing pushed upstream (no part of its filter set is a JMS "
                     "selector); the relay evaluates it", consumer.name)
        elif pushed:
            log.info("link %r: selector pushed upstream: %r; the relay evaluates the whole "
                     "filter set on what comes back", consumer.name, consumer.selector)
        else:
            why = ("selector pushdown is off for this upstream" if not self.pushdown
                   else "this upstream misreads selectors on its topics")
            log.info("link %r: nothing pushed upstream (%s); the relay evaluates its filter "
                     "set", consumer.name, why)

    def topic_address(self, address: str) -> str:
        return topic_address(address, self.properties)

    def _topic_quirk(self, consumer: RelayConsumer) -> bool:
        """The upstream misreads selectors on topic subscriptions (brokers.py): push none."""
        product = self.product
        if not consumer.topic or product is None or product.topic_selectors:
            return False
        if consumer.selector is not None:
            log.info("link %r: no pushdown on a topic of %s (it misreads selectors on header "
                     "fields there)", consumer.name, product.label)
        return True

    def answer_by(self, relay_link: RelayLink) -> None:
        """A dynamic attach sent upstream: refused if not answered in time
        (:mod:`filtex_broker.relay.deadlines`)."""
        self.deadlines.answer_by(relay_link)

    def unsupported(self, *, browse: bool = False, dynamic: bool = False,
                    anonymous: bool = False) -> str | None:
        """Why the upstream cannot serve a link, as far as its open frame tells (None: try)."""
        if not self.ready:
            return None  # asked again once the upstream is open
        product = self.product
        if browse and product is not None and not product.browses:
            return (f"relay mode: the upstream ({product.label}) does not browse: it would "
                    "consume what a distribution-mode copy link reads")
        if dynamic and product is not None and not product.dynamic_nodes:
            return f"relay mode: the upstream ({product.label}) creates no dynamic nodes"
        if anonymous and ANONYMOUS_RELAY not in self.offered:
            return ("relay mode: the upstream does not offer ANONYMOUS-RELAY, which a producer "
                    "without a target address needs")
        return None

    def message(self, data: bytes) -> FilterMessage:
        """A message taken from the upstream, with the relay connection that published it."""
        message = self.plugin.message(data)
        with contextlib.suppress(DecodeError):  # not a message: it matches no filter anyway
            message.origin = self.origins.origin(message.view)
        return message

    def forget(self, relay_link: RelayLink) -> None:
        self.links.pop(relay_link, None)
        self.deadlines.answered(relay_link)
        if isinstance(relay_link, RelayConsumer):
            self.ends.forget(relay_link)
            self.names.forget(relay_link)
            self.sharing.unindex(relay_link)

    # -- attaching downstream links --------------------------------------------------------

    def attach_consumer(self, link: Sender, client: ClientConnection,
                        request: TerminusRequest) -> RelayConsumer | None:
        """A downstream receiver (:func:`filtex_broker.relay.attach.relay_consumer`)."""
        return relay_consumer(self, link, client, request)

    def attach_producer(self, link: Receiver, client: ClientConnection, registry: Registry,
                        request: TerminusRequest) -> RelayProducer | None:
        """A downstream sender (:func:`filtex_broker.relay.attach.relay_producer`)."""
        return relay_producer(self, link, client, registry, request)


def _free(link: Link) -> None:
    """Close our end of an upstream link the upstream closed, and free it: both ends are
    done, and Proton keeps the link in its session until freed."""
    if link.state & Endpoint.LOCAL_ACTIVE:
        link.close()
    link.free()
