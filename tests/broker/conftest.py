"""Fixtures: a real broker on an ephemeral port, in a background thread, fresh for each test."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from typing import Any

import pytest

from filtex_broker.config import BrokerConfig
from filtex_broker.server import Broker

from .broker_clients import HIGH_DESCRIPTORS, BrokerFactory, DiskFull, RunningBroker
from .browser import chromium_missing, screenshot_name, start_chrome


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Keep each phase's report on the test item (the browser fixture saves a screenshot
    when the test itself failed)."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture
def broker_factory() -> Iterator[BrokerFactory]:
    """Start brokers with config overrides; all are stopped (and must stop) at teardown."""
    started: list[RunningBroker] = []

    def make(**overrides: Any) -> RunningBroker:
        # A test's clients are not pumped at teardown, so none answers the broker's close:
        # the grace would only be waited out (5 s by default, per broker).
        overrides.setdefault("shutdown_grace", 0.5)
        config = BrokerConfig(listen=(("127.0.0.1", 0),), **overrides)
        broker = Broker(config)
        thread = broker.start_in_thread()
        running = RunningBroker(broker, thread)
        started.append(running)
        return running

    yield make
    for running in started:
        running.broker.stop()
        running.thread.join(60)
        assert not running.thread.is_alive(), "the broker did not stop"
        assert running.broker.error is None


@pytest.fixture
def chrome(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Headless Chromium (tests/broker/browser.py); a failed test's screenshot is saved in
    tmp/artifacts before the browser goes."""
    reason = chromium_missing()
    if reason is not None:
        pytest.skip(f"browser tests need Chromium and chromedriver: {reason}")
    driver = start_chrome()
    try:
        yield driver
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            path = screenshot_name(request.node.nodeid)
            path.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(path))
            print(f"screenshot of the failed browser test: {path}")
        driver.quit()


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> RunningBroker:
    return broker_factory()


@pytest.fixture
def disk_full(monkeypatch: pytest.MonkeyPatch) -> DiskFull:
    """Set ``.full`` to make the durable store's writes fail as on a full disk."""
    from filtex_broker.store import log as store

    state = DiskFull()
    real_fsync = store.os.fsync

    def fsync(fd: int) -> None:
        if state.full:
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(store.os, "fsync", fsync)
    return state


@pytest.fixture
def high_descriptors() -> Iterator[list[int]]:
    """Hold open enough descriptors that the next sockets get numbers above 1023 (a test
    may close them early: they are the list it is given)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < HIGH_DESCRIPTORS + 200:
        pytest.skip(f"the open-files limit ({hard}) is too low to reach descriptor "
                    f"{HIGH_DESCRIPTORS}")
    if soft != resource.RLIM_INFINITY and soft < HIGH_DESCRIPTORS + 200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (HIGH_DESCRIPTORS + 200, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(HIGH_DESCRIPTORS)]
    try:
        yield held
    finally:
        while held:
            os.close(held.pop())
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
