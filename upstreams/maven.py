"""Broker distributions from Maven Central, unpacked once into a cache directory.

Maven fetches the archive into its local repository (``~/.m2``, where a second
fetch costs nothing); the archive is then unpacked once under
``$FILTEX_BROKER_CACHE`` (default ``~/.cache/filtex-proton/brokers``). A file
lock makes concurrent callers (two test sessions, the README's command beside a
test run) wait for one another instead of unpacking over each other.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Distribution", "cache_root", "java_missing", "unpacked"]


@dataclass(frozen=True, slots=True)
class Distribution:
    """A broker's ``bin`` tar.gz on Maven Central."""

    group: str
    artifact: str
    version: str
    top: str
    """The directory the archive unpacks to (its single top-level entry)."""

    @property
    def coordinates(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}:tar.gz:bin"

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}-bin.tar.gz"


def cache_root() -> Path:
    configured = os.environ.get("FILTEX_BROKER_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "filtex-proton" / "brokers"


def java_missing() -> str | None:
    """None when Java and Maven are both on PATH, else what is missing."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if not missing:
        return None
    return (f"{' and '.join(missing)} not found on PATH (the brokers come from Maven Central "
            "and run on Java 17: apt-get install openjdk-17-jre-headless maven)")


def unpacked(distribution: Distribution, timeout: float = 600.0) -> Path:
    """The distribution's home directory, fetching and unpacking it on first use."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    home = root / f"{distribution.artifact}-{distribution.version}"
    with (root / f".{home.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if (home / ".complete").exists():
            return home / distribution.top
        with tempfile.TemporaryDirectory(dir=root) as scratch:
            archive = _fetch(distribution, Path(scratch), timeout)
            target = Path(scratch) / "tree"
            with tarfile.open(archive) as tar:
                tar.extractall(target, filter="tar")
            if home.exists():
                shutil.rmtree(home)  # a half-unpacked tree from an interrupted run
            target.rename(home)
        (home / ".complete").write_text(distribution.coordinates + "\n")
    return home / distribution.top


def _fetch(distribution: Distribution, into: Path, timeout: float) -> Path:
    command = ["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={distribution.coordinates}",
               f"-DoutputDirectory={into}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                          cwd=into)
    archive = into / distribution.file_name
    if done.returncode != 0 or not archive.exists():
        lines = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
        raise RuntimeError(f"Maven could not fetch {distribution.coordinates}: "
                           + (lines[0] if lines else f"exit {done.returncode}"))
    return archive
