"""Structured logs: one JSON object per line, with job id, tenant and attempt as fields.

Named ``log`` rather than ``logging`` so it never shadows the standard library. Use it as::

    from tenantq.log import configure_logging, job_fields, log_event

    configure_logging("INFO")
    log_event(logger, "job.retrying", **job_fields(job_id, tenant, attempt), error_class="...")

Secrets never reach a line: fields whose name suggests a secret are masked, passwords inside
URLs (``postgresql://user:pass@host``) are masked in every string, and payloads are not a
field at all (they are business data; the job id finds them).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sys
from collections.abc import Mapping
from typing import IO, Any

#: Field names whose values are masked whatever they hold.
SECRET_FIELD_FRAGMENTS = (
    "password",
    "passwd",
    "secret",
    "token",
    "credential",
    "authorization",
    "api_key",
    "apikey",
    "private_key",
    "key.pem",
    "cookie",
)
MASK = "***"
_URL_PASSWORD = re.compile(r"(?P<prefix>[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s]*:)[^@\s]*@")
_URL_QUERY_PASSWORD = re.compile(r"(?i)(?P<prefix>password=)[^&\s]*")
#: Attribute names of every LogRecord, so that ``extra`` fields can be told apart.
_RECORD_ATTRIBUTES = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
#: Fields the worker attaches to job events; they come first on the line.
JOB_FIELDS = ("job_id", "tenant", "attempt", "queue", "job_type", "worker")


def redact_text(text: str) -> str:
    """``text`` with passwords in URLs and ``password=`` query parameters masked."""
    text = _URL_PASSWORD.sub(lambda match: f"{match.group('prefix')}{MASK}@", text)
    return _URL_QUERY_PASSWORD.sub(lambda match: f"{match.group('prefix')}{MASK}", text)


def is_secret_field(name: str) -> bool:
    """True if a field called ``name`` must never be logged in clear."""
    lowered = name.lower()
    return any(fragment in lowered for fragment in SECRET_FIELD_FRAGMENTS)


def redact(name: str, value: Any) -> Any:
    """The loggable form of field ``name``: masked if secret, JSON-safe, URLs redacted."""
    if is_secret_field(name):
        return MASK
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {str(key): redact(str(key), item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [redact(name, item) for item in value]
    # Anything else (UUID, datetime, SecretStr, Path) by its str(); SecretStr prints masked.
    return redact_text(str(value))


def job_fields(
    job_id: object, tenant: str, attempt: int | None = None, **more: object
) -> dict[str, object]:
    """The standard fields of a job event."""
    return {"job_id": str(job_id), "tenant": tenant, "attempt": attempt, **more}


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line: ``ts``, ``level``, ``logger``, ``event``, the job
    fields, then any other ``extra`` fields, then ``exc_class``/``exc`` for an exception."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": redact_text(record.getMessage()),
        }
        extras = {
            key: value
            for key, value in record.__dict__.items()
            if key not in _RECORD_ATTRIBUTES and not key.startswith("_")
        }
        for key in JOB_FIELDS:
            if key in extras:
                line[key] = redact(key, extras.pop(key))
        for key in sorted(extras):
            line[key] = redact(key, extras[key])
        if record.exc_info and record.exc_info[0] is not None:
            line["exc_class"] = record.exc_info[0].__name__
            line["exc"] = redact_text(self.formatException(record.exc_info))
        return json.dumps(line, ensure_ascii=False, separators=(",", ":"), default=str)


def log_event(logger: logging.Logger, event: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log ``event`` (a short dotted name such as ``job.retrying``) with ``fields``."""
    if logger.isEnabledFor(level):
        clashes = _RECORD_ATTRIBUTES.intersection(fields)
        # A field named like a LogRecord attribute (``name``, ``msg``) would make logging
        # raise; keep it, renamed, rather than lose the event.
        for key in clashes:
            fields[f"field_{key}"] = fields.pop(key)
        logger.log(level, event, extra=fields)


def configure_logging(level: str | int = "INFO", stream: IO[str] | None = None) -> logging.Handler:
    """Send the ``tenantq`` logger's records to ``stream`` (stderr) as JSON lines. Returns the
    handler; calling again replaces it rather than doubling every line."""
    logger = logging.getLogger("tenantq")
    for handler in list(logger.handlers):
        if getattr(handler, "_tenantq_json", False):
            logger.removeHandler(handler)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter())
    handler._tenantq_json = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(level.upper() if isinstance(level, str) else level)
    return handler
