"""The commands README.md and docs/ show a newcomer work as written.

Every shell line in a ``sh`` block of README.md and docs/*.md is read here: its program must be
one of ours (or pip/docker, checked elsewhere), every ``--flag`` it uses must be one the
program's ``--help`` lists, and the ones that need no server or data (``filtex check``,
``filtex-spark explain``) are run as written from the repository's root. The README's Python
sender and filtered receiver run against a real broker; the Docker image's file set installs
and runs. A command that drifts from the code fails here, not in a newcomer's terminal.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import venv
from functools import cache
from pathlib import Path

import pytest

from upstreams.maven import java_missing
from upstreams.process import free_port

from .broker.fault_clients import BrokerProcess

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent
OUR_PROGRAMS = {"filtex", "filtex-spark", "filtex-broker", "filtex-broker-users"}
#: Programs with subcommands: the flags of ``prog SUB`` are those of ``prog SUB --help``.
WITH_SUBCOMMANDS = {"filtex", "filtex-spark", "filtex-broker-users"}
#: Run from the repository's root as ``python -m NAME`` (not installed with the product).
REPOSITORY_MODULES = {"upstreams"}
#: Run as written: no server, no data beyond the repository's examples.
RUN_AS_WRITTEN = (("filtex", "check"), ("filtex-spark", "explain"))


def shell_commands() -> list[tuple[str, str]]:
    """(document, command) for every line of every ``sh`` block, continuations joined."""
    out: list[tuple[str, str]] = []
    for document in DOCUMENTS:
        for block in re.findall(r"```(?:sh|bash|shell)\n(.*?)```", document.read_text(), re.S):
            for command in block.replace("\\\n", " ").splitlines():
                if command.strip() and not command.lstrip().startswith("#"):
                    out.append((document.name, command.strip()))
    return out


def argv_of(command: str) -> list[str]:
    """The first command of a line (``a && b``: both are checked via their own lines)."""
    words = shlex.split(command, comments=True)
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        words = words[1:]  # VAR=value before the command: the environment, not the program
    return words[: words.index("&&")] if "&&" in words else words


def program_of(argv: list[str]) -> str:
    """The program a line runs: a script, ``bench/x.py``, or ``-m MODULE`` as ``MODULE``."""
    if argv[0] in {"python", "python3"}:
        return argv[2] if argv[1] == "-m" else argv[1]
    return argv[0]


def arguments_of(argv: list[str]) -> list[str]:
    """What follows the program's name (``python -m MODULE`` is the name)."""
    if argv[0] in {"python", "python3"}:
        return argv[3:] if argv[1] == "-m" else argv[2:]
    return argv[1:]


