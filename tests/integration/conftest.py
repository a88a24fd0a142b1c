"""Integration fixtures: the relay in front of third-party brokers.

Brokers from Maven Central run as child processes (session fixtures in
``tests/conftest.py``); those that come only as container images need a Docker
engine (testcontainers). Without one (these development machines have none)
the ``docker_engine`` fixture skips at once, with the reason, before any image
is pulled or container started.
"""

from __future__ import annotations

import functools
import os

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "docker: needs a reachable Docker engine (testcontainers); skipped without one")


@functools.cache
def docker_unavailable() -> str | None:
    """Why these tests cannot run here, or None when a Docker engine answers."""
    try:
        import docker  # noqa: I001 (docker first: its absence is the likelier reason)
        import testcontainers  # noqa: F401
    except ImportError as exc:
        return f"{exc.name} is not installed (pip install testcontainers)"
    where = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = docker.from_env(timeout=5)
    except Exception as exc:  # docker.errors.DockerException, and any transport error
        return f"no Docker engine reachable at {where}: {exc}"
    try:
        client.ping()
    except Exception as exc:
        return f"no Docker engine reachable at {where}: {exc}"
    finally:
        client.close()
    return None


@pytest.fixture(scope="session")
def docker_engine() -> None:
    reason = docker_unavailable()
    if reason is not None:
        pytest.skip(reason)
