"""Relay mode without sockets: the pushdown and non-match decision tables, and the upstream
settings (TLS, non-match mode), the upstream address of a topic."""

from __future__ import annotations

from pathlib import Path

import pytest
from proton import symbol

from filtex_broker.config import ConfigError, load_config
from filtex_broker.relay.brokers import (
    KNOWN_BROKERS,
    decide_non_match,
    decide_pushdown,
    topic_address,
)


@pytest.mark.parametrize(("product", "version", "pushdown"), [
    ("apache-activemq-artemis", "2.44.0", True),
    ("ActiveMQ", "5.18.3", True),
    ("qpid-cpp", "1.39.0", True),
    ("qpid-java-broker", "9.2.0", True),
    ("Qpid Broker-J", "9.2.0", True),
    ("Apache Qpid Broker-J Core", "9.2.1", True),  # what 9.2.1 sends (observed)
    ("RabbitMQ", "3.10.8", False),
    ("RabbitMQ", "4.0.5", False),
    ("some-other-broker", "1.0", False),
])
def test_auto_decides_by_the_product_the_upstream_names(
    product: str, version: str, pushdown: bool,
) -> None:
    properties = {symbol("product"): product, symbol("version"): version}
    decision = decide_pushdown("auto", [], properties)
    assert decision.pushdown is pushdown
    assert version in decision.reason  # the log says which broker it took it for


def test_the_capability_wins_whatever_the_product() -> None:
    offered = [symbol("APACHE.ORG:SELECTOR")]
    assert decide_pushdown("auto", offered, {symbol("product"): "RabbitMQ"}).pushdown
    assert decide_pushdown("auto", offered, None).pushdown


def test_no_product_and_no_capability_means_no_pushdown() -> None:
    decision = decide_pushdown("auto", [symbol("ANONYMOUS-RELAY")], None)
    assert not decision.pushdown
    assert "names no product" in decision.reason
    assert not decide_pushdown("auto", [], {symbol("product"): 42}).pushdown


def test_always_and_never_ignore_the_open_frame() -> None:
    artemis = {symbol("product"): "apache-activemq-artemis"}
    assert not decide_pushdown("never", [symbol("APACHE.ORG:SELECTOR")], artemis).pushdown
    assert decide_pushdown("always", [], {symbol("product"): "RabbitMQ"}).pushdown


def test_every_table_entry_is_reachable_by_its_product_names() -> None:
    for broker in KNOWN_BROKERS:
        for product in broker.products:
            decision = decide_pushdown("auto", [], {"product": product.upper()})
            assert decision.pushdown is broker.evaluates_selectors
            assert broker.label in decision.reason
            non_match = decide_non_match("auto", {"product": product.upper()})
            assert non_match.modified is broker.undeliverable_here
            assert broker.label in non_match.reason
            assert broker.undeliverable_note  # the log says what that broker does


@pytest.mark.parametrize(("product", "version", "modified"), [
    ("apache-activemq-artemis", "2.44.0", True),
    ("ActiveMQ", "5.18.3", False),  # undeliverable-here is a poison ack: the DLQ
    ("qpid-cpp", "1.39.0", True),
    ("Qpid Broker-J", "9.2.0", True),
    ("Apache Qpid Broker-J Core", "9.2.1", True),
    ("RabbitMQ", "3.10.8", False),  # ends the session (observed here)
    ("RabbitMQ", "4.0.5", False),  # dead-letters or drops it
    ("filtex-broker", "0.1.0", True),
    ("some-other-broker", "1.0", False),
])
def test_auto_modifies_non_matches_only_where_the_product_honours_it(
    product: str, version: str, modified: bool,
) -> None:
    decision = decide_non_match("auto", {symbol("product"): product, symbol("version"): version})
    assert decision.modified is modified
    assert version in decision.reason


