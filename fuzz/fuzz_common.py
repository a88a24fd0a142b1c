"""What the fuzz targets share: the runner (atheris, or a plain random loop) and the views.

Every target is a script with a ``test_one_input(data: bytes) -> None`` that
raises only when it has found a bug. ``run(...)`` hands it to atheris
(libFuzzer, coverage-guided) when atheris can be imported, else to a plain
loop that mutates the seed corpus at random; both understand the libFuzzer
flags the CI driver uses (``-max_total_time=N``, ``-runs=N``, ``-seed=N``,
``-timeout=N``, ``-max_len=N``, ``-artifact_prefix=DIR/``, ``-dict=FILE``)
and positional corpus directories. Set ``FILTEX_FUZZ_PLAIN=1`` to force the
plain loop even where atheris is installed.

The targets import the library from the checkout they live in, so that they
run without ``pip install``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import random
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TestOneInput = Callable[[bytes], None]

__all__ = ["ROOT", "FuzzTimeout", "instrumented", "mutate", "plain_fuzz", "run"]


def _atheris() -> Any | None:
    if os.environ.get("FILTEX_FUZZ_PLAIN"):
        return None
    try:
        return importlib.import_module("atheris")
    except ImportError:
        return None


ATHERIS: Any | None = _atheris()


@contextlib.contextmanager
def instrumented() -> Iterator[None]:
    """Import the code under test inside this block: atheris adds coverage feedback to it."""
    if ATHERIS is None:
        yield
    else:
        with ATHERIS.instrument_imports(include=["filtex_proton"]):
            yield


# ----------------------------------------------------------------------------- the plain loop


class FuzzTimeout(BaseException):
    """One input ran longer than ``-timeout``: a BaseException, so no ``except Exception``
    inside the code under test can swallow it."""


def _flags(argv: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    flags: dict[str, str] = {}
    positional: list[str] = []
    for arg in argv:
        if arg.startswith("-") and "=" in arg:
            key, _, value = arg.lstrip("-").partition("=")
            flags[key] = value
        elif not arg.startswith("-"):
            positional.append(arg)
    return flags, positional


def _dictionary(path: str | None) -> list[bytes]:
    """The tokens of a libFuzzer dictionary file (``"token"`` per line, ``\\xNN`` escapes)."""
    if not path:
        return []
    tokens: list[bytes] = []
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or '"' not in line:
            continue
        body = line[line.index('"') + 1 : line.rindex('"')]
        tokens.append(body.encode("latin-1").decode("unicode_escape").encode("latin-1"))
    return tokens


def mutate(data: bytes, rng: random.Random, corpus: Sequence[bytes],
           tokens: Sequence[bytes] = (), max_len: int = 4096) -> bytes:
    """A few random edits of ``data``: flips, inserts, deletes, repeats, splices, tokens."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(9)
        at = rng.randint(0, len(buf))
        if choice == 0 and buf:  # flip bits of one byte
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        elif choice == 1:  # an interesting byte
            buf[at:at] = bytes([rng.choice((0, 1, 0x40, 0x7F, 0x80, 0xA1, 0xC0, 0xFF))])
        elif choice == 2 and buf:  # delete a run
            del buf[at : at + rng.randint(1, 16)]
        elif choice == 3 and buf:  # repeat a chunk (deep nesting, long runs)
            start = rng.randrange(len(buf))
            chunk = bytes(buf[start : start + rng.randint(1, 8)])
            buf[at:at] = chunk * rng.randint(2, 64)
        elif choice == 4 and corpus:  # splice with another input
            other = rng.choice(corpus)
            cut = rng.randint(0, len(other))
            buf = buf[:at] + bytearray(other[cut:])
        elif choice == 5 and tokens:
            buf[at:at] = rng.choice(tokens)
        elif choice == 6 and buf:  # truncate
            del buf[at:]
        elif choice == 7 and buf:  # overwrite a byte with a random one
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif choice == 8 and len(buf) >= 4:  # a size field that lies
            i = rng.randrange(len(buf) - 3)
            buf[i : i + 4] = rng.choice((b"\xff\xff\xff\xff", b"\x00\x00\x00\x00",
                                         b"\x7f\xff\xff\xff", b"\x00\x00\x01\x00"))
    return bytes(buf[:max_len])


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise FuzzTimeout


def _report(data: bytes, prefix: str, kind: str) -> Path:
    name = f"{prefix}{kind}-{hashlib.sha1(data).hexdigest()}"
    path = Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@dataclass(frozen=True)
class _PlainOptions:
    """The libFuzzer flags the plain loop understands, with libFuzzer's defaults."""

    max_time: float
    runs: int
    """How many inputs to run; negative: no limit."""
    seed: int
    timeout: int
    max_len: int
    prefix: str
    tokens: list[bytes]

    @classmethod
    def from_flags(cls, flags: dict[str, str]) -> _PlainOptions:
        return cls(max_time=float(flags.get("max_total_time", "0")),
                   runs=int(flags.get("runs", "-1")),
                   seed=int(flags.get("seed", "0")) or int(time.time()),
                   timeout=int(flags.get("timeout", "0")),
                   max_len=int(flags.get("max_len", "4096")),
                   prefix=flags.get("artifact_prefix", "./"),
                   tokens=_dictionary(flags.get("dict")))


