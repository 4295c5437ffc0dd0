"""Settings: one validated model; bad values are one-line errors naming the setting; secrets
never appear in a repr."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from tenantq.errors import ConfigurationError
from tenantq.settings import QueueSettings, Settings, WebSettings, load_settings, seconds_of


def test_environment_is_read_with_prefix_and_nesting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENANTQ_KAFKA_BOOTSTRAP_SERVERS", "broker:9092")
    monkeypatch.setenv("TENANTQ_WORKER__LEASE_SECONDS", "42")
    monkeypatch.setenv("TENANTQ_QUEUES", '{"high": {"partitions": 3}, "low": {}}')
    settings = load_settings()
    assert settings.kafka_bootstrap_servers == "broker:9092"
    assert settings.worker.lease_seconds == 42
    assert settings.queue("high").partitions == 3
    assert settings.queue("low").retry_delays_seconds == (5.0, 30.0, 300.0, 1800.0)


def test_bad_value_is_one_line_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENANTQ_WORKER__LEASE_SECONDS", "-3")
    with pytest.raises(ConfigurationError) as raised:
        load_settings()
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("TENANTQ_WORKER__LEASE_SECONDS:")


def test_secrets_never_in_repr() -> None:
    settings = Settings(
        kafka_bootstrap_servers="b:9092",
        database_url="postgresql://app:hunter2@db/jobs",
        kafka_config={"sasl.password": "s3cret", "security.protocol": "SASL_SSL"},
    )
    text = repr(settings) + str(settings)
    assert "hunter2" not in text
    assert "s3cret" not in text
    assert "SASL_SSL" in text
    # ... but they pass through to the clients.
    assert settings.kafka_client_config()["sasl.password"] == "s3cret"
    assert settings.require_database_url().endswith("app:hunter2@db/jobs")


SECRET_KAFKA_CONFIG = {
    "sasl.password": "sasl-pw",
    "ssl.key.password": "key-pw",
    "ssl.keystore.password": "keystore-pw",
    "ssl.key.pem": "-----BEGIN PRIVATE KEY-----",
    "sasl.oauthbearer.client.secret": "client-secret",
    "sasl.oauthbearer.assertion.private.key.passphrase": "pass-phrase-value",
    "sasl.oauthbearer.config": "clientSecret=inline-secret",
}


def test_secrets_never_in_a_dump() -> None:
    settings = Settings(
        kafka_bootstrap_servers="b:9092",
        database_url="postgresql://app:hunter2@db/jobs",
        kafka_config={**SECRET_KAFKA_CONFIG, "security.protocol": "SASL_SSL"},
    )
    dumps = (
        settings.model_dump_json()
        + str(settings.model_dump())
        + str(settings.model_dump(mode="json"))
    )
    for secret in (*SECRET_KAFKA_CONFIG.values(), "hunter2"):
        assert secret not in dumps
    assert "SASL_SSL" in dumps and '"sasl.password":"***"' in settings.model_dump_json()
    # The clients still get every value.
    assert settings.kafka_client_config()["ssl.keystore.password"] == "keystore-pw"
    assert settings.model_copy().kafka_config == {
        **SECRET_KAFKA_CONFIG,
        "security.protocol": "SASL_SSL",
    }


def test_client_overrides_win_over_pass_through() -> None:
    settings = Settings(kafka_bootstrap_servers="b:1", kafka_config={"linger.ms": "50"})
    config = settings.kafka_client_config(**{"linger.ms": 1, "acks": "all"})
    assert config == {"bootstrap.servers": "b:1", "linger.ms": 1, "acks": "all"}


@pytest.mark.parametrize(
    "delays", [(), (5.0, 5.0), (30.0, 5.0), (float("nan"),), (-1.0,), (float("inf"),)]
)
def test_retry_delays_must_increase(delays: tuple[float, ...]) -> None:
    with pytest.raises(ValueError):
        QueueSettings(retry_delays_seconds=delays)


def test_unknown_queue_names_declared_ones() -> None:
    settings = Settings(queues={"a": QueueSettings(), "b": QueueSettings()})
    with pytest.raises(ConfigurationError, match="declares: a, b"):
        settings.queue("c")


def test_invalid_queue_name_rejected() -> None:
    with pytest.raises(ValueError):
        Settings(queues={"bad name!": QueueSettings()})


def test_missing_servers_are_clear_errors(tmp_path: object) -> None:
    settings = Settings(dev_home=tmp_path)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="tenantq dev up"):
        settings.require_bootstrap_servers()
    with pytest.raises(ConfigurationError, match="tenantq dev up"):
        settings.require_database_url()


def test_a_secure_dev_stack_gives_its_client_settings_with_its_brokers_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("TENANTQ_KAFKA_BOOTSTRAP_SERVERS", "TENANTQ_KAFKA_CONFIG", "TENANTQ_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    security = {"security.protocol": "SASL_SSL", "sasl.password": "pw"}
    (tmp_path / "state.json").write_text(
        json.dumps({"kafka_bootstrap_servers": "127.0.0.1:1", "kafka_config": security})
    )
    assert Settings(dev_home=tmp_path).kafka_config == security
    elsewhere = Settings(dev_home=tmp_path, kafka_bootstrap_servers="kafka.example:9092")
    assert elsewhere.kafka_config == {}
    own = Settings(dev_home=tmp_path, kafka_config={"client.id": "x"})
    assert own.kafka_config == {"client.id": "x"}
    assert "pw" not in repr(Settings(dev_home=tmp_path))


def test_settings_default_to_localhost() -> None:
    assert Settings.model_fields["metrics_host"].default == "127.0.0.1"


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("0s", 0), ("90m", 5400), ("12h", 43200), ("7d", 604800), ("2w", 1209600), ("1.5s", 1.5)]
    + [("500ms", 0.5), ("30", 30), (45, 45), (2.5, 2.5)],
)
def test_durations_read_with_units_or_as_seconds(written: object, seconds: float) -> None:
    from tenantq.settings import parse_duration

    assert parse_duration(written).total_seconds() == seconds


@pytest.mark.parametrize("written", ["-1s", "7 days", "d", "nan", "inf", -3, True, None])
def test_bad_durations_are_refused(written: object) -> None:
    from tenantq.settings import parse_duration

    with pytest.raises(ValueError):
        parse_duration(written)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (1.5, "1.5s"),
        (90, "90s"),
        (5_400, "90m"),
        (7_200, "2h"),
        (86_400 * 30, "30d"),
        # Large counts stay whole numbers, never exponent notation.
        (60 * 1_000_001, "1000001m"),
    ],
)
def test_durations_are_written_in_their_largest_whole_unit(seconds: float, text: str) -> None:
    from tenantq.settings import duration_text, parse_duration

    assert duration_text(dt.timedelta(seconds=seconds)) == text
    assert parse_duration(text).total_seconds() == seconds


def test_retention_reads_durations_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENANTQ_RETENTION__SUCCEEDED", "90m")
    monkeypatch.setenv("TENANTQ_RETENTION__DEAD", "3600")
    retention = load_settings().retention
    assert retention.succeeded.total_seconds() == 5400
    assert retention.dead.total_seconds() == 3600
    assert retention.canceled.days == 7 and retention.workers.days == 1
    monkeypatch.setenv("TENANTQ_RETENTION__CANCELED", "soon")
    with pytest.raises(ConfigurationError, match="TENANTQ_RETENTION__CANCELED"):
        load_settings()


def test_an_empty_console_token_is_no_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENANTQ_WEB__TOKEN", "")
    assert load_settings().web.token is None
    monkeypatch.setenv("TENANTQ_WEB__TOKEN", "  ")
    assert load_settings().web.token is None


def test_console_hosts_and_proxies_are_checked() -> None:
    web = WebSettings(
        allowed_hosts=["Oncall.Example.com.", "[::1]"], trusted_proxies=["10.0.0.0/8"]
    )
    assert web.allowed_hosts == ("oncall.example.com", "::1")
    with pytest.raises(ValueError, match="not a host name"):
        WebSettings(allowed_hosts=["evil.example/path"])
    with pytest.raises(ValueError, match="not an address or a network"):
        WebSettings(trusted_proxies=["proxy.example"])


@pytest.mark.parametrize("written", ["99999999d", "36501d", "1e300", float("inf")])
def test_durations_are_bounded_with_a_clear_message(written: object) -> None:
    from tenantq.settings import MAX_DURATION, parse_duration

    with pytest.raises(ValueError, match=r"at most 36500d|finite") as raised:
        parse_duration(written)
    assert len(str(raised.value)) < 120
    assert parse_duration("36500d") == MAX_DURATION


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (dt.timedelta(minutes=2), 120.0),
        (90, 90.0),
        (1.5, 1.5),
        (True, None),
        ("5", None),
        (None, None),
    ],
)
def test_seconds_of_reads_timedeltas_and_numbers_only(value: object, seconds: float | None) -> None:
    assert seconds_of(value) == seconds
