"""CI: the README's broker, started by its own command line, serves the README's Python examples.

Waits (up to a deadline) for the broker that ``pip install . && filtex-broker ...`` starts, then
runs README.md's sender snippet and its filtered receiver snippet as they are written, and
checks that the receiver got the large EU order and nothing else.

    python3 .ci/smoke_broker.py HOST:PORT SECONDS PID   # PID: the shell running the README line
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def wait_listening(host: str, port: int, seconds: float, pid: int) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            sys.exit(f"the README's command exited before {host}:{port} listened")
        try:
            socket.create_connection((host, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.5)
    sys.exit(f"nothing listened on {host}:{port} within {seconds:.0f} s")


def snippet(marker: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)
    return next(block for block in blocks if marker in block and "127.0.0.1:5672" in block)


def run(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=False)
    if result.returncode != 0:
        sys.exit(f"a README snippet failed:\n{code}\n{result.stderr}")
    return result.stdout


def main() -> int:
    address, seconds, pid = sys.argv[1:]
    host, port = address.rsplit(":", 1)
    wait_listening(host, int(port), float(seconds), int(pid))
    run(snippet('create_sender("orders")'))
    received = run(snippet("big-eu"))
    print("README receiver printed:", received.strip())
    if "'region': 'EU'" not in received or "1500" not in received:
        sys.exit("the README's filtered receiver did not get the large EU order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
