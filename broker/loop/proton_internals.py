"""Every private part of python-qpid-proton the broker touches, in one place, checked at start.

python-qpid-proton's public API is its wrapper classes (``Link``, ``Delivery``,
``Container``...). The broker also uses what is underneath, for speed:

* the C bindings (``cproton_ffi.lib`` / ``ffi``): Proton-C's own functions,
  called with raw ``pn_link_t *`` / ``pn_delivery_t *`` pointers on the
  per-message path (:mod:`filtex_broker.loop.engine`, producers, consumers, the relay);
* the wrappers' ``_impl`` pointer;
* the reactor's and IO handler's private state, which the fast event loop
  (:mod:`filtex_broker.loop.fast`, :mod:`filtex_broker.loop.poller`) reads and drives, and the
  socket hand-over of secured listeners (:mod:`filtex_broker.security.gate`).

No other module imports ``cproton_ffi`` or ``proton._*``, or reads a private
attribute of a proton object it did not subclass. :func:`check` verifies at
start-up that every name listed here exists in the installed python-qpid-proton;
:mod:`filtex_broker.loop.auto` runs the fast loop only when the check passes and the
version is one in :data:`TESTED_VERSIONS`, and otherwise proton's stock
``Container``. The C bindings are needed by both loops: without them the broker
cannot start, and :func:`require_engine` says so, naming the tested versions.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any, Final

__all__ = [
    "ENGINE_FUNCTIONS",
    "IO",
    "LOOP_ATTRIBUTES",
    "TESTED_VERSIONS",
    "Acceptor",
    "ConnectSelectable",
    "IOHandler",
    "InternalsError",
    "accept",
    "bind_transport",
    "check",
    "delegate",
    "detach_transport",
    "engine_problems",
    "ffi",
    "impl",
    "installed_version",
    "io_base",
    "lib",
    "listen",
    "listening_address",
    "loop_problems",
    "mark_accepted",
    "require_engine",
    "set_selector",
    "tested",
    "transport_of",
    "unbind_transport",
    "update_io",
]

TESTED_VERSIONS: Final = ("0.39.0", "0.40.0")
"""python-qpid-proton releases the fast loop is tested with (pyproject pins this range)."""

ENGINE_FUNCTIONS: Final = (
    # events (the fast loop)
    "pn_collector_peek", "pn_collector_pop", "pn_collector_more", "pn_event_type",
    "pn_event_link", "pn_event_delivery", "pn_event_transport", "pn_event_context",
    "pn_incref", "pn_decref",
    # transports (the fast loop's IO)
    "pn_transport_capacity", "pn_transport_pending", "pn_transport_closed",
    "pn_transport_push", "pn_transport_peek", "pn_transport_pop",
    # links and deliveries (producers, consumers, the relay)
    "pn_delivery", "pn_link_send", "pn_link_recv", "pn_link_advance", "pn_link_credit",
    "pn_link_flow", "pn_link_get_drain", "pn_link_drained", "pn_link_drain",
    "pn_link_set_drain", "pn_link_draining", "pn_delivery_pending",
    "pn_delivery_partial", "pn_delivery_aborted", "pn_delivery_readable",
    "pn_delivery_settled", "pn_delivery_settle", "pn_delivery_update",
    "pn_delivery_remote_state", "pn_delivery_remote", "pn_delivery_local",
    "pn_disposition_is_failed", "pn_disposition_is_undeliverable",
    "pn_disposition_set_failed", "pn_disposition_set_undeliverable",
    "pn_disposition_annotations", "pn_data_copy",
    # constants
    "PN_DELIVERY", "PN_TRANSPORT", "PN_LINK_FLOW", "PN_EOS", "PN_ACCEPTED", "PN_REJECTED",
    "PN_RELEASED", "PN_MODIFIED",
)
"""What the broker calls in ``cproton_ffi.lib`` (both loops need these)."""

LOOP_ATTRIBUTES: Final = {
    "Container": ("_collector", "_selectables", "_timers", "_yield", "_stop", "_previous",
                  "_handler", "_global_handler", "_selectable", "timer_deadline", "mark",
                  "yield_", "push_event", "now", "timeout"),
    "GlobalOverrides": ("base",),
    "IOHandler": ("_selector", "update"),
    "IO.Selector": ("_reading", "_writing", "_selectables", "_deadline", "update_deadline",
                    "add", "update", "select"),
    "Selectable": ("_delegate", "readable", "writable", "expired", "terminate",
                   "is_terminal", "handler"),
    "Wrapper": ("_impl",),
}
"""Private state the fast loop (and the secured listeners' hand-over) reads or sets."""


class InternalsError(RuntimeError):
    """python-qpid-proton lacks something the broker needs; the message names the versions."""


# -- the private modules, imported once; None when missing (check() reports it) --------------

try:
    from cproton_ffi import ffi as _ffi  # type: ignore[import-not-found]
    from cproton_ffi import lib as _lib
except ImportError as exc:  # pragma: no cover - only with an unsupported python-qpid-proton
    _ffi = _lib = None
    _ENGINE_IMPORT_ERROR: str | None = f"cannot import cproton_ffi ({exc})"
else:
    _ENGINE_IMPORT_ERROR = None

try:
    from proton._handlers import ConnectSelectable, IOHandler
    from proton._io import IO
    from proton._reactor import Acceptor
    _LOOP_IMPORT_ERROR: str | None = None
except ImportError as exc:  # pragma: no cover - only with an unsupported python-qpid-proton
    ConnectSelectable = IOHandler = IO = Acceptor = None  # type: ignore[assignment,misc]
    _LOOP_IMPORT_ERROR = f"cannot import proton._handlers / proton._io ({exc})"

ffi: Final[Any] = _ffi
lib: Final[Any] = _lib


# -- versions and the check ----------------------------------------------------------------

def installed_version() -> str:
    """The installed python-qpid-proton version ('unknown' if not found)."""
    try:
        return importlib.metadata.version("python-qpid-proton")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def tested(version: str | None = None) -> bool:
    """Whether ``version`` (default: the installed one) is one the fast loop is tested with."""
    return (installed_version() if version is None else version) in TESTED_VERSIONS


def _tested_text() -> str:
    return (f"python-qpid-proton {installed_version()} is installed; the broker is tested "
            f"with {', '.join(TESTED_VERSIONS)}")


def engine_problems() -> list[str]:
    """What is missing from the C bindings (both loops need them)."""
    if _ENGINE_IMPORT_ERROR is not None or _lib is None:
        return [_ENGINE_IMPORT_ERROR or "cproton_ffi is missing"]
    problems = [f"cproton_ffi.lib.{name}" for name in ENGINE_FUNCTIONS if not hasattr(_lib, name)]
    from proton import Connection

    pointer = getattr(Connection(), "_impl", None)
    if not isinstance(pointer, _ffi.CData):  # a SWIG build (before 0.39) with a stray cproton_ffi
        problems.append(f"proton's wrappers hold {type(pointer).__name__}, not cproton_ffi "
                        "pointers")
    return problems


def require_engine() -> None:
    """Raise :class:`InternalsError` unless every C function the broker calls is there."""
    problems = engine_problems()
    if problems:
        raise InternalsError(f"{_tested_text()}; missing: {', '.join(problems)} "
                             "(install a tested version: pip install "
                             f"'python-qpid-proton>={TESTED_VERSIONS[0]},<0.41')")


def _objects() -> dict[str, Any]:
    """One live object (or class) per entry of :data:`LOOP_ATTRIBUTES`."""
    import socket

    from proton import Connection
    from proton.reactor import Container

    container: Any = Container()
    sock = socket.socket()
    try:
        selectable = container.selectable(delegate=sock)
        return {"Container": container, "GlobalOverrides": container.global_handler,
                "IOHandler": container.global_handler.base, "IO.Selector": IO.Selector(),
                "Selectable": selectable, "Wrapper": Connection()}
    finally:
        sock.close()


def loop_problems() -> list[str]:
    """What the fast loop needs and the installed python-qpid-proton lacks (empty: all there)."""
    problems = engine_problems()
    if _LOOP_IMPORT_ERROR is not None:
        return [*problems, _LOOP_IMPORT_ERROR]
    try:
        objects = _objects()
    except Exception as exc:  # a changed constructor is a failed check, not a crash
        return [*problems, f"cannot build proton's objects to check them: {exc!r}"]
    for owner, names in LOOP_ATTRIBUTES.items():
        target = objects[owner]
        problems.extend(f"{owner}.{name}" for name in names if not hasattr(target, name))
    return problems


def check() -> list[str]:
    """The start-up check of the fast loop: one line per missing name, naming the versions."""
    problems = loop_problems()
    return [f"{_tested_text()}; missing: {', '.join(problems)}"] if problems else []


# -- private attributes of proton objects, behind names ------------------------------------

def impl(wrapper: Any) -> Any:
    """The raw C pointer under a proton wrapper (``Link``, ``Delivery``, ``Session``...)."""
    return wrapper._impl


def delegate(selectable: Any) -> Any:
    """The socket (or our TLS socket) under a proton selectable."""
    return selectable._delegate


def transport_of(selectable: Any) -> Any:
    """The transport bound to a selectable, or None (listeners, timers, our waker)."""
    return selectable.__dict__.get("_transport")


def io_base(container: Any) -> Any:
    """proton's ``IOHandler`` inside a container's global handler (``GlobalOverrides``)."""
    return container.global_handler.base


def set_selector(io_handler: Any, make: Any) -> Any:
    """Replace the IO handler's selector by ``make()``, keeping what it watches."""
    old = io_handler._selector
    selector = make()
    for selectable in list(old._selectables):
        selector.add(selectable)
    io_handler._selector = selector
    return selector


def listen(host: str, port: int) -> Any:
    """A listening, non-blocking socket (proton's ``IO.listen``)."""
    return IO.listen(host, port)


def accept(selectable: Any) -> Any:
    """``(socket, address)`` accepted on a listening selectable (proton's ``IO.accept``)."""
    return IO.accept(selectable)


def unbind_transport(selectable: Any) -> None:
    """Mark a selectable as having no transport (proton's IO handler looks for one)."""
    selectable._transport = None


def bind_transport(selectable: Any, transport: Any) -> None:
    """Tie a server transport to a selectable, both ways, as proton's ``Acceptor`` does."""
    selectable._transport = transport
    transport._selectable = selectable


def detach_transport(selectable: Any, transport: Any) -> None:
    """Undo :func:`bind_transport` (the socket is closing)."""
    selectable._transport = None
    transport._selectable = None


def mark_accepted(connection: Any, acceptor: Any) -> None:
    """Tell proton a connection already has its socket (it then connects nothing)."""
    connection._acceptor = acceptor


def update_io(transport: Any, selectable: Any, now: float) -> None:
    """What the transport wants now, told to the selector (proton's ``IOHandler.update``)."""
    IOHandler.update(transport, selectable, now)


def listening_address(acceptor: Any) -> Any:
    """``(host, port)`` a listener (proton's ``Acceptor`` or ours) is bound to."""
    return acceptor._selectable.getsockname()
