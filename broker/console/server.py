"""The console's HTTP server: aiohttp on its own asyncio loop, in a daemon thread.

aiohttp parses HTTP (nothing here does); each request that needs the broker hands a
function to ``Broker.submit`` and awaits it, so nodes and links are read on the reactor
thread only. Secured (beyond loopback, or whenever TLS and a users file are configured:
:mod:`filtex_broker.console.rules`), every request needs HTTPS and HTTP Basic credentials of a
users-file user with ``admin = true``; password checks (scrypt) run in a worker thread and
a success is remembered for a minute. Every endpoint only reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from aiohttp import BasicAuth, web

from filtex_broker.console.api import (
    DEFAULT_PEEK,
    Describer,
    TestRequest,
    messages_json,
    overview_json,
    parse_limit,
    test_json,
)
from filtex_broker.console.history import History
from filtex_broker.console.rules import console_secured
from filtex_broker.console.snapshot import Inspected, overview, peek
from filtex_broker.security.auth import is_loopback
from filtex_broker.security.tls import TlsSettings, server_context
from filtex_broker.security.users import Users, load_users, verify_password
from filtex_broker.settings import parse_listen

if TYPE_CHECKING:
    from filtex_broker.console.snapshot import Overview, PeekedMessage

__all__ = ["ConsoleServer", "ReactorBroker"]

log = logging.getLogger("filtex.broker.console")

T = TypeVar("T")
REACTOR_TIMEOUT: Final = 10.0
"""Seconds a request waits for the reactor thread before answering 503."""
REMEMBER: Final = 60.0
"""Seconds a verified password is remembered (scrypt is slow on purpose)."""
_STATIC: Final = ("index.html", "console.js", "charts.js", "console.css")
_TYPES: Final = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
_HEADERS: Final = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class ReactorBroker(Inspected, Protocol):
    """The broker as the server needs it: what it reads, and how to run work on its thread."""

    def submit(self, work: Callable[[], T]) -> Future[T]: ...


class _Admins:
    """Who may use a secured console: users-file users with ``admin = true``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._users: Users = load_users(path)
        self._mtime = self._stat()
        self._verified: dict[str, tuple[bytes, float]] = {}
        self._secret = os.urandom(32)

    def _stat(self) -> float:
        try:
            return self.path.stat().st_mtime
        except OSError:
            return 0.0

    def _current(self) -> Users:
        """The users file, re-read when it changed (a bad new file keeps the old one)."""
        mtime = self._stat()
        if mtime != self._mtime:
            self._mtime = mtime
            try:
                self._users = load_users(self.path)
                self._verified.clear()
            except ValueError as exc:
                log.error("console: users file NOT reloaded: %s", exc)
        return self._users

    async def check(self, header: str | None) -> int:
        """200, 401 (no or wrong credentials) or 403 (a user, not an admin)."""
        if not header:
            return 401
        try:
            auth = BasicAuth.decode(header)
        except ValueError:
            return 401
        user = self._current().get(auth.login)
        if user is None or user.password_hash is None:
            return 401
        keyed = hmac.new(self._secret, f"{user.password_hash}\0{auth.password}".encode(),
                         hashlib.sha256).digest()
        remembered = self._verified.get(auth.login)
        now = time.monotonic()
        if not (remembered is not None and remembered[1] > now
                and hmac.compare_digest(remembered[0], keyed)):
            ok = await asyncio.get_running_loop().run_in_executor(
                None, verify_password, auth.password, user.password_hash)
            if not ok:
                return 401
            self._verified[auth.login] = (keyed, now + REMEMBER)
        return 200 if user.admin else 403