@cache
def help_flags(*program: str) -> frozenset[str]:
    """The flags ``program --help`` lists (with a subcommand: the top level's and its own)."""
    if program[0].endswith(".py"):
        executable = [sys.executable, program[0]]
    elif program[0] in REPOSITORY_MODULES:
        executable = [sys.executable, "-m", program[0]]
    else:
        executable = [str(BIN / program[0])]
    result = subprocess.run([*executable, *program[1:], "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, f"{program} --help: {result.stderr}"
    flags = frozenset(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", result.stdout))
    return flags | help_flags(program[0]) if len(program) > 1 else flags


def flags_and_program(argv: list[str]) -> tuple[tuple[str, ...], list[str]]:
    program = program_of(argv)
    rest = arguments_of(argv)
    if program in WITH_SUBCOMMANDS:  # the first word that is neither a flag nor a flag's value
        sub = next(word for i, word in enumerate(rest) if not word.startswith("-")
                   and (i == 0 or rest[i - 1] not in {"--master", "--conf"}))
        return (program, sub), rest
    return (program,), rest


COMMANDS = shell_commands()


def test_the_documents_show_commands() -> None:
    programs = {program_of(argv_of(command)) for _, command in COMMANDS}
    assert {"filtex", "filtex-spark", "filtex-broker", "pip", "upstreams"} <= programs


@pytest.mark.parametrize(("document", "command"), COMMANDS,
                         ids=[f"{d}:{c[:60]}" for d, c in COMMANDS])
def test_a_documented_command_uses_only_real_flags(document: str, command: str) -> None:
    argv = argv_of(command)
    program = program_of(argv)
    if program in {"pip", "docker"}:
        return  # the Set up block runs in CI as written; the image is checked below
    ours = (program in OUR_PROGRAMS or program in REPOSITORY_MODULES
            or (program.startswith("bench/") and (ROOT / program).exists()))
    assert ours, f"{document} shows {program!r}, which is neither ours nor checked here"
    key, rest = flags_and_program(argv)
    unknown = {w.split("=")[0] for w in rest if w.startswith("--")} - help_flags(*key)
    assert not unknown, f"{document}: {' '.join(key)} has no {sorted(unknown)}"


@pytest.mark.parametrize(
    ("document", "command"),
    [(d, c) for d, c in COMMANDS if tuple(argv_of(c)[:2]) in RUN_AS_WRITTEN
     and "--remote" not in argv_of(c)],  # a Connect server's address: an example, not here
    ids=lambda value: value[:70])
def test_a_documented_command_runs_as_written(document: str, command: str) -> None:
    argv = argv_of(command)
    result = subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, f"{document}: {command}\n{result.stdout}\n{result.stderr}"
    if argv[1] == "check":
        assert "valid" in result.stdout and "invalid" not in result.stdout


def test_the_example_files_are_the_documents_examples() -> None:
    """docs/TYPED_JSON.md's filter set and message are the files its commands read."""
    blocks = [json.loads(b) for b in
              re.findall(r"```json\n(.*?)```", (ROOT / "docs/TYPED_JSON.md").read_text(), re.S)
              if b.lstrip().startswith("{\n")]
    assert json.loads((ROOT / "examples/filters.json").read_text()) in blocks
    assert json.loads((ROOT / "examples/message.json").read_text()) in blocks


def test_the_readme_sender_and_filtered_receiver_work(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    sender = next(b for b in blocks if 'create_sender("orders")' in b and "127.0.0.1:5672" in b)
    receiver = next(b for b in blocks if "big-eu" in b and "127.0.0.1:5672" in b)
    broker = BrokerProcess(tmp_path)
    url = broker.start()
    try:
        for code in (sender, receiver):
            result = subprocess.run(
                [sys.executable, "-c", code.replace("amqp://127.0.0.1:5672", url)],
                capture_output=True, text=True, timeout=60, check=False)
            assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "order.created {'region': 'EU', 'amount': 1500}"
        assert broker.stop() == 0
    finally:
        broker.kill()


def test_the_readme_relay_in_front_of_artemis_runs_as_written(tmp_path: Path) -> None:
    """``python -m upstreams artemis ... --relay`` as the README writes it, then its Python client
    against the relay, then Ctrl-C: both stop and the command exits 0. (On another port only if
    5672 is taken on this machine.)"""
    reason = java_missing()
    if reason is not None:
        pytest.skip(f"the README's Artemis command needs Java and Maven: {reason}")
    command = next(c for d, c in COMMANDS if d == "README.md"
                   and argv_of(c)[:3] == ["python", "-m", "upstreams"])
    client = next(b for b in re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(),
                                        re.S) if "localhost:5672" in b and "eu_big" in b)
    port = 5672 if _port_is_free(5672) else free_port()
    argv = argv_of(command.replace("127.0.0.1:5672", f"127.0.0.1:{port}"))
    with (tmp_path / "upstreams.log").open("wb") as log:
        process = subprocess.Popen([sys.executable, *argv[1:]], cwd=ROOT, stdout=subprocess.PIPE,
                                   stderr=log, text=True)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline() for _ in range(2)]
        assert lines[1].startswith(f"filtex-broker relay: amqp://127.0.0.1:{port}"), (
            lines, (tmp_path / "upstreams.log").read_text(errors="replace"))
        result = subprocess.run(
            [sys.executable, "-c", client.replace("localhost:5672", f"localhost:{port}")],
            capture_output=True, text=True, timeout=120, check=False)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == "big EU order"
        process.send_signal(signal.SIGINT)  # Ctrl-C, as the README says
        assert process.wait(90) == 0, (tmp_path / "upstreams.log").read_text(errors="replace")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.slow
def test_the_docker_image_file_set_installs_and_runs(tmp_path: Path) -> None:
    """What docker/Dockerfile copies is enough: ``pip install .`` from exactly those files, in a
    virtualenv of its own, gives a ``filtex-broker`` that accepts docker/compose.yaml's flags.
    (No Docker engine is needed, so this runs everywhere; the image itself is not built here.)"""
    dockerfile = (ROOT / "docker/Dockerfile").read_text()
    context = tmp_path / "context"
    context.mkdir()
    for line in re.findall(r"^COPY (.+)$", dockerfile, re.M):
        *sources, _ = line.split()
        for source in sources:
            path = ROOT / source
            if path.is_dir():
                shutil.copytree(path, context / source,
                                ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(path, context / source)
    assert re.search(r"^RUN pip install --no-cache-dir \. ", dockerfile, re.M)
    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv/bin/python"
    subprocess.run([python, "-m", "pip", "install", "--quiet", "."], cwd=context, check=True,
                   timeout=600, capture_output=True)
    result = subprocess.run([tmp_path / "venv/bin/filtex-broker", "--help"], capture_output=True,
                            text=True, timeout=60, check=True, cwd=tmp_path)
    compose = (ROOT / "docker/compose.yaml").read_text()
    used = set(re.findall(r"^\s+- (--[a-z-]+)$", compose, re.M))
    assert used, "docker/compose.yaml passes no flags?"
    assert used <= set(re.findall(r"--[a-z][a-z0-9-]*", result.stdout)), used
    for variable in re.findall(r"^\s+(FILTEX_[A-Z_]+):", compose, re.M):
        flag = "--" + variable.removeprefix("FILTEX_").lower().replace("_", "-")
        assert flag in result.stdout, f"{variable} is not a setting ({flag})"
