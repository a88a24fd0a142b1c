"""The event loop, chosen at start-up: the fast one when it is safe, else proton's stock one.

Like uvicorn's ``loops/auto.py``: ``--event-loop auto`` (the default) runs the
fast loop (:class:`filtex_broker.loop.fast.FastContainer`) only when the installed
python-qpid-proton is one it is tested with (:data:`TESTED_VERSIONS`) and
:func:`filtex_broker.loop.proton_internals.check` finds every private name it uses; otherwise
it logs a warning saying why and runs :class:`filtex_broker.loop.stock.StockContainer`, proton's own
``Container`` plus the two calls the broker makes of any loop. ``fast`` insists
(an untested version only warns; a failed check is an error); ``stock`` never
tries.

Both loops give the broker the same small interface
(:class:`filtex_broker.loop.contract.BrokerContainer`).
"""

from __future__ import annotations

import logging
from typing import Any

from filtex_broker.loop import proton_internals
from filtex_broker.loop.contract import EVENT_LOOPS
from filtex_broker.loop.stock import StockContainer

__all__ = ["choose_loop", "make_container"]

log = logging.getLogger("filtex.broker")


def choose_loop(mode: str = "auto") -> tuple[str, str]:
    """``("fast" | "stock", why)`` for ``mode``; raises InternalsError if ``fast`` cannot run,
    or if neither can (the C bindings both need are missing)."""
    if mode not in EVENT_LOOPS:
        raise ValueError(f"event loop {mode!r} is not one of {', '.join(EVENT_LOOPS)}")
    proton_internals.require_engine()
    if mode == "stock":
        return "stock", "--event-loop stock"
    version = proton_internals.installed_version()
    problems = proton_internals.check()
    if mode == "fast":
        if problems:
            raise proton_internals.InternalsError(
                f"--event-loop fast cannot run: {problems[0]}")
        if not proton_internals.tested(version):
            return "fast", (f"--event-loop fast on python-qpid-proton {version}, which it is "
                            f"not tested with (tested: "
                            f"{', '.join(proton_internals.TESTED_VERSIONS)})")
        return "fast", "--event-loop fast"
    if problems:
        return "stock", f"the fast event loop's start-up check failed: {problems[0]}"
    if not proton_internals.tested(version):
        return "stock", (f"python-qpid-proton {version} is not a version the fast event loop "
                         f"is tested with ({', '.join(proton_internals.TESTED_VERSIONS)})")
    return "fast", f"python-qpid-proton {version} (tested)"


def make_container(mode: str, *handlers: Any, **kwargs: Any) -> Any:
    """The container for ``mode`` (see :func:`choose_loop`), with a log line saying which."""
    loop, why = choose_loop(mode)
    if loop == "fast":
        from filtex_broker.loop.fast import FastContainer  # only imported when it can work
        if why.startswith("--event-loop fast on"):
            log.warning("%s", why)
        log.info("event loop: fast (%s)", why)
        return FastContainer(*handlers, **kwargs)
    if mode == "stock":
        log.info("event loop: stock (%s)", why)
    else:
        log.warning("event loop: proton's stock Container, several times slower: %s; "
                    "--event-loop stock silences this", why)
    return StockContainer(*handlers, **kwargs)
