"""An ordinary python-qpid-proton queue broker, made to filter by adding the plugin.

It is the broker users start from (python-qpid-proton's examples/broker.py: one
queue per address, messages kept until a consumer takes them). The lines marked
``# filtex`` are all it takes to give its receivers AMQP source filters: SQL,
property, group, constant and the Apache filters, refused on the wire when bad.

    python examples/plugin_broker.py --listen 127.0.0.1:5672
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import logging
import signal

from proton import Delivery, Endpoint
from proton.handlers import MessagingHandler
from proton.reactor import Container

from filtex_proton.matcher import Arrival, NodeMatcher, Verdict  # filtex
from filtex_proton.plugin import FilterMessage, FiltexPlugin, LinkFilter  # filtex
from filtex_proton.release import EndpointReleaser  # filtex: links freed when both ends close


class Queue:
    """Messages in arrival order; each consumer takes the first one its filter matches.

    The node matcher says, when a message arrives, which consumers may match it (its arrival,
    kept with the message: consumers that attach later are in it), so a consumer evaluates
    only those messages.
    """

    def __init__(self) -> None:
        self.messages: collections.deque[tuple[FilterMessage, Arrival[object]]] = (
            collections.deque())
        self.consumers: dict[object, None] = {}
        """Sending links, in the order they attached."""
        self.matcher: NodeMatcher[object] = NodeMatcher()  # filtex

    def subscribe(self, sender: object, link_filter: LinkFilter) -> None:
        self.consumers[sender] = None
        self.matcher.register(sender, link_filter)  # filtex

    def unsubscribe(self, sender: object) -> None:
        if sender in self.consumers:
            del self.consumers[sender]
            self.matcher.unregister(sender)  # filtex

    def unused(self) -> bool:
        return not self.consumers and not self.messages

    def put(self, message: FilterMessage) -> None:
        self.messages.append((message, self.matcher.arrival(message)))  # filtex

    def _matches(self, sender: object, queued: tuple[FilterMessage, Arrival[object]]) -> bool:
        message, arrival = queued
        return (arrival.may_match(sender)  # filtex: else ruled out unevaluated
                and self.matcher.verdict(sender, message) is Verdict.MATCHED)  # filtex

    def dispatch(self) -> None:
        for sender in list(self.consumers):
            while sender.credit > 0:  # type: ignore[attr-defined]
                found = next((q for q in self.messages if self._matches(sender, q)), None)
                if found is None:
                    break
                self.messages.remove(found)
                sender.delivery(sender.delivery_tag())  # type: ignore[attr-defined]
                sender.stream(found[0].data)  # type: ignore[attr-defined]  # the bytes as they arrived
                sender.advance()  # type: ignore[attr-defined]


class Broker(MessagingHandler):  # type: ignore[misc]
    def __init__(self, url: str) -> None:
        super().__init__(auto_accept=False)
        self.url = url
        self.queues: dict[str, Queue] = collections.defaultdict(Queue)
        self.plugin = FiltexPlugin()  # filtex
        # Last of the handlers: tells us when a link is gone, then frees it (a long-lived
        # connection would otherwise keep every link its client ever attached).
        self.add(EndpointReleaser(on_link_gone=self._unsubscribe))  # filtex

    def on_start(self, event: object) -> None:
        event.container.listen(self.url)  # type: ignore[attr-defined]
        logging.info("listening on %s", self.url)

    def on_connection_opening(self, event: object) -> None:
        self.plugin.offer_capabilities(event.connection)  # type: ignore[attr-defined]  # filtex

    def on_link_opening(self, event: object) -> None:
        link = event.link  # type: ignore[attr-defined]
        if link.is_sender:
            link_filter = self.plugin.attach_sender(link)  # filtex: refuses bad filters
            if link_filter is None:  # filtex
                return  # filtex
            address = link.remote_source.address
            link.source.address = address
            self.queues[address].subscribe(link, link_filter)
            self.queues[address].dispatch()
        else:
            link.target.address = link.remote_target.address

    def on_link_flow(self, event: object) -> None:
        link = event.link  # type: ignore[attr-defined]
        if link.is_sender and link.source.address in self.queues:
            self.queues[link.source.address].dispatch()

    def on_delivery(self, event: object) -> None:
        # Take the message bytes as they arrived (a decoded proton.Message would
        # fill in defaults for absent fields, which EXISTS and IS NULL must see).
        delivery = event.delivery  # type: ignore[attr-defined]
        link = delivery.link
        if not link.is_receiver or delivery.partial or not delivery.readable:
            return
        data = link.recv(delivery.pending)
        link.advance()
        origin = self.plugin.connection_identity(event.connection)  # type: ignore[attr-defined]
        queue = self.queues[link.target.address]
        queue.put(self.plugin.message(data, origin=origin))  # filtex
        delivery.update(Delivery.ACCEPTED)
        delivery.settle()
        queue.dispatch()

    def _unsubscribe(self, link: object) -> None:
        address = link.source.address  # type: ignore[attr-defined]
        queue = self.queues.get(address)
        if queue is not None:
            queue.unsubscribe(link)
            if queue.unused():
                del self.queues[address]  # addresses come and go (one per request, say)

    def on_connection_closing(self, event: object) -> None:
        self.on_disconnected(event)

    def on_disconnected(self, event: object) -> None:
        link = event.connection.link_head(Endpoint.REMOTE_ACTIVE)  # type: ignore[attr-defined]
        while link:
            self._unsubscribe(link)
            link = link.next(Endpoint.REMOTE_ACTIVE)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", default="127.0.0.1:5672", help="HOST:PORT to listen on")
    options = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    container = Container(Broker(options.listen))
    signal.signal(signal.SIGTERM, lambda *_: container.stop())
    with contextlib.suppress(KeyboardInterrupt):
        container.run()


if __name__ == "__main__":
    main()