class ConsoleServer:
    """``--console HOST:PORT``: started once the broker listens, stopped when it stops."""

    def __init__(self, broker: ReactorBroker) -> None:
        self.broker = broker
        config = broker.config
        self.host, self.port = parse_listen(config.console)
        self.secured = console_secured(config)
        self.admins = _Admins(Path(config.users)) if self.secured else None
        self.ssl = (server_context(TlsSettings(Path(config.tls_cert), Path(config.tls_key),
                                               None, "none")) if self.secured else None)
        self.describer = Describer()
        self.history = History(config.console_sample_interval)
        """The last 15 minutes, sampled whether or not a page is open (``/api/history``)."""
        self.address: tuple[str, int] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._sampler: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        assert self.address is not None
        host = f"[{self.address[0]}]" if ":" in self.address[0] else self.address[0]
        return f"{'https' if self.secured else 'http'}://{host}:{self.address[1]}/"

    # -- the thread and its loop --------------------------------------------------------

    def start(self, timeout: float = 10.0) -> tuple[str, int]:
        """Bind and serve in a daemon thread; returns the bound address (raises if it fails)."""
        bound: Future[tuple[str, int]] = Future()
        self._thread = threading.Thread(target=self._serve, args=(bound,),
                                        name="filtex-console", daemon=True)
        self._thread.start()
        self.address = bound.result(timeout)
        log.info("serving the console on %s%s", self.url,
                 " (TLS, admin users only)" if self.secured else " (loopback, no login)")
        return self.address

    def _serve(self, bound: Future[tuple[str, int]]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._bind(bound))
        except BaseException as exc:
            bound.set_exception(exc)
            loop.close()
            return
        try:
            loop.run_forever()
        finally:
            if self._sampler is not None:
                self._sampler.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(self._sampler)
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
            loop.close()

    async def _bind(self, bound: Future[tuple[str, int]]) -> None:
        app = web.Application(middlewares=[self._guard], client_max_size=256 * 1024)
        app.router.add_get("/", self._page)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/api/overview", self._overview)
        app.router.add_get("/api/history", self._history)
        app.router.add_get("/api/messages", self._messages)
        app.router.add_post("/api/test", self._test)
        # A request still coming in (a browser mid-POST) gets a second, not aiohttp's 60 s:
        # stopping the broker must not wait on a browser.
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        self._runner = runner
        site = web.TCPSite(runner, self.host, self.port, ssl_context=self.ssl)
        await site.start()
        host, port = runner.addresses[0][:2]
        self._sampler = asyncio.get_running_loop().create_task(self._sample_forever())
        bound.set_result((str(host), int(port)))

    async def _sample_forever(self) -> None:
        """A point of history every interval, on a fixed schedule (no drift)."""
        loop = asyncio.get_running_loop()
        broker, interval = self.broker, self.history.interval
        due = loop.time()
        while True:
            # The broker busy or stopping: this point is skipped.
            with contextlib.suppress(web.HTTPServiceUnavailable):
                self.history.add(await self._on_reactor(lambda: overview(broker)))
            due += interval
            due = max(due, loop.time())  # after a stall, no burst of catch-up samples
            await asyncio.sleep(due - loop.time())

    def stop(self) -> None:
        """Stop serving (idempotent; any thread)."""
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
        self._thread = None

    # -- requests -------------------------------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
        """Authentication (secured) or a loopback Host (open: no DNS rebinding), then
        the security headers on every answer."""
        if self.admins is not None:
            status = await self.admins.check(request.headers.get("Authorization"))
            if status == 401:
                return _error(401, "log in as an admin user of the users file", {
                    "WWW-Authenticate": 'Basic realm="filtex console", charset="UTF-8"'})
            if status == 403:
                return _error(403, "this user is not an admin (admin = true in the users file)")
        elif not is_loopback(_host_name(request.host)):
            return _error(403, f"the open console answers loopback names only, not "
                          f"{request.host!r}")
        response = await handler(request)
        response.headers.update(_HEADERS)
        return response

    async def _on_reactor(self, work: Callable[[], T]) -> T:
        future = self.broker.submit(work)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), REACTOR_TIMEOUT)
        except TimeoutError:
            future.cancel()
            raise web.HTTPServiceUnavailable(text="the broker did not answer in time") from None
        except RuntimeError as exc:
            raise web.HTTPServiceUnavailable(text=str(exc)) from None

    async def _page(self, request: web.Request) -> web.StreamResponse:
        return _static_file("index.html")

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in _STATIC:
            return _error(404, f"no static file {name!r}")
        return _static_file(name)

    async def _overview(self, request: web.Request) -> web.StreamResponse:
        broker = self.broker
        state: Overview = await self._on_reactor(lambda: overview(broker))
        return _json(overview_json(state, self.describer))

    async def _history(self, request: web.Request) -> web.StreamResponse:
        return _json(self.history.as_json())

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        node = request.query.get("node")
        if not node:
            return _error(400, "node: which node to peek at (?node=NAME)")
        try:
            limit = parse_limit(request.query.get("limit", str(DEFAULT_PEEK)))
        except ValueError as exc:
            return _error(400, str(exc))
        body = request.query.get("body", "") in ("1", "true", "yes")
        broker = self.broker
        found: list[PeekedMessage] | None = await self._on_reactor(
            lambda: peek(broker, node, limit))
        if found is None:
            return _error(404, f"no node {node!r}")
        return _json(messages_json(node, found, body))

    async def _test(self, request: web.Request) -> web.StreamResponse:
        if request.content_type != "application/json":  # also keeps cross-site forms out
            return _error(415, "send the test as application/json")
        try:
            test = TestRequest.parse(await request.json())
        except (ValueError, UnicodeDecodeError) as exc:
            return _error(400, str(exc))
        found: list[PeekedMessage] | None = None
        if test.node is not None:
            broker, node, limit = self.broker, test.node, test.limit
            found = await self._on_reactor(lambda: peek(broker, node, limit))
            if found is None:
                return _error(404, f"no node {test.node!r}")
        limits = self.broker.config.limits
        answer = await asyncio.get_running_loop().run_in_executor(
            None, test_json, test, limits, found)
        return _json(answer)


def _host_name(host: str | None) -> str:
    """The name in a Host header, without its port (``[::1]:8080`` -> ``::1``)."""
    if not host:
        return ""
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _json(value: Any) -> web.Response:
    return web.Response(text=json.dumps(value, ensure_ascii=False, default=str),
                        content_type="application/json")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    response = web.Response(status=status, text=json.dumps({"error": message}),
                            content_type="application/json", headers=headers)
    response.headers.update(_HEADERS)
    return response


def _static_file(name: str) -> web.Response:
    data = resources.files("filtex_broker.console").joinpath("static", name).read_bytes()
    return web.Response(body=data, content_type=_TYPES[Path(name).suffix], charset="utf-8")