def test_an_unnamed_or_unknown_upstream_holds_non_matches() -> None:
    unnamed = decide_non_match("auto", None)
    assert not unnamed.modified
    assert "names no product" in unnamed.reason
    unknown = decide_non_match("auto", {symbol("product"): b"Solace"})
    assert not unknown.modified
    assert "'Solace'" in unknown.reason and "undeliverable-here" in unknown.reason


def test_modified_and_hold_ignore_the_product() -> None:
    rabbit = {symbol("product"): "RabbitMQ"}
    assert decide_non_match("modified", rabbit).modified
    assert not decide_non_match("hold", {symbol("product"): "filtex-broker"}).modified
    assert "--upstream-non-match hold" in decide_non_match("hold", rabbit).reason


def test_the_non_match_mode_from_flag_environment_and_file(tmp_path: Path) -> None:
    assert load_config([], env={}).upstream_non_match == "auto"
    assert load_config(["--upstream-non-match", "hold"], env={}).upstream_non_match == "hold"
    env = {"FILTEX_UPSTREAM_NON_MATCH": "modified"}
    assert load_config([], env=env).upstream_non_match == "modified"
    toml = tmp_path / "relay.toml"
    toml.write_text('[broker]\nupstream_non_match = "hold"\n')
    assert load_config(["--config", str(toml)], env=env).upstream_non_match == "modified"
    assert load_config(["--config", str(toml)], env={}).upstream_non_match == "hold"
    with pytest.raises(ConfigError, match="upstream_non_match 'release' is not auto, modified"):
        load_config(["--upstream-non-match", "release"], env={})


def _pem(tmp_path: Path, name: str) -> str:
    path = tmp_path / name
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return str(path)


def test_tls_settings_from_flags_and_environment(tmp_path: Path) -> None:
    ca = _pem(tmp_path, "ca.pem")
    config = load_config(["--upstream", "amqps://h:5671", "--upstream-ca", ca,
                          "--no-upstream-verify-hostname"], env={})
    assert config.upstream_ca == ca
    assert config.upstream_verify_hostname is False
    assert load_config(["--upstream", "amqps://h:5671"], env={}).upstream_verify_hostname
    from_env = load_config([], env={"FILTEX_UPSTREAM": "amqps://h:5671",
                                    "FILTEX_UPSTREAM_VERIFY_HOSTNAME": "no"})
    assert from_env.upstream_verify_hostname is False


@pytest.mark.parametrize(("argv", "text"), [
    (["--upstream", "amqp://h:5672", "--upstream-ca", "CA"], "need an amqps:// upstream"),
    (["--upstream", "amqps://h:5671", "--upstream-ca", "/no/such.pem"], "not a readable file"),
    (["--upstream", "amqps://h:5671", "--upstream-cert", "CA"], "go together"),
    (["--upstream", "amqp://h:5672", "--upstream-held", "0"], "upstream_held must be at least 1"),
])
def test_bad_tls_settings_are_refused(tmp_path: Path, argv: list[str], text: str) -> None:
    argv = [_pem(tmp_path, "ca.pem") if a == "CA" else a for a in argv]
    with pytest.raises(ConfigError, match=text):
        load_config(argv, env={})


def test_a_yes_no_setting_must_say_yes_or_no() -> None:
    with pytest.raises(ConfigError, match="upstream_verify_hostname must be bool"):
        load_config([], env={"FILTEX_UPSTREAM_VERIFY_HOSTNAME": "maybe"})



@pytest.mark.parametrize(("address", "properties", "upstream"), [
    ("prices", {symbol("topic-prefix"): "topic://", symbol("product"): "ActiveMQ"},
     "topic://prices"),
    ("topic://prices", {symbol("topic-prefix"): "topic://"}, "topic://prices"),
    ("prices", {"topic-prefix": b"topic://"}, "topic://prices"),
    ("prices", {symbol("product"): "apache-activemq-artemis"}, "prices"),
    ("prices", None, "prices"),
])
def test_a_topic_gets_the_prefix_the_upstream_announces(
    address: str, properties: dict[object, object] | None, upstream: str,
) -> None:
    assert topic_address(address, properties) == upstream
