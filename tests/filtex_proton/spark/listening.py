"""The TCP sockets a process tree listens on, and what runs in it, read from /proc (Linux),
for the network tests."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import time
from pathlib import Path

PROC = Path("/proc")


def descendants(pid: int) -> set[int]:
    """``pid`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        found.add(current)
        todo.extend(children.get(current, []))
    return found


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    try:
        fds = os.listdir(PROC / str(pid) / "fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(PROC / str(pid) / "fd" / fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _address(hex_address: str) -> tuple[str, int]:
    host, port = hex_address.split(":")
    raw = bytes.fromhex(host)
    # /proc/net/tcp{,6} print each 32-bit word in host (little-endian) order
    packed = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(packed)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address), int(port, 16)


def listening(pids: set[int]) -> set[tuple[str, int]]:
    """(address, port) of every listening TCP socket the processes hold."""
    inodes = set().union(*(_socket_inodes(pid) for pid in pids)) if pids else set()
    found: set[tuple[str, int]] = set()
    for table in ("tcp", "tcp6"):
        for line in (PROC / "net" / table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                found.add(_address(fields[1]))
    return found


def beyond_loopback(sockets: set[tuple[str, int]]) -> set[tuple[str, int]]:
    return {(host, port) for host, port in sockets if not ipaddress.ip_address(host).is_loopback}


def _names(pids: set[int]) -> set[str]:
    """The executables' names (``/proc/PID/comm``) of the processes still there."""
    found = set()
    for pid in pids:
        try:
            found.add((PROC / str(pid) / "comm").read_text().strip())
        except OSError:
            continue
    return found


def run_watching(argv: list[str], env: dict[str, str]) -> tuple[
        subprocess.CompletedProcess[str], set[tuple[str, int]], set[str]]:
    """Run a command and, while it runs, every socket its process tree listens on and the
    names of the processes in that tree."""
    sockets: set[tuple[str, int]] = set()
    names: set[str] = set()
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as process:
        deadline = time.monotonic() + 240
        while process.poll() is None:
            assert time.monotonic() < deadline, "the command did not finish"
            tree = descendants(process.pid)
            sockets |= listening(tree)
            names |= _names(tree)
            time.sleep(0.05)
        out, err = process.communicate()
    return subprocess.CompletedProcess(argv, process.returncode, out, err), sockets, names
