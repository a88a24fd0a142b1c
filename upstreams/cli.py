"""``python -m upstreams``: a real broker from Maven Central, optionally with the relay in front.

The README's "relay in front of Artemis" without Docker: one command fetches the
broker (once), starts a private instance with the queues asked for, starts
``filtex-broker --upstream`` in front of it, and stops both cleanly on SIGTERM or
Ctrl-C (exit 0). Everything lives in a temporary directory unless ``--dir`` names one.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import NoReturn

from .activemq import ACTIVEMQ, start_activemq
from .artemis import ARTEMIS, start_artemis
from .brokerj import BROKER_J, start_broker_j
from .maven import Distribution, java_missing, unpacked
from .process import Upstream, dying_with_parent

__all__ = ["main"]

STARTERS: dict[str, tuple[Distribution, Callable[..., Upstream]]] = {
    "activemq": (ACTIVEMQ, start_activemq),
    "artemis": (ARTEMIS, start_artemis),
    "broker-j": (BROKER_J, start_broker_j),
}

EXAMPLES = """examples:
  python -m upstreams artemis --queue orders --relay 127.0.0.1:5672
      ActiveMQ Artemis with a queue 'orders', filtex-broker in front of it on port 5672
  python -m upstreams artemis --queue orders --relay 127.0.0.1:5672 -- --console 127.0.0.1:8162
      the same, with the relay's management console (arguments after -- go to filtex-broker)
  python -m upstreams broker-j --fetch-only
      only fetch Broker-J from Maven Central into ~/.cache/filtex-proton (for offline use later)
  python -m upstreams artemis --dir /var/tmp/artemis
      Artemis alone, its instance and journal kept in /var/tmp/artemis
  python -m upstreams activemq --queue orders --relay 127.0.0.1:5672
      ActiveMQ Classic (AMQP only, anonymous) with the relay in front of it
  python -m upstreams broker-j --queue orders --relay 127.0.0.1:5672
      Qpid Broker-J (BDB store, user guest) with the relay in front of it
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line saying what is wrong, exit 2."""
        self.exit(2, f"{self.prog}: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m upstreams", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run a real broker from Maven Central on this machine, without Docker, "
                    "optionally with filtex-broker as a relay in front of it. Runs until "
                    "SIGTERM or Ctrl-C, then stops both.",
        epilog=EXAMPLES)
    parser.add_argument("broker", choices=sorted(STARTERS), help="the broker to run")
    parser.add_argument("--queue", action="append", default=[], metavar="NAME",
                        help="declare this queue (anycast) on the broker; repeatable")
    parser.add_argument("--relay", metavar="HOST:PORT",
                        help="start filtex-broker in relay mode in front of it, listening here")
    parser.add_argument("--dir", type=Path, metavar="DIR",
                        help="keep the broker's instance and data here (default: a temporary "
                             "directory, removed on exit)")
    parser.add_argument("--fetch-only", action="store_true",
                        help="fetch and unpack the broker's distribution into the cache, then "
                             "exit (nothing is started)")
    parser.add_argument("relay_args", nargs="*", metavar="-- FILTEX_BROKER_ARG",
                        help="further arguments for filtex-broker (after --)")
    return parser


class _Stop:
    """SIGTERM and SIGINT end the wait; the second one is ignored while stopping."""

    def __init__(self) -> None:
        self.event = threading.Event()
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.event.set()


def _start_relay(listen: str, upstream: Upstream, extra: Sequence[str], workdir: Path
                 ) -> subprocess.Popen[bytes]:
    ready = workdir / "relay.ready"
    ready.unlink(missing_ok=True)
    command = [sys.executable, "-m", "filtex_broker", "--listen", listen, "--ready-file",
               str(ready),
               "--upstream", upstream.url]
    if upstream.user is not None and upstream.password is not None:
        command += ["--upstream-user", upstream.user, "--upstream-password", upstream.password]
    command += extra
    # The relay logs to our stderr; it gets no terminal signals of its own (a session of its
    # own), so that Ctrl-C reaches it once, from us, in order; it dies with us if we are killed.
    relay = subprocess.Popen(dying_with_parent(command), start_new_session=True)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if relay.poll() is not None:
            raise RuntimeError(f"filtex-broker exited with {relay.returncode} during start-up")
        if time.monotonic() > deadline:
            relay.terminate()
            raise RuntimeError("filtex-broker did not start listening in 60 s")
        time.sleep(0.05)  # polling the ready file the relay writes once bound
    return relay


def _run(args: argparse.Namespace, workdir: Path, stop: _Stop) -> int:
    distribution, start = STARTERS[args.broker]
    print(f"starting {distribution.artifact} {distribution.version} (fetched from Maven Central "
          "on first use) ...", file=sys.stderr, flush=True)
    upstream = start(workdir, queues=args.queue)
    relay: subprocess.Popen[bytes] | None = None
    try:
        login = ("anonymous" if upstream.user is None
                 else f"user {upstream.user}, password {upstream.password}")
        print(f"{distribution.artifact} {distribution.version}: {upstream.url} ({login}; "
              f"queues: {', '.join(args.queue) or 'none declared'})", flush=True)
        if args.relay is not None:
            relay = _start_relay(args.relay, upstream, args.relay_args, workdir)
            print(f"filtex-broker relay: amqp://{args.relay} in front of it", flush=True)
        print("running; SIGTERM or Ctrl-C stops everything", file=sys.stderr, flush=True)
        while not stop.event.wait(0.5):
            if relay is not None and relay.poll() is not None:
                print(f"filtex-broker exited with {relay.returncode}", file=sys.stderr)
                return 1
            if not upstream.running():
                print(f"{distribution.artifact} exited", file=sys.stderr)
                return 1
        return 0
    finally:
        if relay is not None and relay.poll() is None:
            relay.terminate()
            try:
                relay.wait(30)
            except subprocess.TimeoutExpired:
                relay.kill()
                relay.wait()
        upstream.stop()


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The arguments; everything after the first ``--`` goes to filtex-broker as it is
    (argparse alone gives a ``nargs="*"`` positional nothing once options come between it and
    the broker's name)."""
    argv = list(argv)
    relay_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, relay_args = argv[:cut], argv[cut + 1:]
    args = _parser().parse_args(argv)
    if args.relay_args:
        _parser().error(f"unrecognized arguments: {' '.join(args.relay_args)} (filtex-broker's "
                        "arguments go after --)")
    args.relay_args = relay_args
    if relay_args and args.relay is None:
        _parser().error("arguments after -- are filtex-broker's: they need --relay HOST:PORT")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    reason = java_missing()
    if reason is not None:
        print(f"python -m upstreams: {reason}", file=sys.stderr)
        return 2
    if args.fetch_only:
        distribution = STARTERS[args.broker][0]
        try:
            print(unpacked(distribution))
        except RuntimeError as exc:
            print(f"python -m upstreams: {exc}", file=sys.stderr)
            return 1
        return 0
    stop = _Stop()
    try:
        if args.dir is not None:
            args.dir.mkdir(parents=True, exist_ok=True)
            return _run(args, args.dir, stop)
        with tempfile.TemporaryDirectory(prefix="filtex-upstream-") as scratch:
            return _run(args, Path(scratch), stop)
    except RuntimeError as exc:
        print(f"python -m upstreams: {exc}", file=sys.stderr)
        return 1
