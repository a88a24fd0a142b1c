"""Runs the Qpid JMS scenarios of ``java/JmsScenarios.java`` and parses what they print.

The class path comes from ``java/pom.xml`` (Qpid JMS 2.10.0, Jakarta JMS 3.1) through
Maven's local repository; it and the compiled driver are cached under
``~/.cache/filtex-proton/jms/<hash of the pom and the source>`` (a file lock keeps two test
sessions from compiling over each other), so a second session starts the JVM at once.
One JVM runs every scenario a test module needs.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

JAVA = Path(__file__).resolve().parent / "java"
SOURCE = JAVA / "JmsScenarios.java"
TIMEOUT = 300.0

# (label, selector, bodies that match) over the six messages JmsScenarios.sendSix sends:
#   m0 priority 1, JMSType order,   correlation c-0, flag true,  b 1,  s 100,  i 1000,  l 1e10,
#      f 1.5,  d 2.25, colour red
#   m1 priority 7, JMSType invoice, correlation c-1, flag false, b -2, s -200, i -2000, l -2e10,
#      f -2.5, d -3.25, colour blue
#   m2 priority 4, colour green, nothing else
#   m3 priority 9, JMSType order,   correlation c-3, flag true,  b 4,  s 400,  i 4000,  l 4e10,
#      f 4.5,  d 5.25, colour red
#   m4 priority 0, colour blue, no JMSTimestamp (the producer's timestamps are disabled)
#   m5 priority 4, colour green, i the String '1000'
SELECTORS: list[tuple[str, str, str]] = [
    ("priority-above-default", "JMSPriority > 4", "m1,m3"),
    ("priority-default", "JMSPriority = 4", "m2,m5"),
    ("priority-none", "JMSPriority = 5", "-"),
    ("type", "JMSType = 'order'", "m0,m3"),
    ("type-none", "JMSType = 'refund'", "-"),
    ("correlation", "JMSCorrelationID = 'c-1'", "m1"),
    ("correlation-in", "JMSCorrelationID IN ('c-0', 'c-3')", "m0,m3"),
    ("message-id", "JMSMessageID = '${ID:m3}'", "m3"),
    ("message-id-none", "JMSMessageID = 'ID:nobody'", "-"),
    ("timestamp", "JMSTimestamp >= ${START}", "m0,m1,m2,m3,m5"),
    ("timestamp-none", "JMSTimestamp < ${START}", "-"),
    ("boolean", "flag = TRUE", "m0,m3"),
    ("boolean-alone", "flag", "m0,m3"),
    ("boolean-false", "flag = FALSE", "m1"),
    ("byte", "b = 1", "m0"),
    ("byte-none", "b = 3", "-"),
    ("short", "s BETWEEN -200 AND 100", "m0,m1"),
    ("int", "i = 1000", "m0"),
    ("int-as-string", "i = '1000'", "m5"),
    ("long", "l > 20000000000", "m3"),
    ("long-none", "l = 30000000000", "-"),
    ("float", "f = 1.5", "m0"),
    ("float-none", "f > 5", "-"),
    ("double", "d < 0", "m1"),
    ("string", "colour = 'red'", "m0,m3"),
    ("string-like", "colour LIKE 'b%'", "m1,m4"),
    ("string-none", "colour = 'Red'", "-"),
    ("delivery-mode", "JMSDeliveryMode = 'PERSISTENT'", "m0,m1,m2,m3,m4,m5"),
    ("expiration", "JMSExpiration = 0 AND JMSPriority < 4", "m0,m4"),
    ("absent", "nosuch = 1", "-"),
    ("absent-is-null", "nosuch IS NULL AND NOT (colour = 'green')", "m0,m1,m3,m4"),
    ("combined", "JMSPriority > 4 AND colour = 'red' AND flag AND i > 1000", "m3"),
]

SCENARIOS = ("queue-selectors", "topic-selectors", "invalid-selector", "no-local",
             "durable-subscriber", "durable-consumer", "shared-durable", "browser",
             "receive-no-wait", "temporary-queue")


def java_missing() -> str | None:
    """None when javac, java and mvn are on PATH, else what is missing."""
    missing = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
    if not missing:
        return None
    return (f"{' and '.join(missing)} not found on PATH (Qpid JMS needs a JDK 17 and Maven: "
            "apt-get install openjdk-17-jdk-headless maven)")


def _cache() -> Path:
    configured = os.environ.get("FILTEX_JMS_CACHE")
    root = Path(configured) if configured else Path.home() / ".cache" / "filtex-proton" / "jms"
    digest = hashlib.sha256((JAVA / "pom.xml").read_bytes() + SOURCE.read_bytes()).hexdigest()
    return root / digest[:16]


def driver() -> str:
    """The class path that runs ``JmsScenarios``, compiling it on first use."""
    home = _cache()
    home.mkdir(parents=True, exist_ok=True)
    with (home / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = home / "classpath.txt"
        if not done.exists():
            jars = home / "jars.txt"
            _run(["mvn", "-q", "-B", "-f", str(JAVA / "pom.xml"), "dependency:build-classpath",
                  f"-Dmdep.outputFile={jars}"], "Maven could not resolve Qpid JMS")
            classes = home / "classes"
            _run(["javac", "-d", str(classes), "-cp", jars.read_text().strip(), str(SOURCE)],
                 "javac failed on JmsScenarios.java")
            done.write_text(f"{classes}{os.pathsep}{jars.read_text().strip()}")
        return done.read_text()


def _run(command: list[str], what: str) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT,
                            check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{what} (exit {result.returncode}): "
                           f"{(result.stdout + result.stderr)[-3000:]}")


@dataclass(frozen=True)
class Results:
    """What the scenarios printed: ``(scenario, label) -> value``, and the raw output."""

    values: dict[tuple[str, str], str]
    output: str

    def __call__(self, scenario: str, label: str) -> str:
        assert (scenario, "DONE") in self.values, f"{scenario} did not finish:\n{self.output}"
        failed = self.values.get((scenario, "FAILED"))
        assert failed is None, f"{scenario} failed: {failed}"
        assert (scenario, label) in self.values, f"no {label} in {scenario}:\n{self.output}"
        return self.values[(scenario, label)]

    def failure(self, scenario: str) -> str:
        """What ended ``scenario`` early (``!Class: message``)."""
        assert (scenario, "FAILED") in self.values, f"{scenario} did not fail:\n{self.output}"
        return self.values[(scenario, "FAILED")]


def run_scenarios(classpath: str, url: str, scenarios: tuple[str, ...] = SCENARIOS) -> Results:
    """Run ``scenarios`` in one JVM against ``host:port`` (on names of their own)."""
    run = f"jms-{uuid.uuid4().hex[:8]}"
    selectors = "".join(f"{label}\t{selector}\n" for label, selector, _ in SELECTORS)
    result = subprocess.run(
        ["java", "-cp", classpath, "JmsScenarios", f"amqp://{url}", run, *scenarios],
        input=selectors, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    output = result.stdout + result.stderr[-3000:]
    assert result.returncode == 0, f"the JMS driver exited {result.returncode}:\n{output}"
    values = {}
    for line in result.stdout.splitlines():
        scenario, label, value = line.split("\t", 2)
        values[(scenario, label)] = value
    return Results(values, output)


# -- what every peer must get right (the broker, and the relay in front of any upstream) --------

def check_invalid_selector(results: Results) -> None:
    """Refused at attach with the filter's key, the parser's complaint and invalid-field; the
    session goes on."""
    for kind in ("queue", "topic"):
        error = results("invalid-selector", kind)
        assert error.startswith("!JMSException: filter 'jms-selector'"), error
        assert "syntax error: unexpected '='" in error and "line 1, column 10" in error, error
        assert error.endswith("[condition = amqp:invalid-field]"), error
    assert results("invalid-selector", "client-side").startswith(
        "!InvalidSelectorException: "), "Qpid JMS's own check"
    assert results("invalid-selector", "after") == "m0,m3", "the session goes on"


def check_no_local(results: Results) -> None:
    others = ",".join(f"other-m{k}" for k in range(6))
    mine = ",".join(f"mine-m{k}" for k in range(6))
    assert results("no-local", "no-local") == others
    assert results("no-local", "no-local-red") == "other-m0,other-m3"
    assert results("no-local", "all") == f"{mine},{others}"


def check_durable(results: Results, scenario: str) -> None:
    """What was published while the connection was gone arrives on resubscribing, nothing
    twice; after unsubscribe a new subscription starts empty."""
    assert results(scenario, "online") == "online-m0,online-m3"
    assert results(scenario, "resumed") == "away-m0,away-m3"
    assert results(scenario, "unsubscribe") == "ok"
    assert results(scenario, "after-unsubscribe") == "-", "unsubscribe ended the subscription"


def check_browser(results: Results) -> None:
    assert results("browser", "browsed") == "m0,m3"
    assert results("browser", "consumed") == ",".join(f"m{k}" for k in range(6))


def check_receive_no_wait(results: Results) -> None:
    assert results("receive-no-wait", "got") == "m0,m3"


def check_temporary_queue(results: Results) -> None:
    assert results("temporary-queue", "reply") == "pong to ping"
    assert results("temporary-queue", "correlated") == "true"
