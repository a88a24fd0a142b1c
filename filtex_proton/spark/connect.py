"""Spark Connect: the pipeline against a running Spark, with no JVM in this process.

A Spark Connect server (``sbin/start-connect-server.sh`` of a Spark installation, or a hosted
Spark's remote sessions) plans and runs the queries; this process builds them and sends them
over gRPC to ``sc://HOST:PORT``. For a query to run there (docs/ARCHIVE.md, Spark Connect):

- this process reaches the server's gRPC port (15002 unless the server chose another);
- the server reads the archive's files at the path given (the client chooses the files first
  where it can read the archive too: :meth:`~filtex_proton.spark.plan.Plan.select`);
- what the engine evaluates (filters without an exact Spark translation, and every irregular
  row) runs in the server's Python workers, which then import filtex_proton, under the same
  Python minor version as this one (a UDF travels pickled).

PySpark serves one kind of session per process: once a Connect session is made here,
``pyspark.sql.functions`` builds Connect columns, as after ``SparkSession.builder.remote``.

This is the one module that relies on PySpark's Connect client beyond its documented API (the
mode switch :data:`CONNECT_MODE`, the client's retry policies and channel builder);
:func:`internals_problems` checks all of it before a session is made, so that another PySpark
gives one line naming what it lacks instead of a traceback halfway through a query.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, cast

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["CONNECT_MODE", "CONNECT_SETTINGS", "ConnectError", "connect_session",
           "internals_problems", "lacks_filtex", "missing_client_packages", "other_python",
           "said_in_one_line", "server_report"]

CONNECT_MODE: Final = "SPARK_CONNECT_MODE_ENABLED"
"""PySpark's switch between its two kinds of session in one process, an environment variable
that ``pyspark.sql.utils.is_remote`` reads: while it is set, ``pyspark.sql.functions`` builds
Connect columns, which only a Connect session runs; unset, classic ones."""

CONNECT_SETTINGS: dict[str, str] = {"spark.sql.session.timeZone": "UTC"}
"""What a Connect session gets unless the caller's config says otherwise (session settings
only: the server's own, such as its UI or addresses, are the server's business)."""

_FIRST_CALL_ATTEMPTS: Final = 3
"""Tries of the first call before the server counts as unreachable (about 1.5 s): PySpark's
own policy, kept for the queries, waits 10 minutes for a server to come back."""

_MISSING: Final = re.compile(r"No module named '(filtex_proton[\w.]*)'")
_OTHER_PYTHON: Final = re.compile(r"Python in worker has different version: (\d+\.\d+) "
                                  r"than that in driver: (\d+\.\d+)")

_CLIENT_MEMBERS: Final = ("close", "is_closed", "get_retry_policies", "set_retry_policies")
_POLICY_PARAMETERS: Final = ("max_retries", "initial_backoff", "max_backoff")


class ConnectError(Exception):
    """The server cannot be used: a URL that is not one, nobody answering, a refused setting."""


def missing_client_packages() -> str | None:
    """What the Spark Connect client lacks here (PySpark's message), or ``None``."""
    try:
        from pyspark.sql.connect.utils import check_dependencies

        check_dependencies()
    except ImportError as exc:
        return str(exc).strip().splitlines()[0]
    return None


def internals_problems() -> list[str]:
    """What this module relies on that the installed PySpark's Connect client lacks, one line
    each (empty: all there). Restores :data:`CONNECT_MODE` as it found it."""
    try:
        from pyspark.sql.connect.client import DefaultChannelBuilder, SparkConnectClient
        from pyspark.sql.connect.client.retries import DefaultPolicy
        from pyspark.sql.utils import is_remote
    except ImportError as exc:
        return [f"cannot import {exc.name or exc}"]
    problems = [f"SparkConnectClient.{name}" for name in _CLIENT_MEMBERS
                if not hasattr(SparkConnectClient, name)]
    parameters = inspect.signature(DefaultPolicy).parameters
    problems += [f"DefaultPolicy({name}=)" for name in _POLICY_PARAMETERS
                 if name not in parameters]
    if not callable(DefaultChannelBuilder):
        problems.append("DefaultChannelBuilder")
    before = os.environ.get(CONNECT_MODE)
    os.environ[CONNECT_MODE] = "1"
    try:
        if not is_remote():
            problems.append(f"is_remote() does not follow ${CONNECT_MODE}")
    finally:
        if before is None:
            os.environ.pop(CONNECT_MODE, None)
        else:
            os.environ[CONNECT_MODE] = before
    return problems


def _details(exc: BaseException) -> str:
    """The one line of a gRPC failure worth showing (its ``details``), else the first line."""
    text = str(exc)
    found = re.search(r'details = "([^"]*)"', text)
    if found:
        return found.group(1)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


@contextlib.contextmanager
def _impatient(session: SparkSession) -> Iterator[None]:
    """The first calls give up after a few quick tries, and then close the session (nothing
    is left to wait on at exit); PySpark's patience comes back after they succeed."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    client = session.client
    patient = client.get_retry_policies()
    client.set_retry_policies([DefaultPolicy(max_retries=_FIRST_CALL_ATTEMPTS,
                                             initial_backoff=100, max_backoff=1000)])
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*RETRIES_EXCEEDED")
            yield
    except BaseException:
        client.close()
        session.stop()
        raise
    client.set_retry_policies(patient)


def _release(session: SparkSession) -> None:
    """At exit: the session released on the server, quickly or not at all (PySpark's own exit
    handler, which runs after this one and then finds the session closed, would retry for 10
    minutes against a server that is gone)."""
    from pyspark.sql.connect.client.retries import DefaultPolicy

    client = session.client
    if client.is_closed:
        return
    client.set_retry_policies([DefaultPolicy(max_retries=1, initial_backoff=100)])
    with warnings.catch_warnings(), contextlib.suppress(Exception):
        warnings.simplefilter("ignore")
        session.stop()


def connect_session(url: str, *, config: Mapping[str, str] | None = None) -> SparkSession:
    """A new Spark Connect session on the server at ``url`` (``sc://HOST:PORT``, with PySpark's
    ``/;token=...;use_ssl=true`` parameters), with :data:`CONNECT_SETTINGS` and ``config``
    set on it (``config`` wins). Raises :class:`ConnectError` in a few seconds for a URL that
    is not one, a server that does not answer, or a setting it refuses. At exit the session is
    released on the server, without waiting for one that is gone."""
    import pyspark
    from pyspark.errors import PySparkException

    problems = internals_problems()
    if problems:
        raise ConnectError(f"the Spark Connect client of PySpark {pyspark.__version__} lacks "
                           f"what --remote uses: {', '.join(problems)} (PySpark 4.0 or later "
                           "has it: pip install 'filtex-proton[spark]' --upgrade)")
    from pyspark.sql.connect.client import DefaultChannelBuilder
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    try:
        DefaultChannelBuilder(url)
    except ValueError as exc:  # PySparkValueError too
        raise ConnectError(f"{url!r} is not a Spark Connect URL (sc://HOST:PORT): "
                           f"{str(exc).strip().splitlines()[0]}") from None
    os.environ[CONNECT_MODE] = "1"  # pyspark.sql.functions: Connect columns
    # A new session of this server (getOrCreate would return any session made before, of
    # whichever server); no call to it yet. PySpark's Connect session stands for the classic.
    session = cast("SparkSession", RemoteSession.builder.remote(url).create())
    settings = {**CONNECT_SETTINGS, **(config or {})}
    with _impatient(session):
        try:
            session.version  # noqa: B018  (the first call: is anybody there?)
        except PySparkException as exc:
            raise ConnectError(f"cannot reach the Spark Connect server at {url}: "
                               f"{_details(exc)}") from None
        for key, value in settings.items():
            try:
                session.conf.set(key, value)
            except PySparkException as exc:
                raise ConnectError(f"the Spark Connect server at {url} refuses {key}={value}: "
                                   f"{_details(exc)}") from None
    atexit.register(_release, session)
    return session


def lacks_filtex(exc: BaseException) -> str | None:
    """The module a query's Python worker could not import, when the query failed because
    Spark's Python there has no filtex_proton (or an older one); else ``None``."""
    found = _MISSING.search(str(exc))
    return found.group(1) if found else None


def _python() -> str:
    return ".".join(map(str, sys.version_info[:2]))


def other_python(exc: BaseException) -> tuple[str, str] | None:
    """The workers' Python minor version and this one's, when a query failed because they
    differ (a Python UDF runs only under the minor version that pickled it); else ``None``."""
    found = _OTHER_PYTHON.search(str(exc))
    return (found.group(1), found.group(2)) if found else None


def _workers(remote: str | None) -> str:
    return (f"the Python workers of the Spark Connect server at {remote}"
            if remote is not None else "Spark's Python workers")


def said_in_one_line(exc: BaseException, engine_work: str,
                     remote: str | None) -> tuple[str, bool] | None:
    """A Spark failure in one line, and whether it is a mistake in the input (an archive the
    server finds nowhere); ``None`` for one to raise as it is. ``engine_work``: what the
    engine evaluates in the workers, in words (for the worker that cannot import
    filtex_proton); ``remote``: the Spark Connect server, if the query went to one (its
    failures are all said in one line; a local Spark's only for that worker)."""
    from pyspark.errors import PySparkException

    if not isinstance(exc, PySparkException):
        return None
    missing = lacks_filtex(exc)
    if missing is not None:
        return (f"{_workers(remote)} cannot import {missing}, which evaluates {engine_work}: "
                f"pip install filtex-proton there, into the Python {_python()} they run "
                "(PYSPARK_PYTHON where the workers run)", False)
    versions = other_python(exc)
    if versions is not None:
        return (f"{_workers(remote)} run Python {versions[0]}, this is Python {versions[1]}, "
                f"and they cannot run its UDFs, which evaluate {engine_work}: point "
                f"PYSPARK_PYTHON where the workers run at a Python {versions[1]} with "
                f"filtex-proton, or run filtex-spark under Python {versions[0]}", False)
    if remote is None:
        return None
    if exc.getCondition() == "PATH_NOT_FOUND":
        return (f"--archive: the Spark Connect server at {remote} finds no such path: "
                f"{_details(exc)}", True)
    return f"the Spark Connect server at {remote}: {_details(exc)}", False


def _probe() -> Callable[[Any], str]:
    """A function for a Python UDF that says what the worker's Python has. Built here, so that
    it travels by value: the worker needs no filtex_proton to run it."""

    def probe(_: Any) -> str:
        import sys as worker_sys

        version = ".".join(map(str, worker_sys.version_info[:3]))
        try:
            import filtex_proton
        except ImportError as exc:
            return f"Python {version} without filtex_proton ({exc})"
        return f"Python {version} with filtex_proton {filtex_proton.__version__}"

    return probe


def server_report(session: SparkSession, remote: str, engine_work: str) -> tuple[bool, str]:
    """Whether the server's Python workers can evaluate what the engine does (they import
    filtex_proton, and run a UDF from this Python), and a report of it (one Spark job of
    one row). ``engine_work``: what the engine evaluates, in words."""
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F  # noqa: N812

    probe = F.udf(_probe(), "string", useArrow=False)  # the worker may lack pyarrow too
    try:
        said = str(session.range(1).select(probe(F.col("id"))).collect()[0][0])
    except PySparkException as exc:
        versions = other_python(exc)
        said = (f"its Python workers run Python {versions[0]}, which cannot run a UDF of "
                f"Python {versions[1]}" if versions is not None else
                f"its Python workers cannot run a UDF of Python {_python()}: {_details(exc)}")
    else:
        said = f"its Python workers run {said}"
        if "without filtex_proton" not in said:
            return True, f"Spark Connect server {remote} (Spark {session.version}): {said}"
    return False, (f"Spark Connect server {remote} (Spark {session.version}): {said}\n"
                   f"  there the engine cannot evaluate {engine_work}: pip install "
                   f"filtex-proton into the server's Python {_python()} (PYSPARK_PYTHON)")
