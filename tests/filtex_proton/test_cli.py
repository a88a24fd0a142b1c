"""``filtex check``: validity, the positioned error, normalisation, evaluation, exit codes."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from filtex_proton.cli import main
from filtex_proton.filters.typed_json import filter_set_from_json, message_from_json
from filtex_proton.filterset import decode_filter_set

pytest.importorskip("filtex_proton.sql")

ROOT = Path(__file__).resolve().parents[2]


def run(argv: list[str], stdin: str = "") -> tuple[int, str]:
    out = io.StringIO()
    code = main(argv, stdin=io.StringIO(stdin), stdout=out)
    return code, out.getvalue()


def write(tmp_path: Path, name: str, content: Any) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(content), encoding="utf-8")
    return str(path)


def test_valid_sql_prints_the_normalised_expression() -> None:
    code, out = run(["check", "color='red'   AND  header.priority>4"])
    assert code == 0
    assert out.splitlines()[0] == "valid: amqp:sql-filter"
    assert out.splitlines()[1].startswith("normalised: ")
    assert "color = 'red'" in out


def test_ast_flag() -> None:
    code, out = run(["check", "--ast", "a = 1"])
    assert code == 0 and "ast: Compare(" in out


def test_invalid_sql_exits_1_with_position_and_caret() -> None:
    code, out = run(["check", "color = = 'red'"])
    assert code == 1
    assert out.startswith("invalid: ")
    assert "line 1, column 9" in out
    lines = out.splitlines()
    caret = lines.index("color = = 'red'") + 1
    assert lines[caret] == " " * 8 + "^"


def test_sql_from_stdin() -> None:
    assert run(["check"], stdin="a.x IS NULL\n")[0] == 0
    assert run(["check", "-"], stdin="a.x IS\n")[0] == 1


def test_jms_dialect() -> None:
    code, out = run(["check", "--dialect", "jms", "JMSPriority > 4"])
    assert code == 0 and "apache.org:selector-filter:string" in out


@pytest.mark.parametrize(("message", "expected"), [
    ({"application-properties": {"color": "red"}}, "result: TRUE"),
    ({"application-properties": {"color": "blue"}}, "result: FALSE"),
    ({}, "result: NULL (amqp:sql-filter evaluated to NULL"),
])
def test_sql_against_a_message(tmp_path: Path, message: Any, expected: str) -> None:
    code, out = run(["check", "color = 'red'", "--message", write(tmp_path, "m.json", message)])
    assert code == 0
    assert expected in out


def test_null_reason_names_absent_fields(tmp_path: Path) -> None:
    _, out = run(["check", "color = 'red'", "--message", write(tmp_path, "m.json", {})])
    assert "absent from the message: application-properties.color" in out


FILTER_SET = {
    "urgent": {"descriptor": "amqp:header-filter", "value": {"priority": {"ubyte": 9}}},
    "eu": {"descriptor": 288, "value": "region LIKE 'eu-%'"},
    "mine": {"descriptor": {"ulong": "0x0000468C00000003"}, "value": "NoLocalFilter{}"},
}


def test_filter_set_normalised_output_is_valid_input(tmp_path: Path) -> None:
    code, out = run(["check", "--filter-set", write(tmp_path, "f.json", FILTER_SET)])
    assert code == 0
    assert out.startswith("valid: filter set of 3 filters\nnormalised:\n")
    normalised = json.loads(out.split("normalised:\n", 1)[1])
    assert normalised["eu"]["descriptor"] == "amqp:sql-filter"
    assert normalised["mine"]["descriptor"] == "apache.org:no-local-filter:list"
    decode_filter_set(filter_set_from_json(normalised))  # pastes back


@pytest.mark.parametrize(("origin", "expected"), [
    (["--origin", "c1", "--consumer", "c2"], "result: TRUE"),
    (["--origin", "c1", "--consumer", "c1"], "result: FALSE (filter 'mine' did not match)"),
])
def test_filter_set_against_a_message(tmp_path: Path, origin: list[str], expected: str) -> None:
    message = {"header": {"priority": 9}, "application-properties": {"region": "eu-west"}}
    code, out = run(["check", "--filter-set", write(tmp_path, "f.json", FILTER_SET),
                     "--message", write(tmp_path, "m.json", message), *origin])
    assert code == 0
    assert out.rstrip().endswith(expected)


def test_filter_set_from_stdin(tmp_path: Path) -> None:
    code, out = run(["check", "--filter-set", "-"], stdin=json.dumps(FILTER_SET))
    assert code == 0 and "valid: filter set of 3 filters" in out


def test_invalid_filter_set_names_key_and_descriptor(tmp_path: Path) -> None:
    bad = {"x": {"descriptor": "amqp:any-filter", "value": [
        {"descriptor": "amqp:sql-filter", "value": "a = = 1"}]}}
    code, out = run(["check", "--filter-set", write(tmp_path, "f.json", bad)])
    assert code == 1
    assert out.startswith("invalid: filter 'x' (amqp:any-filter): amqp:any-filter member 1: ")
    assert "^" in out


def test_limits_can_be_set_and_show_the_masked_client_text(tmp_path: Path) -> None:
    nested = {"descriptor": "amqp:all-filter",
              "value": [{"descriptor": "amqp:all-filter",
                         "value": [{"descriptor": "amqp:true-filter", "value": True}]}]}
    code, out = run(["check", "--limit", "max_group_depth=1", "--filter-set",
                     write(tmp_path, "f.json", {"n": nested})])
    assert code == 1
    assert "max_group_depth" in out
    assert "(a client is told only: filter 'n': filter rejected" in out


@pytest.mark.parametrize(("argv", "stdin", "text"), [
    (["check", "--limit", "nope=1", "a = 1"], "", "unknown limit 'nope'"),
    (["check", "--limit", "max_group_depth=x", "a = 1"], "", "needs a number"),
    (["check", "--limit", "max_group_depth=0", "a = 1"], "", "must be a positive number"),
    (["check", "--filter-set", "/nonexistent.json"], "", "cannot read"),
    (["check", "--filter-set", "-"], "{not json", "not JSON"),
    (["check", "--filter-set", "-"], "[1]", "a filter set is a JSON object"),
    (["check", "a = 1", "--message", "-"], '{"body": 1}', "unknown section"),
    (["check", "a = 1", "--message", "-"], '{"header": {"priority": -1}}', "out of the range"),
    (["check", "a = 1", "--filter-set", "x.json"], "", "not both"),
    (["check", "--filter-set", "-", "--message", "-"], "", "only one of"),
])
def test_unusable_input_exits_2(argv: list[str], stdin: str, text: str,
                                capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = run(argv, stdin)
    assert code == 2
    assert text in capsys.readouterr().err


def _help_text() -> str:
    result = subprocess.run([sys.executable, "-m", "filtex_proton.cli", "check", "--help"],
                            capture_output=True, text=True, check=True, cwd=ROOT)
    return result.stdout


def test_help_shows_a_real_example_that_works(tmp_path: Path) -> None:
    text = _help_text()
    assert "filtex check --filter-set filters.json --message message.json" in text
    block = text.split("with filters.json:\n", 1)[1]
    filters_text, rest = block.split("  and message.json:\n", 1)
    message_text = rest.split("  it prints:\n", 1)[0]
    filters_path = tmp_path / "filters.json"
    filters_path.write_text(filters_text)
    message_path = tmp_path / "message.json"
    message_path.write_text(message_text)
    code, out = run(["check", "--filter-set", str(filters_path), "--message", str(message_path)])
    assert code == 0
    assert out.startswith("valid: filter set of 2 filters")
    assert out.rstrip().endswith("result: TRUE")


def test_the_console_script_is_installed() -> None:
    script = shutil.which("filtex")
    if script is None:
        pytest.skip("the filtex console script is not on PATH (package not installed)")
    result = subprocess.run([script, "check", "a = 1"], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0 and result.stdout.startswith("valid: amqp:sql-filter")
    assert subprocess.run([script, "check", "a ="], capture_output=True,
                          check=False).returncode == 1


def _json_blocks(markdown: str) -> list[str]:
    return re.findall(r"```json\n(.*?)```", markdown, flags=re.DOTALL)


def test_every_json_example_in_the_typed_json_docs_is_accepted() -> None:
    docs = (ROOT / "docs" / "TYPED_JSON.md").read_text(encoding="utf-8")
    blocks = _json_blocks(docs)
    assert len(blocks) >= 3
    for block in blocks:
        try:
            documents = [json.loads(block)]
        except json.JSONDecodeError:
            documents = [json.loads(line) for line in block.splitlines() if line.strip()]
        for document in documents:
            if document.keys() == {"descriptor", "value"}:
                decode_filter_set(filter_set_from_json({"f": document}))
            elif any(isinstance(v, dict) and "descriptor" in v for v in document.values()):
                decode_filter_set(filter_set_from_json(document))
            else:
                message_from_json(document)


def test_check_warns_of_functions_evaluated_as_null_and_non_portable_forms() -> None:
    """§6.4.4.3: an unknown function is NULL, valid but worth a warning; forms beyond the
    spec's grammar that AMQP SQL keeps (BETWEEN, §6.4.1; a signed exponent, §6.4.4.2.3)
    are reported as not portable."""
    import io

    from filtex_proton.cli import main

    out = io.StringIO()
    status = main(["check", "foo(a) IS NULL AND x BETWEEN 1.0E-3 AND 2.0E3"], stdout=out)
    text = out.getvalue()
    assert status == 0, text
    assert "warning: function foo() is not understood by this broker" in text
    assert "not portable: BETWEEN" in text
    assert "not portable: the spec's approximate_number_constant" in text
    out = io.StringIO()
    assert main(["check", "x = 2.0E3"], stdout=out) == 0
    assert "warning" not in out.getvalue() and "not portable" not in out.getvalue()
