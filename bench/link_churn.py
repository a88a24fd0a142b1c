"""A client that attaches and detaches links on one long-lived connection, cycle after cycle.

    python bench/link_churn.py --url HOST:PORT --kind receiver

Reads a number of cycles per line on stdin, runs them, and answers ``done N`` (N: cycles so
far) on stdout; ends at end of input. Between two lines the connection stays open and idle,
so whoever drives it can read the broker's resident memory at a quiet moment: that is how
``bench/bench_link_memory.py`` and the soak tests in ``tests/broker/test_link_memory.py``
measure what a cycle leaves behind in the broker.

Kinds (``--kind``), each one cycle:

* ``connection``: a connection opened and closed (the baseline: nothing is kept);
* ``session``: a session begun and ended;
* ``receiver``: a receiver with an ``amqp:sql-filter`` attached to a queue, given credit,
  closed;
* ``sender``: a sender attached, one message sent and accepted, consumed by a long-lived
  receiver, closed;
* ``dynamic``: a receiver on a dynamic (temporary) node, closed (the node is deleted);
* ``browser``: a browsing receiver (``distribution-mode copy``) reads the queue's few
  messages and is closed;
* ``durable``: a durable topic subscription attached, one message published to it and
  received, detached (not closed: the subscription stays) and attached again next cycle;
* ``refused``: a receiver whose SQL filter does not parse, refused by the broker (null
  source, detach with ``amqp:invalid-field``) and closed;
* ``in-session``: a receiver attached on its own session, which is then ended (the link goes
  with the session, never detached on its own).

Every endpoint the client is done with is freed (``free()``), so the client's own memory
stays flat too and a long run stays as fast as a short one.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any, Final

from proton import (
    Data,
    Delivery,
    Described,
    Endpoint,
    Handler,
    Message,
    ProtonException,
    Terminus,
    symbol,
)
from proton.utils import BlockingConnection

TIMEOUT: Final = 30.0
KINDS: Final = ("connection", "session", "receiver", "sender", "dynamic", "browser",
                "durable", "in-session", "refused")
QUEUE: Final = "churn"
TOPIC: Final = "churn-topic"
_REMOTE_ACTIVE: Final = Endpoint.REMOTE_ACTIVE
_REMOTE_CLOSED: Final = Endpoint.REMOTE_CLOSED
_SQL: Final = Described(symbol("amqp:sql-filter"), "region = 'EU' AND amount > 10")
_BAD_SQL: Final = Described(symbol("amqp:sql-filter"), "region = = 'EU'")


class _Collect(Handler):
    """Keeps what a receiver link is given, accepts it, and frees settled deliveries."""

    def __init__(self) -> None:
        self.received = 0
        self.detached: set[str] = set()
        """Links the broker has detached (a detach that does not close leaves the state
        alone: proton sets ``REMOTE_CLOSED`` only for a close)."""

    def on_link_remote_detach(self, event: Any) -> None:
        self.detached.add(event.link.name)

    def on_delivery(self, event: Any) -> None:
        delivery = event.delivery
        if delivery.link.is_receiver:
            if delivery.readable and not delivery.partial:
                delivery.link.recv(delivery.pending)
                delivery.link.advance()
                delivery.update(Delivery.ACCEPTED)
                delivery.settle()
                self.received += 1
        elif delivery.updated:
            delivery.settle()


class Churn:
    """One kind of cycle over one connection (a fresh one per cycle for ``connection``)."""

    def __init__(self, url: str, kind: str) -> None:
        self.url = url
        self.kind = kind
        self.handler = _Collect()
        self.connection = self._connect()
        self.session = self._begin()
        self.cycles = 0
        self.message = Message(body="x" * 100, properties={"region": "EU", "amount": 20})
        self.encoded = self.message.encode()
        self._setup()

    # -- plumbing --------------------------------------------------------------------

    def _connect(self) -> BlockingConnection:
        return BlockingConnection(self.url, timeout=TIMEOUT, container_id="churn")

    def _wait(self, condition: Callable[[], bool], what: str) -> None:
        self.connection.wait(condition, timeout=TIMEOUT, msg=f"waiting for {what}")

    def _begin(self) -> Any:
        connection = self.connection.conn
        assert connection is not None
        session = connection.session()
        session.handler = self.handler
        session.open()
        self._wait(lambda: bool(session.state & _REMOTE_ACTIVE), "the session")
        return session

    def _end(self, session: Any) -> None:
        session.close()
        self._wait(lambda: bool(session.state & _REMOTE_CLOSED), "the session's end")
        session.free()

    def _open(self, link: Any) -> Any:
        link.open()
        self._wait(lambda: bool(link.state & (_REMOTE_ACTIVE | _REMOTE_CLOSED)), "the attach")
        if link.remote_source.type == Terminus.UNSPECIFIED and link.is_receiver:
            raise SystemExit(f"attach refused: {link.remote_condition}")
        return link

    def _close(self, link: Any, *, detach: bool = False) -> None:
        if detach:
            link.detach()
            self._wait(lambda: link.name in self.handler.detached, "the detach")
            self.handler.detached.discard(link.name)
        else:
            link.close()
            self._wait(lambda: bool(link.state & _REMOTE_CLOSED), "the detach")
        link.free()

    def _receiver(self, name: str, address: str | None, *, session: Any = None,
                  filtered: bool = False, dynamic: bool = False, copy: bool = False,
                  topic: bool = False, durable: bool = False, refused: bool = False) -> Any:
        link = (session or self.session).receiver(name)
        source = link.source
        source.address = address
        source.dynamic = dynamic
        if filtered:
            source.filter.put_map()
            source.filter.enter()
            source.filter.put_symbol("sql")
            source.filter.put_object(_BAD_SQL if refused else _SQL)
            source.filter.exit()
        if copy:
            source.distribution_mode = Terminus.DIST_MODE_COPY
        if topic:
            source.capabilities.put_array(False, Data.SYMBOL)
            source.capabilities.enter()
            source.capabilities.put_symbol("topic")
            source.capabilities.exit()
        if durable:
            source.durability = Terminus.DELIVERIES
            source.expiry_policy = Terminus.EXPIRE_NEVER
        link.target.address = None
        if refused:
            link.open()
            self._wait(lambda: bool(link.state & _REMOTE_CLOSED), "the refusal")
            if link.remote_source.type != Terminus.UNSPECIFIED:
                raise SystemExit("expected a refusal (null source)")
            return link
        return self._open(link)

    def _sender(self, address: str) -> Any:
        link = self.session.sender(f"churn-sender-{self.cycles}")
        link.target.address = address
        link.source.address = None
        return self._open(link)

    def _send(self, sender: Any) -> None:
        self._wait(lambda: sender.credit > 0, "credit")
        delivery = sender.delivery(b"%d" % self.cycles)
        sender.send(self.encoded)
        sender.advance()
        self._wait(lambda: delivery.remote_state == Delivery.ACCEPTED, "the message's outcome")
        delivery.settle()

    def _setup(self) -> None:
        if self.kind == "sender":
            self.consumer = self._receiver("churn-consumer", QUEUE)
            self.consumer.flow(1_000_000)
        elif self.kind == "browser":
            sender = self._sender(QUEUE)
            for _ in range(3):
                self._send(sender)
            self._close(sender)

    # -- cycles ----------------------------------------------------------------------

    def cycle(self) -> None:
        getattr(self, f"_cycle_{self.kind.replace('-', '_')}")()
        self.cycles += 1

    def _cycle_connection(self) -> None:
        connection = self.connection.container.connect(url=self.url)
        self._wait(lambda: bool(connection.state & _REMOTE_ACTIVE), "the connection")
        connection.close()
        self._wait(lambda: bool(connection.state & _REMOTE_CLOSED), "the connection's close")

    def _cycle_session(self) -> None:
        self._end(self._begin())

    def _cycle_receiver(self) -> None:
        link = self._receiver(f"churn-receiver-{self.cycles}", QUEUE, filtered=True)
        link.flow(10)
        self._close(link)

    def _cycle_sender(self) -> None:
        before = self.handler.received
        sender = self._sender(QUEUE)
        self._send(sender)
        self._close(sender)
        self._wait(lambda: self.handler.received > before, "the message to be consumed")

    def _cycle_dynamic(self) -> None:
        link = self._receiver(f"churn-dynamic-{self.cycles}", None, dynamic=True)
        link.flow(10)
        self._close(link)

    def _cycle_browser(self) -> None:
        before = self.handler.received
        link = self._receiver(f"churn-browser-{self.cycles}", QUEUE, copy=True)
        link.flow(10)
        self._wait(lambda: self.handler.received >= before + 3, "the browsed messages")
        self._close(link)

    def _cycle_durable(self) -> None:
        before = self.handler.received
        link = self._receiver("churn-durable", TOPIC, topic=True, durable=True)
        link.flow(10)
        sender = self._sender(TOPIC)
        self._send(sender)
        self._close(sender)
        self._wait(lambda: self.handler.received > before, "the published message")
        self._close(link, detach=True)

    def _cycle_refused(self) -> None:
        self._close(self._receiver(f"churn-refused-{self.cycles}", QUEUE, filtered=True,
                                   refused=True))

    def _cycle_in_session(self) -> None:
        session = self._begin()
        link = self._receiver(f"churn-in-session-{self.cycles}", QUEUE, session=session,
                              filtered=True)
        link.flow(10)
        self._end(session)


def resident_bytes(pid: int) -> int:
    """A process's resident memory (``VmRSS`` in ``/proc/PID/status``), in bytes."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class ChurnProcess:
    """Drives ``link_churn.py`` as a child process: run N cycles, wait until they are done."""

    def __init__(self, url: str, kind: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--url", url, "--kind", kind],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._expect("ready")

    def _expect(self, prefix: str) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith(prefix):
            self.process.kill()
            raise RuntimeError(f"link_churn.py: expected {prefix!r}, got {line!r} "
                               f"(exit {self.process.wait()})")
        return line

    def run(self, cycles: int) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{cycles}\n")
        self.process.stdin.flush()
        self._expect("done")

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def growth_per_cycle(pids: Sequence[int], url: str, kind: str, *, warmup: int,
                     cycles: int) -> list[float]:
    """Bytes each process in ``pids`` kept per cycle of ``kind`` against ``url``, after warm-up.

    The warm-up fills the caches, pools and allocator arenas a steady state needs; what the
    resident size gains over the measured cycles after it is what the cycles leave behind.
    """
    churn = ChurnProcess(url, kind)
    try:
        churn.run(warmup)
        start = [resident_bytes(pid) for pid in pids]
        churn.run(cycles)
        end = [resident_bytes(pid) for pid in pids]
    except BaseException:  # a failure or a stop: the client's cycles are not waited for
        churn.process.kill()
        churn.process.wait()
        raise
    churn.close()
    return [(after - before) / cycles for before, after in zip(start, end, strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="example: echo 1000 | python bench/link_churn.py "
                                            "--url 127.0.0.1:5672 --kind receiver")
    parser.add_argument("--url", required=True, help="the broker, HOST:PORT")
    parser.add_argument("--kind", required=True, choices=KINDS, help="what one cycle does")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        churn = Churn(args.url, args.kind)
        print("ready", flush=True)
        for line in sys.stdin:
            if not line.strip().isdigit():
                print(f"link_churn.py: {line.strip()!r} is not a number of cycles",
                      file=sys.stderr)
                return 2
            for _ in range(int(line)):
                churn.cycle()
            print(f"done {churn.cycles}", flush=True)
        churn.connection.close()
    except KeyboardInterrupt:
        return 0
    except (ProtonException, SystemExit, OSError) as exc:
        if isinstance(exc, SystemExit) and not isinstance(exc.code, str):
            raise
        print(f"link_churn.py: {args.url}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
