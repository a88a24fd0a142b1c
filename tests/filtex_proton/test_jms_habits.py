"""JMS habits in the other dialect: header names in AMQP SQL, double quotes in a JMS selector.

``JMSPriority > 4`` is legal AMQP SQL, but there it names an application property, so the
filter silently matches nothing a JMS client meant: ``filtex check``, the console's tester and
the broker's log say what to write instead. A double-quoted token has no meaning in a JMS
selector (JMS §3.8.1.1; Artemis reads it as a name): it is refused with the two fixes.
"""

from __future__ import annotations

import io
import logging

import pytest
from proton import Described, symbol

from filtex_proton.cli import main as filtex
from filtex_proton.plugin import FiltexPlugin
from filtex_proton.tester import check


@pytest.mark.parametrize(("text", "instead"), [
    ("JMSPriority > 4", "h.priority"),
    ("JMSType = 'order'", "p.subject"),
    ("JMSCorrelationID = 'c-1' OR region = 'EU'", "p.correlation_id"),
    ("JMSXGroupID IS NOT NULL", "p.group_id"),
])
def test_a_jms_header_name_in_amqp_sql_is_flagged_with_the_field_to_write(
        text: str, instead: str) -> None:
    checked = check(text, "sql")
    assert checked.filter_set is not None  # still valid: legal SQL
    assert len(checked.notes) == 1 and f"writes {instead}" in checked.notes[0], checked.notes
    assert checked.as_json()["notes"] == checked.notes
    out = io.StringIO()
    assert filtex(["check", text], stdout=out) == 0
    assert f"writes {instead}" in out.getvalue()


def test_the_same_names_are_fine_where_they_mean_the_header() -> None:
    assert check("JMSPriority > 4", "jms").notes == []  # the JMS dialect reads the header
    assert check("h.priority > 4 AND region = 'EU'", "sql").notes == []


def test_the_broker_log_says_so_at_attach(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        FiltexPlugin().compile({symbol("f"): Described(symbol("amqp:sql-filter"),
                                                       "JMSPriority > 4")})
    assert any("event=jms-habit" in r.getMessage() and "h.priority" in r.getMessage()
               for r in caplog.records), caplog.text


def test_a_double_quoted_token_in_a_jms_selector_is_refused_with_both_fixes() -> None:
    checked = check('region = "EU"', "jms")
    assert checked.filter_set is None and checked.error is not None
    message = checked.error["message"]
    assert "no double-quoted tokens" in message
    assert "write 'EU' for the string, or EU for the property" in message
    assert checked.error["column"] == 10
    assert check("region = \"EU\"", "sql").filter_set is not None  # AMQP SQL allows them
