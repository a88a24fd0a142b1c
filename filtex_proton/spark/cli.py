"""``filtex-spark``: select and replay archived messages with the broker's filters, on Spark.

``select`` answers "which messages would this subscription have received";
``replay`` re-publishes them to a live address (a backfill); ``explain`` shows,
without Spark, which filter runs as Spark expressions and which in the engine.
The entry point also runs under ``spark-submit`` (pass this file), which then
decides the master. With ``--remote sc://HOST:PORT`` (or ``$SPARK_REMOTE``) the
queries go to a running Spark Connect server instead, and no JVM starts here
(connect.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Final, TextIO

from filtex_proton.errors import FilterError
from filtex_proton.filters.typed_json import TypedJsonError, filter_set_from_json, to_json
from filtex_proton.filterset import FilterSet, decode_filter_set
from filtex_proton.spark.plan import Plan, as_filter_set, plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from filtex_proton.spark.replay import Position

__all__ = ["main"]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2

_EXAMPLES: Final = """\
examples:
  # how many messages would this subscription have received?
  filtex-spark select --archive /var/lib/filtex/archive --count \\
      --filter "p.subject = 'order.created' AND region IN ('AMER', 'EMEA')"

  # the matches of a typed-JSON filter set (docs/TYPED_JSON.md), as a new archive
  filtex-spark select --archive archive/ --filter-set filters.json --out selected/

  # backfill a new consumer: re-publish the matches, in archive order, at least once
  filtex-spark replay --archive archive/ --address orders --filter "h.priority > 4" \\
      --to amqp://localhost:5672/orders-backfill --checkpoint backfill.json

  # which filter runs as Spark expressions, which in the engine, and why (no Spark needed)
  filtex-spark explain --filter "a.amount * 2 > 100 AND p.subject LIKE 'order.%'"

  # through a running Spark Connect server (no JVM here): the files are read there
  filtex-spark select --remote sc://spark-head:15002 --archive /data/archive --count \\
      --filter "p.subject = 'order.created'"

  # can that server run the filters the engine evaluates? (its Python needs filtex-proton)
  filtex-spark explain --remote sc://spark-head:15002 --filter "a.amount * 2 > 100"

  # on a cluster: the same entry point under spark-submit
  spark-submit --master spark://head:7077 "$(python -c \\
      'import filtex_proton.spark.cli as c; print(c.__file__)')" select --archive ... --count

with filters.json:
  {"urgent": {"descriptor": "amqp:header-filter", "value": {"priority": {"ubyte": 9}}},
   "eu":     {"descriptor": "amqp:sql-filter", "value": "region LIKE 'eu-%'"}}

