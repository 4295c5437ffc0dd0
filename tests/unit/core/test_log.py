"""Structured logs: one JSON object per line with the job fields, and no secret ever
reaches a line (secret-named fields, URL passwords, exception text)."""

from __future__ import annotations

import io
import json
import logging
import uuid

from pydantic import SecretStr

from tenantq.log import configure_logging, job_fields, log_event, redact_text


def _capture() -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    configure_logging("DEBUG", stream)
    return logging.getLogger("tenantq.test"), stream


def _lines(stream: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_one_json_line_per_event_with_job_fields_first() -> None:
    logger, stream = _capture()
    job_id = uuid.uuid4()
    log_event(logger, "job.retrying", **job_fields(job_id, "acme", 2, queue="default"), delay=5.0)
    (line,) = _lines(stream)
    assert line["event"] == "job.retrying"
    assert line["level"] == "info" and line["logger"] == "tenantq.test"
    assert (line["job_id"], line["tenant"], line["attempt"]) == (str(job_id), "acme", 2)
    assert list(line)[4:8] == ["job_id", "tenant", "attempt", "queue"]
    assert line["delay"] == 5.0


def test_secrets_never_reach_a_line() -> None:
    logger, stream = _capture()
    log_event(
        logger,
        "worker.started",
        database_url="postgresql://app:hunter2@db:5432/jobs",
        kafka_config={"sasl.password": "s3cret", "security.protocol": "SASL_SSL"},
        api_token="tok-123",
        dsn=SecretStr("postgresql://app:hunter2@db/jobs"),
        note="connect to https://user:pw9@example.com/x?password=qq&x=1",
    )
    try:
        raise RuntimeError("cannot reach postgresql://app:hunter2@db/jobs")
    except RuntimeError:
        logger.exception("db.failed")
    text = stream.getvalue()
    for secret in ("hunter2", "s3cret", "tok-123", "pw9", "password=qq"):
        assert secret not in text
    first, second = _lines(stream)
    assert first["kafka_config"] == {"sasl.password": "***", "security.protocol": "SASL_SSL"}
    assert second["exc_class"] == "RuntimeError"
    assert "postgresql://app:***@db/jobs" in str(second["exc"])


def test_reserved_names_are_kept_renamed_and_configure_does_not_double() -> None:
    logger, _ = _capture()
    logger2, stream = _capture()
    log_event(logger2, "x", name="clash", msg="also")
    (line,) = _lines(stream)
    assert (line["field_name"], line["field_msg"]) == ("clash", "also")


def test_redact_text_leaves_plain_urls_alone() -> None:
    assert redact_text("http://example.com:8080/a") == "http://example.com:8080/a"
    assert redact_text("postgresql://u:p@h/d") == "postgresql://u:***@h/d"
