"""The stream settings from flags, the environment and TOML: --stream, --stream-max-bytes,
--stream-max-age."""

from __future__ import annotations

from pathlib import Path

import pytest

from filtex_broker.config import ConfigError, load_config
from filtex_broker.settings import parse_age


def test_stream_settings_from_flags() -> None:
    config = load_config(["--stream", "events.*", "--stream", "audit", "--stream-max-bytes",
                          "10GiB", "--stream-max-age", "7D"], env={})
    assert config.streams == ("events.*", "audit")
    assert (config.stream_max_bytes, config.stream_max_age) == (10 << 30, 7 * 86400)


def test_stream_settings_from_the_environment() -> None:
    config = load_config([], env={"FILTEX_STREAMS": "events.*, audit",
                                  "FILTEX_STREAM_MAX_BYTES": "500MB",
                                  "FILTEX_STREAM_MAX_AGE": "90"})
    assert config.streams == ("events.*", "audit")
    assert (config.stream_max_bytes, config.stream_max_age) == (500 * 1000**2, 90.0)


def test_stream_settings_from_toml_and_the_precedence(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text('[broker]\nstreams = ["events.*"]\nstream_max_bytes = "2GiB"\n'
                    'stream_max_age = "1h"\n')
    config = load_config(["--config", str(toml)], env={})
    assert (config.streams, config.stream_max_bytes, config.stream_max_age) == (
        ("events.*",), 2 << 30, 3600.0)
    config = load_config(["--config", str(toml), "--stream", "audit"],
                         env={"FILTEX_STREAM_MAX_AGE": "none"})
    assert (config.streams, config.stream_max_age) == (("audit",), None)


def test_the_defaults_are_no_stream_a_gibibyte_and_no_age_limit() -> None:
    config = load_config([], env={})
    assert (config.streams, config.stream_max_bytes, config.stream_max_age) == ((), 1 << 30, None)


@pytest.mark.parametrize(("given", "seconds"), [
    (0, None), ("0", None), ("none", None), ("", None), ("None", None), (1.5, 1.5),
    ("3600", 3600.0), ("1h", 3600.0), ("7D", 7 * 86400.0), ("2M", 60 * 86400.0),
])
def test_an_age_is_seconds_or_rabbitmqs_units(given: object, seconds: float | None) -> None:
    assert parse_age(given) == seconds


@pytest.mark.parametrize(("argv", "says"), [
    (["--stream-max-age", "3 weeks"], "stream_max_age: '3 weeks' is not an age"),
    (["--stream-max-age", "1d"], "stream_max_age: '1d' is not an age"),
    (["--stream-max-age", "-5"], "stream_max_age: '-5' is not an age"),
    (["--stream-max-bytes", "lots"], "stream_max_bytes"),
    (["--stream-max-bytes", "0"], "stream_max_bytes must be at least 1"),
    (["--stream", "x", "--upstream", "amqp://h:5672"], "streams: a relay"),
])
def test_a_bad_stream_setting_says_which(argv: list[str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        load_config(argv, env={})


def test_a_bad_age_in_toml_says_which(tmp_path: Path) -> None:
    toml = tmp_path / "broker.toml"
    toml.write_text("[broker]\nstream_max_age = true\n")
    with pytest.raises(ConfigError, match="stream_max_age: True is not an age"):
        load_config(["--config", str(toml)], env={})
