"""Headless Chromium driven by selenium (Debian's ``chromium`` and ``chromium-driver``), for
the console's browser tests; a failed test leaves a screenshot in ``tmp/artifacts``."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("FILTEX_ARTIFACTS", REPO / "tmp" / "artifacts"))
WAIT = 20.0


def chromium_missing() -> str | None:
    """Why no browser test can run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if chromium() is None:
        return "Chromium is not installed (apt-get install chromium)"
    if shutil.which("chromedriver") is None:
        return "chromedriver is not installed (apt-get install chromium-driver)"
    return None


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def start_chrome(width: int = 1400, height: int = 1000) -> Any:
    """A headless Chromium (no sandbox: CI runs as root), driven through chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium() or "chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                     "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


def screenshot_name(nodeid: str) -> Path:
    """Where a failed test's screenshot goes."""
    return ARTIFACTS / (re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid) + ".png")


def wait_until(driver: Any, condition: Callable[[Any], Any], what: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, WAIT, poll_frequency=0.1).until(condition, what)
