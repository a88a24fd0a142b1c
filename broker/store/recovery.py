"""The restart: the durable store's logs replayed into the address space.

Which nodes log is decided where they are created: the registry gives every
non-dynamic queue a log, a topic gives each durable subscription one. A topic
itself holds nothing, so topic messages are stored per durable subscription
(each subscription's log holds its own copy of what it matched: simple,
independent compaction, and an unsubscribe is one file deletion).
Non-durable subscriptions live and die with their link and are never written.

Streams (``--stream``) keep their segments in a folder each (``filtex_broker.streams.durable``);
each stream found there is re-created, and reads its segments back itself.

At start-up every log is replayed into its node: queues are re-created,
durable subscriptions re-created on their topic with their filter set
compiled again from the bytes the subscriber sent, so that a subscriber
resuming after a restart finds its subscription and its messages as it left
them.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from proton import Data

from filtex_broker.nodes.entry import Entry
from filtex_broker.nodes.lifetime import recovered_lifetime
from filtex_broker.nodes.queue import Queue
from filtex_broker.nodes.topic import Topic
from filtex_broker.store.log import Recovered, Store, describe
from filtex_proton.errors import FilterError
from filtex_proton.plugin import FiltexPlugin, LinkFilter

if TYPE_CHECKING:
    from collections.abc import Callable

    from filtex_broker.nodes.registry import Registry

__all__ = ["open_store"]

log = logging.getLogger("filtex.broker")


def open_store(
    directory: Path, registry: Registry, plugin: FiltexPlugin, wake: Callable[[], None]
) -> Store:
    """Open the data directory and restore every node it holds into the registry."""
    store = Store(directory, wake, account=registry.budget)
    registry.store = store
    recovered = store.recover()
    total = 0
    for item in recovered:
        node_queue = _restore_node(item, registry, plugin)
        if node_queue is None:
            continue  # left on disk, untouched: the log says why
        _load(node_queue, item, plugin)
        total += len(item.messages)
    streams = _restore_streams(store, registry)
    for journal in store.unclaimed():
        log.warning("store: %s could not be restored; %s is kept as it is",
                    describe(journal.meta), journal.path.name)
    log.info("store: %s: %d node(s), %d message(s), %d stream(s) recovered", directory,
             len(recovered), total, streams)
    return store


def _restore_streams(store: Store, registry: Registry) -> int:
    """Re-create every stream with a folder in the data directory (each reads its segments
    back as it is made); returns how many."""
    restored = 0
    for name in store.stream_names():
        if not registry.is_stream(name):
            log.warning("store: stream %r: the address is no longer a stream (--stream); its "
                        "segments are kept on disk, not restored", name)
            continue
        registry.node(name)
        restored += 1
    return restored


def _restore_node(item: Recovered, registry: Registry, plugin: FiltexPlugin) -> Queue | None:
    meta = item.meta
    if meta.get("kind") == "queue":
        node = registry.node(str(meta["name"]))
        if not isinstance(node, Queue) or node.journal is not item.journal:
            log.warning("store: %s: the address is a %s now; not restored", describe(meta),
                        node.kind)
            return None
        return node
    topic = registry.node(str(meta["topic"]), topic=True)
    if not isinstance(topic, Topic):
        log.warning("store: %s: %r is a queue now; not restored",
                    describe(meta), meta["topic"])
        return None
    try:
        link_filter = _compile(meta, plugin)
    except FilterError as exc:
        log.warning("store: %s: its filter set is refused now (%s); kept on disk, not restored",
                    describe(meta), exc)
        return None
    key = (str(meta["container"]), str(meta["link"]))
    subscription = topic.subscribe(key, link_filter)
    subscription.filter_code = bytes.fromhex(str(meta.get("filter", "")))
    registry.durable[key] = subscription
    return subscription.queue


def _compile(meta: dict[str, object], plugin: FiltexPlugin) -> LinkFilter | None:
    encoded = bytes.fromhex(str(meta.get("filter", "")))
    if not encoded:
        return None
    data = Data()
    data.decode(encoded)
    filter_set = plugin.compile(data)
    if not len(filter_set):
        return None
    label = f"durable subscription {meta['link']!r} on {meta['topic']!r}"
    return plugin.link_filter_class(filter_set, None, label=label, logger=plugin.logger,
                                    log_interval=plugin.error_log_interval,
                                    on_error=plugin.on_evaluation_error)


def _load(queue: Queue, item: Recovered, plugin: FiltexPlugin) -> None:
    """Put the recovered messages back, in order, without logging them a second time."""
    journal = item.journal
    assert queue.journal is journal
    times = item.times
    for ident, data in item.messages:
        entry = Entry(data, lifetime=recovered_lifetime(data, times.get(ident)))
        queue.put(entry, log=False)
        journal.adopt(entry, ident)