exit status: 0 done (also after SIGINT/SIGTERM in replay), 1 failed or invalid filter,
2 unusable input.
"""


class _UsageError(Exception):
    """Input that cannot be used (exit 2)."""


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--master", default=argparse.SUPPRESS,
                        help="Spark master (default: spark-submit's, else local[*])")
    _remote_option(common, "run on this Spark Connect server (default: $SPARK_REMOTE); "
                   "no JVM starts here")
    return common


def _remote_option(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--remote", default=argparse.SUPPRESS, metavar="sc://HOST:PORT",
                        help=text)
    parser.add_argument("--conf", action="append", default=argparse.SUPPRESS,
                        metavar="KEY=VALUE", help="a Spark setting (repeatable)")


def _filters(parser: argparse.ArgumentParser) -> None:
    chosen = parser.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--filter", metavar="EXPR", help="one SQL filter (see --dialect)")
    chosen.add_argument("--filter-set", metavar="FILE.json",
                        help="a typed-JSON filter set {name: {descriptor, value}} ('-': stdin)")
    parser.add_argument("--dialect", choices=("amqp", "jms"), default="amqp",
                        help="--filter's language: amqp:sql-filter or the JMS selector")
    parser.add_argument("--path", choices=("auto", "column", "udf"), default="auto",
                        help="force Spark expressions (column) or the engine (udf)")


def _duplicates(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep-duplicates", action="store_true",
                        help="keep the copies an at-least-once archive can hold (rows with the "
                        "same address, arrival time, sequence and bytes); dropped by default")


def _date(text: str) -> str:
    """An ISO date (YYYY-MM-DD), as the archive names its ``date=`` directories."""
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


def _days(parser: argparse.ArgumentParser) -> None:
    """``--since``/``--until``/``--day``: whole arrival days (UTC), pruned by directory."""
    parser.add_argument("--since", type=_date, metavar="DATE",
                        help="only messages archived on this UTC day (YYYY-MM-DD) or later")
    parser.add_argument("--until", type=_date, metavar="DATE",
                        help="only messages archived on this UTC day (YYYY-MM-DD) or earlier")
    parser.add_argument("--day", type=_date, metavar="DATE",
                        help="only messages archived on this UTC day (--since DATE --until DATE)")


def _day_range(args: argparse.Namespace) -> tuple[str | None, str | None]:
    if args.day is not None:
        if args.since is not None or args.until is not None:
            raise _UsageError("--day cannot be combined with --since/--until")
        return args.day, args.day
    return args.since, args.until


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="filtex-spark", parents=[_common()],
        description="Select and replay archived AMQP messages with the broker's filters, "
                    "on Spark, with exactly the broker's semantics.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EXAMPLES)
    commands = parser.add_subparsers(dest="command", required=True)
    select = commands.add_parser(
        "select", parents=[_common()], help="the archived messages a filter matches",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EXAMPLES)
    select.add_argument("--archive", required=True, metavar="DIR", help="the archive directory")
    _filters(select)
    select.add_argument("--address", action="append", metavar="NAME",
                        help="only messages archived at this address (repeatable)")
    _days(select)
    _duplicates(select)
    select.add_argument("--out", metavar="DIR",
                        help="write the matches there, as an archive (partitioned alike)")
    select.add_argument("--count", action="store_true",
                        help="print the number of matches, alone on the last line")
    select.add_argument("--show", type=int, default=20, metavar="N",
                        help="without --out/--count: print the first N matches (default 20)")
    select.add_argument("--explain", action="store_true", help="print the plan to stderr")
    replay = commands.add_parser(
        "replay", parents=[_common()], help="re-publish the matches to an AMQP address",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EXAMPLES)
    replay.add_argument("--archive", required=True, metavar="DIR", help="the archive directory")
    _filters(replay)
    replay.add_argument("--address", action="append", metavar="NAME",
                        help="only messages archived at this address (repeatable)")
    _days(replay)
    _duplicates(replay)
    replay.add_argument("--to", required=True, metavar="amqp://HOST:PORT/ADDRESS",
                        help="where to send them")
    replay.add_argument("--checkpoint", metavar="FILE",
                        help="record progress here and resume after it on the next run")
    replay.add_argument("--window", type=int, default=100,
                        help="messages unsettled at once; archive order holds for any window "
                        "(a retry resends the later ones too)")
    replay.add_argument("--retries", type=int, default=10,
                        help="reconnect attempts in a row before giving up")
    replay.add_argument("--drain-timeout", type=float, default=30.0, metavar="SECONDS",
                        help="on SIGINT/SIGTERM, how long to wait for messages in flight")
    explain = commands.add_parser(
        "explain", help="per filter: Spark expressions or the engine, and why (no Spark, "
        "unless --remote)",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EXAMPLES)
    _filters(explain)
    _remote_option(explain, "also ask this Spark Connect server whether its Python workers "
                   "can run what the engine evaluates (one small Spark job)")
    return parser


# ----------------------------------------------------------------------------- inputs


def _filter_set(args: argparse.Namespace, stdin: TextIO) -> FilterSet:
    if args.filter is not None:
        return as_filter_set(args.filter, dialect=args.dialect)
    try:
        if args.filter_set == "-":
            text = stdin.read()
        else:
            with open(args.filter_set, encoding="utf-8") as handle:
                text = handle.read()
        described = filter_set_from_json(json.loads(text))
    except OSError as exc:
        raise _UsageError(f"cannot read {args.filter_set}: {exc.strerror}") from None
    except (json.JSONDecodeError, RecursionError) as exc:
        raise _UsageError(f"{args.filter_set}: not JSON: {exc}") from None
    except TypedJsonError as exc:
        raise _UsageError(f"{args.filter_set}: {exc}") from None
    return decode_filter_set(described)


def _remote(args: argparse.Namespace) -> str | None:
    """The Spark Connect server to use: ``--remote``, else ``$SPARK_REMOTE`` unless
    ``--master`` was given (``explain`` asks one only when given ``--remote``)."""
    remote: str | None = getattr(args, "remote", None)
    master = getattr(args, "master", None)
    if remote is not None and master is not None:
        raise _UsageError("--master and --remote: a master or a Spark Connect server, not both")
    if remote is None and master is None and args.command != "explain":
        remote = os.environ.get("SPARK_REMOTE") or None
    return remote


def _config(args: argparse.Namespace) -> dict[str, str]:
    config: dict[str, str] = {}
    for pair in getattr(args, "conf", None) or []:
        key, sep, value = pair.partition("=")
        if not sep:
            raise _UsageError(f"--conf needs KEY=VALUE, not {pair!r}")
        config[key] = value
    return config


def _session(args: argparse.Namespace) -> SparkSession:
    from filtex_proton.spark.session import spark_session

    remote = _remote(args)
    if remote is not None:
        from filtex_proton.spark.connect import ConnectError

        try:
            return spark_session(remote=remote, config=_config(args))
        except ConnectError as exc:
            raise _UsageError(str(exc)) from None
    session = spark_session(getattr(args, "master", None), config=_config(args))
    session.sparkContext.setLogLevel("ERROR")
    return session


def _matches(spark: SparkSession, args: argparse.Namespace, planned: Plan) -> DataFrame:
    """The matches, each archived message once unless ``--keep-duplicates`` (deduplicated
    after filtering, so that only the matches are compared). Only the files that can hold
    matches are read (``Plan.select``)."""
    from filtex_proton.spark.session import drop_archive_duplicates

    since, until = _day_range(args)
    matches = planned.select(spark, args.archive, args.address or None, since=since,
                             until=until)
    return matches if args.keep_duplicates else drop_archive_duplicates(matches)


# ----------------------------------------------------------------------------- select


def _shown(row: Any) -> str:
    """One match as a line of typed JSON: where and when, and what filters can read."""
    from filtex_proton.amqp import DecodeError
    from filtex_proton.amqp.message import RawMessageView
    from filtex_proton.amqp.view import Section

    arrival = dt.datetime.fromtimestamp(row["arrival_ms"] / 1000, dt.UTC)
    line: dict[str, Any] = {"address": row["address"],
                            "arrival": arrival.isoformat(timespec="milliseconds"),
                            "sequence": row["sequence"]}
    try:
        view = RawMessageView(bytes(row["raw"]))
        for section in Section:
            entries = view.section(section)
            if entries is not None:
                line[section.value] = {str(k): to_json(v) for k, v in entries.items()}
    except DecodeError as exc:
        line["decode-error"] = str(exc)
    return json.dumps(line, ensure_ascii=False)


def _as_stored(df: DataFrame) -> DataFrame:
    """The rows with ``address`` as the archive stores it: shortened where too long for a
    directory name (the real one stays in ``long_address``), and the archive's columns only
    (an indexed archive's ``index_<key>`` columns would make the files unreadable as
    segments: Spark cannot stamp the index in their metadata)."""
    from pyspark.sql import functions as F  # noqa: N812

    from filtex_proton.archive import ARCHIVE_SCHEMA, PARTITION_COLUMNS, address_partition

    df = df.select(*(F.col(f"`{name}`") for name in (*ARCHIVE_SCHEMA.names, *PARTITION_COLUMNS)))

    long = [row[0] for row in df.where(F.col("long_address").isNotNull())
            .select("long_address").distinct().collect()]
    if not long:
        return df
    shortened = F.create_map(*(F.lit(x) for a in long for x in (a, address_partition(a))))
    return df.withColumn("address", F.coalesce(shortened[F.col("long_address")],
                                               F.col("address")))


def _select(args: argparse.Namespace, planned: Plan, out: TextIO) -> int:
    spark = _session(args)
    matches = _matches(spark, args, planned)
    if args.out is not None:
        _as_stored(matches).write.partitionBy("address", "date", "regular").parquet(args.out)
        print(f"wrote the matches to {args.out}", file=sys.stderr)
    if args.count:
        from filtex_proton.spark.session import read_archive

        counted = read_archive(spark, args.out) if args.out is not None else matches
        print(counted.count(), file=out)
    elif args.out is None:
        ordered = matches.orderBy("arrival_ms", "sequence", "address")
        rows = ordered.select("address", "arrival_ms", "sequence", "raw").take(args.show + 1)
        for row in rows[:args.show]:
            print(_shown(row), file=out)
        if len(rows) > args.show:
            print(f"... more than {args.show} matches (--count counts them, --out writes them)",
                  file=sys.stderr)
    return EXIT_OK


# ----------------------------------------------------------------------------- replay


def _identity(args: argparse.Namespace, filter_set: FilterSet) -> str:
    normalised = {str(k): to_json(v) for k, v in filter_set.normalised().items()}
    identity: dict[str, Any] = {"archive": str(args.archive), "address": args.address,
                                "to": args.to, "filters": normalised}
    if args.keep_duplicates:  # absent otherwise: checkpoints written before the flag still match
        identity["keep_duplicates"] = True
    since, until = _day_range(args)
    if since is not None or until is not None:  # absent otherwise, as keep_duplicates
        identity["days"] = [since, until]
    return json.dumps(identity, sort_keys=True, ensure_ascii=False)


def _after(df: DataFrame, position: Position) -> DataFrame:
    """Rows after ``position`` in archive order (arrival_ms, sequence, address)."""
    from pyspark.sql import functions as F  # noqa: N812

    arrival, sequence, address = F.col("arrival_ms"), F.col("sequence"), F.coalesce(
        F.col("address"), F.lit(""))
    return df.where(
        (arrival > position.arrival_ms)
        | ((arrival == position.arrival_ms) & (sequence > position.sequence))
        | ((arrival == position.arrival_ms) & (sequence == position.sequence)
           & (address > position.address)))


def _replay(args: argparse.Namespace, filter_set: FilterSet, planned: Plan, out: TextIO) -> int:
    from pathlib import Path

    from filtex_proton.spark.replay import Checkpoint, Position, Replayer, parse_target

    try:
        parse_target(args.to)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    checkpoint = None
    resume_after: Position | None = None
    sent_before = 0
    if args.checkpoint is not None:
        checkpoint = Checkpoint(Path(args.checkpoint), _identity(args, filter_set))
        try:
            resume_after, sent_before = checkpoint.load()
        except (ValueError, json.JSONDecodeError) as exc:
            raise _UsageError(str(exc)) from None
    spark = _session(args)
    matches = _matches(spark, args, planned)
    if resume_after is not None:
        matches = _after(matches, resume_after)
        print(f"resuming after {resume_after} ({sent_before} already replayed)", file=sys.stderr)
    ordered = matches.select("raw", "arrival_ms", "sequence", "address").orderBy(
        "arrival_ms", "sequence", "address")

    def source() -> Iterator[tuple[bytes, Position]]:
        try:
            for row in ordered.toLocalIterator(prefetchPartitions=True):
                yield bytes(row["raw"]), Position(row["arrival_ms"], row["sequence"],
                                                  row["address"] or "")
        except Exception as exc:  # reported by the replayer, in one line where known
            said = _failure(exc, planned, _remote(args))
            if said is None:
                raise
            raise RuntimeError(said[0]) from None

    stop = threading.Event()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def on_signal(signum: int, frame: FrameType | None) -> None:
        print(f"\nfiltex-spark: {signal.Signals(signum).name}: finishing what is in flight",
              file=sys.stderr)
        stop.set()

    bar = None
    try:
        for sig in previous:
            signal.signal(sig, on_signal)
        bar = _progress(ordered)
        replayer = Replayer(args.to, source(), window=args.window, retries=args.retries,
                            checkpoint=checkpoint, sent_before=sent_before,
                            on_accepted=bar.update if bar is not None else None, stop=stop,
                            drain_timeout=args.drain_timeout)
        result = replayer.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if bar is not None:
            bar.close()
    print(f"replayed {result.accepted} message{'s' if result.accepted != 1 else ''} to "
          f"{args.to} ({result.rejected} rejected, {result.resent} sent again, "
          f"{result.reconnects} reconnects){' - stopped' if result.stopped else ''}", file=out)
    if result.error is not None:
        print(f"filtex-spark: {result.error}", file=sys.stderr)
        return EXIT_FAILED
    if result.rejected:
        print(f"filtex-spark: the peer rejected {result.rejected} message(s)", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _progress(ordered: DataFrame) -> Any:
    """A progress bar on stderr when it is a terminal (counting the matches first)."""
    if not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=ordered.count(), unit="msg", desc="replay", file=sys.stderr)


# ----------------------------------------------------------------------------- main


#: What ``select`` and ``replay`` import, and the distribution each comes from.
_SPARK_EXTRA: Final = (("pyspark", "pyspark"), ("pyarrow", "pyarrow"), ("pandas", "pandas"),
                       ("tqdm", "tqdm"))


def _check_spark_extra(command: str, remote: str | None) -> None:
    """``select``, ``replay`` and ``explain --remote`` need the spark extra (and ``--remote``
    the Spark Connect client it brings): without it, one line saying so."""
    missing = [dist for module, dist in _SPARK_EXTRA if importlib.util.find_spec(module) is None]
    if missing:
        raise _UsageError(f"{command}{' --remote' if command == 'explain' else ''} needs "
                          f"{', '.join(missing)}: pip install 'filtex-proton[spark]'"
                          f"{' (explain does not)' if command != 'explain' else ''}")
    if remote is not None:
        from filtex_proton.spark.connect import missing_client_packages

        lacking = missing_client_packages()
        if lacking is not None:
            raise _UsageError(f"--remote needs the Spark Connect client ({lacking}): "
                              "pip install 'filtex-proton[spark]'")


def _check_archive(directory: Path, remote: str | None) -> None:
    """A missing archive is a mistake (exit 2); an empty one is said on stderr (it matches
    nothing, and a count of 0 would otherwise look like a filter that matched nothing).
    Through a Spark Connect server, an archive this machine cannot read is the server's to
    read (and to refuse)."""
    if remote is not None and not directory.is_dir():
        print(f"filtex-spark: --archive {str(directory)!r} is not a directory here: the Spark "
              f"Connect server at {remote} lists and reads it", file=sys.stderr)
        return
    if not directory.exists():
        raise _UsageError(f"--archive {str(directory)!r}: no such directory")
    if not directory.is_dir():
        raise _UsageError(f"--archive {str(directory)!r}: not a directory")
    if next(directory.rglob("*.parquet"), None) is None:
        print(f"filtex-spark: warning: the archive {str(directory)!r} holds no messages "
              "(no Parquet files below it)", file=sys.stderr)


def main(argv: Sequence[str] | None = None, *, stdin: TextIO | None = None,
         stdout: TextIO | None = None) -> int:
    """Run ``filtex-spark``; returns the exit status."""
    args = _parser().parse_args(argv)
    out = stdout if stdout is not None else sys.stdout
    try:
        try:
            filter_set = _filter_set(args, stdin if stdin is not None else sys.stdin)
        except FilterError as exc:
            print(f"filtex-spark: invalid filter: {exc.render()}", file=sys.stderr)
            return EXIT_FAILED
        remote = _remote(args)
        if args.command == "explain":
            planned = plan(filter_set, path=args.path)
            print(planned, file=out)
            if remote is None:
                return EXIT_OK
            _check_spark_extra(args.command, remote)
            return _ask_the_server(args, planned, remote, out)
        _day_range(args)  # before Spark starts: a usage error is quick
        _check_spark_extra(args.command, remote)
        _check_archive(Path(args.archive), remote)
        try:
            planned = plan(filter_set, path=args.path)
        except ValueError as exc:  # --path column with a filter that does not translate
            raise _UsageError(str(exc)) from None
        if getattr(args, "explain", False):
            print(planned, file=sys.stderr)
        return _run(args, filter_set, planned, out)
    except _UsageError as exc:
        print(f"filtex-spark: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _run(args: argparse.Namespace, filter_set: FilterSet, planned: Plan, out: TextIO) -> int:
    """``select`` or ``replay`` (the spark extra is installed)."""
    from filtex_proton.archive.reader import ArchiveVersionError

    try:
        if args.command == "select":
            return _select(args, planned, out)
        return _replay(args, filter_set, planned, out)
    except ArchiveVersionError as exc:  # an archive written by a newer filtex-proton
        print(f"filtex-spark: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except Exception as exc:
        said = _failure(exc, planned, _remote(args))
        if said is None:
            raise
        print(f"filtex-spark: {said[0]}", file=sys.stderr)
        return said[1]


# ----------------------------------------------------------------------------- Spark's failures


def _engine_work(planned: Plan) -> str:
    """What the engine evaluates in Spark's Python workers, in words."""
    names = [f"{f.key!r} ({f.type_name})" for f in planned.filters if f.path != "column"]
    if names:
        return f"filter{'s' if len(names) > 1 else ''} {', '.join(names)}"
    return "the archive's irregular rows (regular = false) with the whole filter set"


def _failure(exc: BaseException, planned: Plan, remote: str | None) -> tuple[str, int] | None:
    """A Spark failure in one line, and the exit status; ``None``: raise it as it is."""
    from filtex_proton.spark.connect import said_in_one_line

    said = said_in_one_line(exc, _engine_work(planned), remote)
    if said is None:
        return None
    return said[0], EXIT_USAGE if said[1] else EXIT_FAILED


def _ask_the_server(args: argparse.Namespace, planned: Plan, remote: str, out: TextIO) -> int:
    """``explain --remote``: can the server's Python workers evaluate what the engine does?
    Exit 1 where a filter of the plan needs the engine and they cannot."""
    from filtex_proton.spark.connect import server_report

    able, report = server_report(_session(args), remote, _engine_work(planned))
    print(report, file=out)
    return EXIT_FAILED if not able and any(f.path != "column" for f in planned.filters) \
        else EXIT_OK


if __name__ == "__main__":  # spark-submit runs this file
    sys.exit(main())
