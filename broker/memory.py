"""How much memory the broker may use for messages: ``--max-memory``, and its default.

The default is :data:`DEFAULT_SHARE` of what the process may have: the cgroup's limit when one is
set (v2 ``memory.max``, v1 ``memory.limit_in_bytes``, the tightest along the process's cgroup
path), else the machine's physical memory. The rest is for the interpreter, the connections'
buffers, and what the accounting does not see (docs/BROKER.md, "Flow control and memory").
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Final

__all__ = ["DEFAULT_SHARE", "available_memory", "cgroup_memory_limit", "default_max_memory",
           "physical_memory"]

DEFAULT_SHARE: Final = 0.4
"""Share of the machine's (or cgroup's) memory the broker's messages may use by default (as
RabbitMQ's default memory high watermark)."""
_UNLIMITED_V1: Final = 1 << 60
"""cgroup v1 writes "no limit" as a huge number (PAGE_COUNTER_MAX pages): anything above this."""


def physical_memory() -> int:
    """The machine's physical memory, in bytes."""
    return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))


def _read_limit(path: Path) -> int | None:
    """A cgroup limit file's value: None if absent, unreadable or unlimited."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    if not text or text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 < value < _UNLIMITED_V1 else None


def cgroup_memory_limit(root: Path = Path("/sys/fs/cgroup"),
                        self_cgroup: Path = Path("/proc/self/cgroup")) -> int | None:
    """The tightest memory limit on this process's cgroup and its ancestors, or None.

    v2: the ``0::/path`` line of ``/proc/self/cgroup`` names the cgroup under ``root``, whose
    ``memory.max`` (and its parents') is read. v1: the ``N:memory:/path`` line names it under
    ``root/memory``, with ``memory.limit_in_bytes``. Inside a container the path may not exist
    under ``root`` (its own cgroup is mounted as the root): the root's file is read then.
    """
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    places: list[tuple[Path, str, str]] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # v2, the unified hierarchy
            places.append((root, path, "memory.max"))
        elif "memory" in controllers.split(","):  # v1
            places.append((root / "memory", path, "memory.limit_in_bytes"))
    if not places:
        places = [(root, "/", "memory.max"), (root / "memory", "/", "memory.limit_in_bytes")]
    limits: list[int] = []
    for base, path, name in places:
        relative = PurePosixPath(path.strip() or "/").relative_to("/")
        while True:
            if (limit := _read_limit(base / relative / name)) is not None:
                limits.append(limit)
            if relative == PurePosixPath("."):
                break
            relative = relative.parent
    return min(limits) if limits else None


def available_memory() -> int:
    """What this process may use: the cgroup's limit if set and lower, else physical memory."""
    physical = physical_memory()
    limit = cgroup_memory_limit()
    return physical if limit is None else min(limit, physical)


def default_max_memory() -> int:
    """``--max-memory`` when not set: :data:`DEFAULT_SHARE` of :func:`available_memory`."""
    return int(available_memory() * DEFAULT_SHARE)
