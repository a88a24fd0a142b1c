"""Start Debian's RabbitMQ 3.10 as an ordinary process under a temporary directory.

Everything (node name, ports, mnesia, logs, Erlang cookie) lives under the
directory, so a test session (``tests/relay``) or a benchmark (``bench/bench_relay.py``)
can run its own node on free ports without root and without touching a system-wide
RabbitMQ. It lives in ``bench/`` so that the benchmark need not import the tests;
``tests/relay/relay_rabbit.py`` re-exports it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["RABBIT_BIN", "Rabbit", "ServerCerts", "cpu_list", "free_port", "rabbit_available",
           "start_rabbit"]

RABBIT_BIN = Path("/usr/lib/rabbitmq/bin")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rabbit_available() -> str | None:
    """None if RabbitMQ can be started here, else why not."""
    if not (RABBIT_BIN / "rabbitmq-server").exists():
        return "RabbitMQ is not installed (apt-get install -y rabbitmq-server)"
    if shutil.which("erl") is None and not Path("/usr/lib/erlang/bin/erl").exists():
        return "Erlang (erl) is not installed"
    return None


class ServerCerts(Protocol):
    """The files a TLS listener needs (the relay tests' ``Certs`` has them)."""

    @property
    def ca(self) -> Path: ...

    @property
    def server_cert(self) -> Path: ...

    @property
    def server_key(self) -> Path: ...


@dataclass
class Rabbit:
    process: subprocess.Popen[bytes]
    port: int
    base: Path
    epmd_port: int
    env: dict[str, str]
    tls_port: int | None = None
    """The AMQPS listener (TLS; client certificates are checked when presented)."""
    cpus: str | None = None
    """``taskset`` CPU list the node is confined to (None: anywhere)."""

    @property
    def url(self) -> str:
        return f"amqp://127.0.0.1:{self.port}"

    def tls_url(self, host: str = "localhost") -> str:
        assert self.tls_port is not None, "this node has no TLS listener"
        return f"amqps://{host}:{self.tls_port}"

    def stop(self) -> None:
        """Stop the node (SIGTERM: it shuts down cleanly, durable messages are kept)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        # The node started its own epmd (a daemon outside our process group) on its own port.
        epmd = shutil.which("epmd")
        if epmd is not None:
            subprocess.run([epmd, "-port", str(self.epmd_port), "-kill"], capture_output=True,
                           timeout=10, check=False)

    def restart(self, timeout: float = 60.0) -> None:
        """Stop and boot the same node again: same ports, same data directory."""
        self.stop()
        self.process = _boot(self.base, self.env, self.cpus)
        _wait_ready(self, timeout)

    def declare_durable_queue(self, name: str) -> str:
        """Declare a durable queue (the AMQP 1.0 plugin's ``/queue/NAME`` ones are transient,
        lost with their messages on a restart); its address, ``/amq/queue/NAME``."""
        assert name.isidentifier(), "kept simple: the name goes into an Erlang expression"
        expression = (f'rabbit_amqqueue:declare(rabbit_misc:r(<<"/">>, queue, <<"{name}">>), '
                      'true, false, [], none, <<"filtex-tests">>).')
        done = subprocess.run([str(RABBIT_BIN / "rabbitmqctl"), "eval", expression],
                              env=self.env, capture_output=True, text=True, timeout=120,
                              check=False)
        if done.returncode != 0 or "{new," not in done.stdout:
            raise RuntimeError(f"declaring queue {name} failed: {done.stdout} {done.stderr}")
        return f"/amq/queue/{name}"

    def log_tail(self) -> str:
        texts = []
        for path in sorted(self.base.glob("log/*.log")):
            texts.append(path.read_text(errors="replace")[-3000:])
        return "\n".join(texts)


def _boot(base: Path, env: dict[str, str], cpus: str | None = None,
          ) -> subprocess.Popen[bytes]:
    out = (base / "stdout.log").open("ab")
    # taskset execs the script: the process is the node itself (rabbitmq-server execs erl)
    launcher = ["taskset", "-c", cpus] if cpus is not None else []
    return subprocess.Popen(
        [*launcher, str(RABBIT_BIN / "rabbitmq-server")], env=env, stdout=out,
        stderr=subprocess.STDOUT, start_new_session=True,
    )


def _wait_ready(rabbit: Rabbit, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if rabbit.process.poll() is not None:
            raise RuntimeError(f"rabbitmq-server exited with {rabbit.process.returncode}: "
                               + (rabbit.base / "stdout.log").read_text(errors="replace")[-2000:])
        if _amqp_ready(rabbit.port):
            return
        time.sleep(0.3)  # polling the node's boot
    rabbit.stop()
    raise RuntimeError("rabbitmq-server did not accept AMQP 1.0 in time: "
                       + (rabbit.base / "stdout.log").read_text(errors="replace")[-2000:])


def start_rabbit(base: Path, timeout: float = 60.0, certs: ServerCerts | None = None,
                 cpus: str | None = None) -> Rabbit:
    """Boot a node with the AMQP 1.0 plugin on free ports (and a TLS listener with
    ``certs``); raises RuntimeError if it fails. ``cpus``: a ``taskset`` CPU list the node
    is confined to, with one Erlang scheduler per CPU in it (a benchmark's upstream on cores
    of its own, as on a host of its own)."""
    base.mkdir(parents=True, exist_ok=True)
    port, dist, epmd = free_port(), free_port(), free_port()
    tls_port = free_port() if certs is not None else None
    (base / "enabled_plugins").write_text("[rabbitmq_amqp1_0].\n")
    conf = (
        "loopback_users = none\n"
        f"listeners.tcp.default = {port}\n"
        "vm_memory_high_watermark.relative = 0.2\n"
        "disk_free_limit.absolute = 50MB\n"
    )
    if certs is not None:
        conf += (
            f"listeners.ssl.default = {tls_port}\n"
            f"ssl_options.cacertfile = {certs.ca}\n"
            f"ssl_options.certfile = {certs.server_cert}\n"
            f"ssl_options.keyfile = {certs.server_key}\n"
            "ssl_options.verify = verify_peer\n"
            "ssl_options.fail_if_no_peer_cert = false\n"
        )
    (base / "rabbitmq.conf").write_text(conf)
    (base / "rabbitmq-env.conf").write_text("")
    home = base / "home"
    home.mkdir(exist_ok=True)
    node = f"filtex{port}@localhost"
    env = dict(os.environ)
    env.update({
        "HOME": str(home),
        "RABBITMQ_CONF_ENV_FILE": str(base / "rabbitmq-env.conf"),
        "RABBITMQ_NODENAME": node,
        "RABBITMQ_USE_LONGNAME": "false",
        "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist),
        "ERL_EPMD_PORT": str(epmd),
        "RABBITMQ_PID_FILE": str(base / "rabbit.pid"),
    })
    if cpus is not None:
        schedulers = len(cpu_list(cpus))
        env["RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS"] = f"+S {schedulers}:{schedulers}"
    rabbit = Rabbit(_boot(base, env, cpus), port, base, epmd, env, tls_port, cpus)
    _wait_ready(rabbit, timeout)
    return rabbit


def cpu_list(cpus: str) -> set[int]:
    """The CPUs of a ``taskset -c`` list such as ``0`` or ``0,2-3``."""
    chosen: set[int] = set()
    for part in cpus.split(","):
        low, _, high = part.partition("-")
        chosen.update(range(int(low), int(high or low) + 1))
    return chosen


def _amqp_ready(port: int) -> bool:
    """The AMQP 1.0 plugin answers a protocol header with its own."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"AMQP\x03\x01\x00\x00")
            return sock.recv(8).startswith(b"AMQP")
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    """``python bench/rabbit_node.py``: a private node to try the relay against, until Ctrl-C."""
    import argparse
    import sys
    import tempfile

    parser = argparse.ArgumentParser(
        prog="python bench/rabbit_node.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Start Debian's RabbitMQ 3.10 with its AMQP 1.0 plugin as an ordinary "
        "process (no root, no system-wide node), print its URL, run until SIGTERM or Ctrl-C.",
        epilog="example:\n  python bench/rabbit_node.py --queue orders\n"
               "  # then, in another terminal, with the URL it printed:\n"
               "  filtex-broker --upstream amqp://127.0.0.1:PORT --listen 127.0.0.1:5672")
    parser.add_argument("--queue", action="append", default=[], metavar="NAME",
                        help="declare this durable queue; its address is /amq/queue/NAME")
    parser.add_argument("--dir", type=Path, metavar="DIR",
                        help="keep the node's files here (default: a temporary directory)")
    args = parser.parse_args(argv)
    reason = rabbit_available()
    if reason is not None:
        print(f"python bench/rabbit_node.py: {reason}", file=sys.stderr)
        return 2
    bad = [name for name in args.queue if not name.isidentifier()]
    if bad:
        parser.error(f"--queue {bad[0]!r}: letters, digits and _ only")
    base = args.dir or Path(tempfile.mkdtemp(prefix="filtex-rabbit-"))
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    rabbit = None
    try:
        rabbit = start_rabbit(base)
        print(f"RabbitMQ {rabbit.url} (AMQP 1.0), files in {base}", flush=True)
        for name in args.queue:
            print(f"queue {name}: address {rabbit.declare_durable_queue(name)}", flush=True)
        while rabbit.process.poll() is None:
            time.sleep(1)  # waiting for a signal
        print("python bench/rabbit_node.py: the node stopped on its own", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except (RuntimeError, OSError) as exc:
        print(f"python bench/rabbit_node.py: {exc}", file=sys.stderr)
        return 1
    finally:
        for number in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C waits for the stop
            signal.signal(number, signal.SIG_IGN)
        if rabbit is not None:
            rabbit.stop()
        if args.dir is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
