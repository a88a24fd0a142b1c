"""The compiled Qpid JMS driver, for every test module here (skips without a JDK and Maven)."""

from __future__ import annotations

import pytest

from .jms_support import driver, java_missing


@pytest.fixture(scope="session")
def jms_classpath() -> str:
    reason = java_missing()
    if reason is not None:
        pytest.skip(f"the Qpid JMS tests need a JDK and Maven: {reason}")
    return driver()