def _plain_corpus(seeds: Sequence[bytes], corpus_dirs: Sequence[str],
                  options: _PlainOptions) -> tuple[list[bytes], int]:
    """The inputs to start from and how many inputs to run: files named without a time
    or run budget are a reproduction, which runs exactly those files, once each."""
    runs = options.runs
    files = [Path(p) for p in corpus_dirs if Path(p).is_file()]
    if files and runs < 0 and not options.max_time:  # reproduce: run exactly the files given
        seeds, runs = [], len(files)
    corpus = list(seeds) + [path.read_bytes() for path in files]
    for directory in corpus_dirs:
        path = Path(directory)
        if path.is_dir():
            corpus.extend(p.read_bytes() for p in sorted(path.iterdir()) if p.is_file())
    return corpus or [b""], runs


def _fails(test_one_input: TestOneInput, data: bytes, options: _PlainOptions,
           use_alarm: bool) -> bool:
    """Run one input; on a failure or a timeout, save the input, say so and return True."""
    try:
        if use_alarm:
            signal.alarm(options.timeout)
        test_one_input(data)
    except FuzzTimeout:
        path = _report(data, options.prefix, "timeout")
        print(f"==TIMEOUT== input ran longer than {options.timeout}s; saved as {path}",
              file=sys.stderr)
        return True
    except Exception:
        traceback.print_exc()
        path = _report(data, options.prefix, "crash")
        print(f"==CRASH== on {data[:120]!r}...; saved as {path}", file=sys.stderr)
        return True
    finally:
        if use_alarm:
            signal.alarm(0)
    return False


def _plain_loop(test_one_input: TestOneInput, corpus: list[bytes], runs: int,
                options: _PlainOptions, use_alarm: bool, start: float) -> int | None:
    """The corpus as it is, then mutations of it until the budget is spent: how many
    inputs ran, or None after a failure."""
    rng = random.Random(options.seed)
    initial = len(corpus)
    done = 0
    while not (0 <= runs <= done or (options.max_time
                                      and time.monotonic() - start >= options.max_time)):
        if done < initial:
            data = corpus[done]
        else:
            data = mutate(rng.choice(corpus), rng, corpus, options.tokens, options.max_len)
        if _fails(test_one_input, data, options, use_alarm):
            return None
        done += 1
        if done > initial and len(corpus) < 4096 and rng.random() < 0.05:
            corpus.append(data)  # no coverage feedback: keep some survivors to go deeper
    return done


def plain_fuzz(test_one_input: TestOneInput, seeds: Sequence[bytes],
               argv: Sequence[str], *, quiet: bool = False) -> int:
    """Run ``test_one_input`` on the seeds, then on random mutations of the corpus.

    Returns 0 when the time or run budget is spent without a failure, 1 after
    the first failure (its input is saved as ``<artifact_prefix>crash-<sha1>``).
    """
    flags, corpus_dirs = _flags(argv)
    options = _PlainOptions.from_flags(flags)
    corpus, runs = _plain_corpus(seeds, corpus_dirs, options)
    use_alarm = options.timeout > 0 and hasattr(signal, "SIGALRM")
    previous = signal.signal(signal.SIGALRM, _alarm) if use_alarm else None
    start = time.monotonic()
    try:
        done = _plain_loop(test_one_input, corpus, runs, options, use_alarm, start)
    finally:
        if use_alarm:
            signal.signal(signal.SIGALRM, previous)
    if done is None:
        return 1
    if not quiet:
        print(f"#{done} DONE plain loop: {done} inputs in {time.monotonic() - start:.1f}s "
              f"(seed {options.seed}), no failure")
    return 0


# ----------------------------------------------------------------------------- entry point


def run(test_one_input: TestOneInput, seeds: Sequence[bytes], dictionary: str | None = None,
        argv: Sequence[str] | None = None) -> int:
    """Fuzz ``test_one_input``: with atheris if available, else with :func:`plain_fuzz`.

    The seeds are written into the first corpus directory given (a temporary
    one if none is), so that a plain ``python fuzz/fuzz_x.py -max_total_time=60``
    starts from them.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    flags, corpus_dirs = _flags(args)
    if dictionary and "dict" not in flags:
        args.append(f"-dict={dictionary}")
    if ATHERIS is None:
        print("atheris is not available: plain random loop over the seed corpus",
              file=sys.stderr)
        return plain_fuzz(test_one_input, seeds, args)
    if corpus_dirs and Path(corpus_dirs[0]).is_file():  # reproduce one input: no seeds
        ATHERIS.Setup([sys.argv[0], *args], test_one_input)
        ATHERIS.Fuzz()
        return 0  # pragma: no cover
    if corpus_dirs:
        corpus = Path(corpus_dirs[0])
    else:
        corpus = Path(tempfile.mkdtemp(prefix="filtex-fuzz-"))
        args.append(str(corpus))
    corpus.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        (corpus / f"seed-{hashlib.sha1(seed).hexdigest()}").write_bytes(seed)
    ATHERIS.Setup([sys.argv[0], *args], test_one_input)
    ATHERIS.Fuzz()
    return 0  # pragma: no cover - atheris.Fuzz() exits the process
