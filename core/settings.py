"""The one configuration model of tenantq.

Every knob is a field here, read from ``TENANTQ_*`` environment variables (nested models with
``__``, e.g. ``TENANTQ_WORKER__LEASE_SECONDS=60``; dicts and lists as JSON) or passed in code as
``tenantq.Settings(...)``. Environment variables are read here and in the CLI only.

When neither ``TENANTQ_KAFKA_BOOTSTRAP_SERVERS`` nor ``TENANTQ_DATABASE_URL`` is set, the
endpoints of a running dev stack (``tenantq dev up``) are used, read from its state file.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import math
import os
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    SecretStr,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from tenantq.errors import ConfigurationError
from tenantq.tenant_limits import MOST_BURST, MOST_RATE, MOST_RUNNING, MOST_WEIGHT

#: librdkafka keys whose values are secrets: never logged, never shown in a repr or a dump
#: (``sasl.password``, ``ssl.key.password``, ``ssl.keystore.password``, ``ssl.key.pem``,
#: ``sasl.oauthbearer.client.secret``, the assertion key's passphrase, an OAUTHBEARER config
#: line that may carry a client secret, a pasted JAAS line).
SECRET_KAFKA_KEY_FRAGMENTS = (
    "password",
    "passphrase",
    "secret",
    "key.pem",
    "private.key",
    "token",
    "credential",
    "jaas",
    "oauthbearer.config",
)
#: What a secret value is shown as.
SECRET_MASK = "***"


def is_secret_kafka_key(key: str) -> bool:
    """Whether the librdkafka setting ``key`` holds a secret (``SECRET_KAFKA_KEY_FRAGMENTS``)."""
    lowered = key.lower()
    return any(fragment in lowered for fragment in SECRET_KAFKA_KEY_FRAGMENTS)


def redact_kafka_config(config: dict[str, str]) -> dict[str, str]:
    """``config`` with the values of secret keys masked."""
    return {
        key: SECRET_MASK if is_secret_kafka_key(key) else value for key, value in config.items()
    }


DEFAULT_RETRY_DELAYS_SECONDS = (5.0, 30.0, 300.0, 1800.0)


def default_dev_home() -> Path:
    """Where the dev stack keeps its state file, data directories and the Kafka jar cache."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tenantq"


class QueueSettings(BaseModel):
    """One queue: a family of Kafka topics (main, retry tiers, DLQ) and its consumer group."""

    model_config = {"extra": "forbid", "frozen": True}

    partitions: int = Field(12, ge=1, le=10_000, description="Partitions of the main topic.")
    retry_partitions: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description="Partitions of each retry tier and the DLQ (default: same as the main topic).",
    )
    replication_factor: int | None = Field(
        None,
        ge=1,
        le=32,
        description="Replication factor of every topic; unset = the cluster's: 3 when it "
        "has three brokers or more (with min.insync.replicas=2), else one per broker.",
    )
    retry_delays_seconds: tuple[float, ...] = Field(
        DEFAULT_RETRY_DELAYS_SECONDS,
        description="Fixed delays of the retry tiers, strictly increasing.",
    )
    weight: int = Field(1, ge=1, le=1000, description="Share of worker attention when weighted.")
    topic_config: dict[str, str] = Field(
        default_factory=dict,
        description="Extra topic configs applied at creation (e.g. retention.ms).",
    )

    @field_validator("retry_delays_seconds")
    @classmethod
    def _delays_increase(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value:
            raise ValueError("at least one retry tier is required")
        for delay in value:
            if not math.isfinite(delay) or delay <= 0:
                raise ValueError(f"retry delay {delay!r} must be a positive finite number")
        if any(b <= a for a, b in zip(value, value[1:], strict=False)):
            raise ValueError("retry delays must be strictly increasing")
        return value

    @property
    def tier_partitions(self) -> int:
        return self.retry_partitions or self.partitions


#: The most member processes a worker starts unless told (``WorkerSettings.processes``): each
#: holds a Kafka consumer and a handful of database connections, which a large host's cores
#: would multiply past what one PostgreSQL serves comfortably.
DEFAULT_PROCESSES_CAP = 4
#: The bounds of a worker's members and handler slots, whether set here or on the CLI.
MAX_PROCESSES = 64
MAX_CONCURRENCY = 10_000


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform tells it)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return len(affinity(0))
    return os.cpu_count() or 1


class WorkerSettings(BaseModel):
    """Defaults of ``tenantq worker``; each can be overridden per job type or on the CLI."""

    model_config = {"extra": "forbid"}

    concurrency: int = Field(32, ge=1, le=MAX_CONCURRENCY, description="Handler slots per process.")
    processes: int | None = Field(
        None,
        ge=1,
        le=MAX_PROCESSES,
        description="Member processes of `tenantq worker` (each a consumer group member with "
        "its own handler process and `concurrency` slots); `--processes` overrides it. None: "
        f"one per CPU the worker may run on, at most {DEFAULT_PROCESSES_CAP}. Each member holds "
        "`claim_connections` + 4 PostgreSQL connections (results, heartbeat, placement and "
        "quota watchers), the supervisor two more: size `max_connections` for the fleet.",
    )
    lease_seconds: float = Field(30.0, gt=0, le=86_400, description="Length of a job lease.")
    heartbeat_interval_seconds: float = Field(
        5.0, gt=0, le=3_600, description="How often leases of running jobs are extended."
    )
    drain_seconds: float = Field(
        30.0, ge=0, le=86_400, description="Graceful shutdown: how long running jobs may finish."
    )
    revoke_grace_seconds: float = Field(
        5.0,
        ge=0,
        le=3_600,
        description="Rebalance: how long running jobs of revoked partitions may finish.",
    )
    final_write_seconds: float = Field(
        10.0,
        gt=0,
        le=3_600,
        description="Graceful shutdown, after the drain: how long each last write may take "
        "(the results to the database, the retries and dead letters to Kafka, the final "
        "offset commit). Past it the worker goes on without it and loses nothing: the "
        "partitions' next owner reads from the last commit, and what finished is marked done.",
    )
    leave_group_seconds: float = Field(
        30.0,
        gt=0,
        le=3_600,
        description="Graceful shutdown: how long leaving the consumer group may take (a "
        "close can hang in a rebalance, or with the broker gone). Past it the worker exits "
        "anyway, and the group notices through the session timeout.",
    )
    read_ahead_per_partition: int = Field(
        1_000,
        ge=1,
        le=1_000_000,
        description="Messages read ahead of the commit point per partition: a worker reads "
        "no further than this times the main-topic partitions it owns, a busy partition "
        "using an idle one's share, and pauses a partition only past twice its share; "
        "librdkafka fetches about as many ahead of what the worker has taken "
        "(queued.min.messages).",
    )
    poll_batch: int = Field(500, ge=1, le=100_000, description="Messages taken per poll.")
    claim_ahead_limit: int | None = Field(
        None,
        ge=0,
        le=100_000,
        description="Most jobs leased beyond the free handler slots, so the next batch is "
        "claimed while the current one runs (None: 1,000 or the worker's concurrency, "
        "whichever is larger; 0: claim only for free slots). The number used is what the "
        "slots free up in about two claim round trips: a batch for short jobs, none for long "
        "ones. With the handler process, those its slots end within about 50 ms at the recent "
        "rate wait there and start the moment a slot frees (their timeout runs from their "
        "start); the rest wait in the member, where a revoke or the stop gives them back.",
    )
    claim_connections: int = Field(
        2,
        ge=1,
        le=8,
        description="Connections the claims of main-topic and retry jobs use, each running "
        "one claim at a time. A claim's commit waits for its WAL to reach the disk, and the "
        "jobs of the claims behind it wait too: with two, the next claim runs while the "
        "last one's flush is under way, which shortens enqueue-to-start when the disk is slow "
        "to flush (every claim still commits before its jobs start). Each is one more "
        "Postgres connection per worker process; 1: one claim at a time.",
    )
    default_timeout_seconds: float = Field(300.0, gt=0, description="Handler timeout default.")
    default_max_attempts: int = Field(8, ge=1, le=1_000, description="Max attempts default.")
    stale_owner_seconds: float = Field(
        60.0, gt=0, description="A lease owner whose heartbeat is older than this is gone."
    )
    group_protocol: Literal["consumer", "classic"] = Field(
        "consumer",
        description="Consumer-group protocol: 'consumer' (KIP-848, Kafka 4.0+; the broker "
        "assigns, per topic, so main and retry partitions spread evenly) or 'classic' "
        "(cooperative-sticky, for older brokers; it can hand a late joiner a whole topic).",
    )
    group_remote_assignor: str = Field(
        "range",
        description="Broker-side assignor under the 'consumer' protocol: 'range' gives each "
        "member the same partition numbers of the main topic and of every retry tier.",
    )
    unknown_type_attempts: int = Field(
        5, ge=1, le=1_000, description="Retries of a job type no worker knows, before it is dead."
    )
    handler_process: bool = Field(
        True,
        description="Run handlers in a handler process apart from the group member, so that a "
        "handler that kills its process costs a new handler process, never the member (needs "
        "the app as MODULE:APP, as `tenantq worker` has it; `Worker(app)` alone uses threads).",
    )
    crash_budget: int = Field(
        3,
        ge=1,
        le=1_000,
        description="Process deaths a job may be part of (running when the process died, not "
        "known innocent) before it is dead as a poison job. Such deaths do not spend attempts.",
    )
    database_outage_limit_seconds: float | None = Field(
        None,
        gt=0,
        description="Stop the worker (exit code 3) when PostgreSQL stays unreachable this long; "
        "unset: wait for it forever, holding results and claiming nothing.",
    )
    offsets_wait_for_standbys: int = Field(
        0,
        ge=0,
        le=16,
        description="With asynchronous streaming replication: commit Kafka offsets only behind "
        "state that this many standbys have flushed (pg_stat_replication; the worker's role "
        "needs pg_read_all_stats), and when the database fails over (a new timeline), read "
        "every partition again from there, so a failover to a standby that had not received "
        "the last transactions loses no job (what it lacked runs again). 0: offsets follow "
        "the primary alone (no standby, or synchronous replication, which loses nothing).",
    )

    def member_processes(self) -> int:
        """``processes``, or one per CPU the worker may run on, at most
        ``DEFAULT_PROCESSES_CAP``."""
        if self.processes is not None:
            return self.processes
        return min(usable_cpus(), DEFAULT_PROCESSES_CAP)


class TenantIsolationSettings(BaseModel):
    """Noisy-neighbour protection: the hot lane and the per-tenant cap of a worker's slots."""

    model_config = {"extra": "forbid"}

    hot_lane: bool = Field(
        True,
        description="Move a tenant that dominates a partition's backlog to the queue's hot lane "
        "(its own topic), so the tenants sharing its partition stop waiting behind it.",
    )
    hot_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="A tenant holding at least this share of a partition's unfinished messages "
        "(the read-ahead window) is hot, once the partition's backlog reaches hot_backlog.",
    )
    hot_backlog: int = Field(
        200,
        ge=1,
        le=1_000_000,
        description="Messages a partition must have waiting (unfinished in the worker plus not "
        "yet read) before any of its tenants counts as hot.",
    )
    lane_read_ahead_per_partition: int = Field(
        25,
        ge=1,
        le=1_000_000,
        description="Messages read ahead of the commit point per hot-lane partition (the "
        "main topic's is worker.read_ahead_per_partition). Small on purpose: every worker "
        "shares the lane's backlog and reads it as slots free, and a large window makes a "
        "worker read the lane in bursts that the other tenants' messages wait behind (at a "
        "flood's start every worker decodes a full window of each lane partition it owns at "
        "once). At 25, the lane partitions a worker owns together still hold several times the "
        "slots one tenant may take there (12 lane partitions over 2 workers: 150 against 24).",
    )
    lane_weight: int = Field(
        1,
        ge=1,
        le=1000,
        description="Dispatch weight of the hot lane against its queue's main topic (the "
        "queue's weight): when both wait, the lane gets this share; alone, it gets every slot.",
    )
    release_after_seconds: float = Field(
        30.0,
        gt=0,
        le=86_400,
        description="A tenant moved to the lane (by a worker) goes back once it has been there "
        "this long and the lane has been drained this long.",
    )
    tenant_max_share: float = Field(
        0.75,
        gt=0,
        le=1,
        description="Share of a worker's slots one tenant may hold at once (at least one slot); "
        "a job type's tenant_concurrency overrides it for that type. 1 = no cap.",
    )


class TenantDefaults(BaseModel):
    """The limits of a tenant without a row of its own in ``tenantq_tenants`` (``tenantq
    tenants set``), and of what a tenant's own tenant-wide row leaves unset. Unset = no limit;
    enforced fleet-wide where leases are taken (docs/quotas.md)."""

    model_config = {"extra": "forbid"}

    max_running: int | None = Field(
        None,
        ge=1,
        le=MOST_RUNNING,
        description="Attempts of one tenant running at once across every worker (their leases "
        "count until released or expired, a dead worker's too); unset = no cap. Every tenant "
        "then takes the limited claim (a row update per tenant per claim).",
    )
    rate: float | None = Field(
        None,
        gt=0,
        le=MOST_RATE,
        allow_inf_nan=False,
        description="Attempts of one tenant started per second across every worker (GCRA: "
        "at most burst + rate x seconds in any span); unset = no limit.",
    )
    burst: int | None = Field(
        None,
        ge=1,
        le=MOST_BURST,
        description="Starts above the default rate allowed at once (1 when unset: evenly "
        "spaced); needs rate.",
    )
    weight: int = Field(
        1,
        ge=1,
        le=MOST_WEIGHT,
        description="A tenant's share of a queue when tenants with other weights wait for it "
        "(the starts of two backlogged tenants go in the ratio of their weights). Queues "
        "where no tenant has a weight of its own are not shared out.",
    )

    @model_validator(mode="after")
    def _burst_needs_a_rate(self) -> TenantDefaults:
        if self.burst is not None and self.rate is None:
            raise ValueError("burst needs a rate (TENANTQ_TENANT_DEFAULTS__RATE)")
        return self


class ProducerSettings(BaseModel):
    """Defaults of ``tenantq.Producer``; librdkafka keys in ``kafka_config`` override them."""

    model_config = {"extra": "forbid"}

    linger_ms: float = Field(
        1.0,
        ge=0,
        le=60_000,
        description="librdkafka linger.ms: how long a produced message may wait for others "
        "to share its request. A job waits it out between enqueue and a worker (5 ms, "
        "librdkafka's default, was most of the enqueue-to-start median at a light load); "
        "the SDK's calls produce their jobs back to back, which fills requests without it.",
    )
    batch_size: int = Field(1_000_000, ge=1, description="librdkafka batch.size in bytes.")
    compression: str = Field("lz4", description="librdkafka compression.type.")
    buffer_timeout_seconds: float = Field(
        5.0, ge=0, description="How long enqueue blocks on a full local buffer before QueueFull."
    )
    flood_rate_per_second: float | None = Field(
        1_000.0,
        gt=0,
        description="A tenant that sends at least this many jobs a second through one "
        "producer, and at least a quarter of its jobs (measured over 0.1 s), floods it: its "
        "jobs go through a second Kafka client of the same configuration, so that the other "
        "tenants' jobs are not queued behind its requests in one client (one connection per "
        "broker, five requests in flight, answered in turn). It goes back once under half the "
        "rate for 5 s; each tenant's jobs keep their order across a move. None (in Python, or "
        "TENANTQ_PRODUCER='{\"flood_rate_per_second\": null}'): one client for every tenant.",
    )
    tenant_rate_per_second: float | None = Field(
        None, gt=0, description="Per-tenant admission rate (token bucket); none = unlimited."
    )
    tenant_burst: int = Field(1_000, ge=1, description="Per-tenant token bucket burst.")
    tenant_rate_overrides: dict[str, float] = Field(
        default_factory=dict, description="Per-tenant admission rates that replace the default."
    )
    latency_budget_seconds: float | None = Field(
        None,
        gt=0,
        description="Reject enqueues when the queue's oldest message is older than this.",
    )
    placement_ttl_seconds: float = Field(
        1.0,
        ge=0,
        description="How long the placement table is cached by producers. Until a producer "
        "rereads it, a tenant just moved to the hot lane keeps landing on its old partition, "
        "and workers must send each of those jobs on: one small query a second per producer "
        "keeps that short. With placement_watch, this is only the fallback.",
    )
    placement_watch: bool = Field(
        True,
        description="Listen for placement changes (LISTEN tenantq_placement, one more database "
        "connection per producer and worker) and reread the table as soon as it changes, so a "
        "tenant moved to the hot lane is followed at once instead of within "
        "placement_ttl_seconds. Switch off behind a pooler that does not pass notifications.",
    )


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0}
#: The longest duration read: "that long ago" must still be a time (the calendar begins in
#: year 1), and no retention or filter needs more.
MAX_DURATION = dt.timedelta(days=36_500)


class DurationOutOfRange(ValueError):
    """A duration written right but negative, not finite or over ``MAX_DURATION``."""


def parse_duration(value: object) -> dt.timedelta:
    """A duration written ``0s``, ``90m``, ``12h``, ``7d``, ``2w`` (or ``500ms``), a number
    of seconds, or a ``timedelta``; negative, non-finite values and values over
    ``MAX_DURATION`` (100 years) are refused with a ``ValueError`` saying so."""
    seconds = _written_seconds(value) if isinstance(value, str) else seconds_of(value)
    if seconds is None:
        raise ValueError(f"{_shown(value)} is not a duration (examples: 0s, 90m, 12h, 7d)")
    if not math.isfinite(seconds) or seconds < 0:
        raise DurationOutOfRange(f"a duration must be finite and not negative, got {_shown(value)}")
    if seconds > MAX_DURATION.total_seconds():
        raise DurationOutOfRange(
            f"a duration must be at most {MAX_DURATION.days}d (100 years), got {_shown(value)}"
        )
    return dt.timedelta(seconds=seconds)


def seconds_of(value: object) -> float | None:
    """The seconds of a ``timedelta`` or of a number (a bool is not one), else None. Not
    checked for range: each caller says what it accepts and how it refuses the rest."""
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _written_seconds(text: str) -> float | None:
    """The seconds ``text`` says with a unit (``90m``) or as a plain number, else None."""
    match = _DURATION.match(text.lower())
    if match is not None:
        return float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    try:
        return float(text)
    except ValueError:
        return None


def duration_text(value: dt.timedelta) -> str:
    """``value`` as a setting would be written: in whole days, hours or minutes when it is
    one (``7d``, ``90m``), else in seconds (``0s``, ``1.5s``)."""
    seconds = value.total_seconds()
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def _shown(value: object) -> str:
    """A bounded ``repr`` for error messages (the value may be anything anyone typed)."""
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:39] + "…"


#: A ``timedelta`` setting that also reads ``7d``, ``90m``, ``0s`` or plain seconds.
Duration = Annotated[dt.timedelta, BeforeValidator(parse_duration)]


class OutboxSettings(BaseModel):
    """The outbox relay (``tenantq outbox relay``, and inside every ``tenantq worker``)."""

    model_config = {"extra": "forbid"}

    relay_in_worker: bool = Field(
        True, description="Run a relay inside every `tenantq worker` (one per queue is active)."
    )
    poll_interval_seconds: float = Field(
        0.1,
        gt=0,
        le=60,
        description="How often an idle relay looks for committed entries (the added latency).",
    )
    batch_size: int = Field(
        500, ge=1, le=100_000, description="Entries read, published and marked per round."
    )
    publish_timeout_seconds: float = Field(
        10.0, gt=0, le=600, description="How long a round waits for Kafka's acknowledgements."
    )
    standby_seconds: float = Field(
        2.0,
        gt=0,
        le=600,
        description="How often a standby relay tries to take over a queue another relay holds.",
    )


class PeriodicSettings(BaseModel):
    """The periodic scheduler that runs inside every ``tenantq worker`` of an app with
    ``app.periodic(...)`` schedules."""

    model_config = {"extra": "forbid"}

    enabled: bool = Field(True, description="Schedule periodic jobs from `tenantq worker`.")
    poll_interval_seconds: float = Field(
        1.0, gt=0, le=60, description="Longest sleep of the scheduler between looks at its ticks."
    )
    misfire_grace_seconds: float = Field(
        60.0,
        ge=0,
        le=86_400,
        description="Without catch_up, a tick later than this (no worker ran) is skipped.",
    )


class RetentionSettings(BaseModel):
    """How long finished jobs (with their attempt rows) and stopped workers are kept; every
    ``tenantq worker`` prunes on this policy, one pruner at a time."""

    model_config = {"extra": "forbid"}

    enabled: bool = Field(True, description="Prune from `tenantq worker` on this policy.")
    succeeded: Duration = Field(
        dt.timedelta(days=1), description="Keep succeeded jobs this long after they finished."
    )
    dead: Duration = Field(
        dt.timedelta(days=30), description="Keep dead jobs this long after they finished."
    )
    canceled: Duration = Field(
        dt.timedelta(days=7), description="Keep canceled jobs this long after they finished."
    )
    workers: Duration = Field(
        dt.timedelta(days=1),
        description="Keep worker rows this long after they stopped (or last heartbeat).",
    )
    interval_seconds: float = Field(
        300.0, gt=0, le=86_400, description="How often a worker's pruner runs a round."
    )
    batch_size: int = Field(
        1_000, ge=1, le=100_000, description="Jobs deleted per statement (bounded transactions)."
    )


class WebSettings(BaseModel):
    """``tenantq web``: the on-call console. Without a token it is read-only."""

    model_config = {"extra": "forbid"}

    host: str = Field("127.0.0.1", description="Bind address (localhost unless told otherwise).")
    port: int = Field(8765, ge=0, le=65_535, description="Port of the console.")
    token: SecretStr | None = Field(
        None,
        description="Bearer token that every action (POST) requires, also the login form's "
        "password; unset or empty = the console is read-only. At least 16 characters: the "
        "console refuses to start with a shorter one on an address other than localhost, and "
        "warns on localhost.",
    )
    refresh_seconds: float = Field(
        5.0, ge=1, le=3_600, description="How often the overview refreshes itself."
    )
    session_hours: float = Field(
        12.0,
        gt=0,
        le=24 * 30,
        description="How long a console sign-in lasts unless signed out sooner. Sign-ins are "
        "rows in PostgreSQL: they outlive a restart of the console and hold across several "
        "console processes; signing out ends one everywhere; a new token ends them all.",
    )
    top_tenants: int = Field(
        25, ge=1, le=10_000, description="Tenants listed by name on the Tenants page."
    )
    kafka_timeout_seconds: float = Field(
        3.0, gt=0, le=60, description="Longest wait for the broker per read (lag, health)."
    )
    allowed_hosts: tuple[str, ...] = Field(
        (),
        description="Host names and addresses the console answers to (the request's Host "
        "header, port aside), so that a web page whose name was re-pointed at this machine "
        "(DNS rebinding) cannot read it; other hosts get 400. Empty = the bind address, "
        "localhost, 127.0.0.1 and ::1 (and this machine's host name when bound to every "
        'interface). ["*"] turns the check off. As JSON: ["oncall.example.com"].',
    )
    trusted_proxies: tuple[str, ...] = Field(
        (),
        description="Addresses or networks (CIDR) of reverse proxies in front of the console "
        "whose X-Forwarded-For and X-Forwarded-Proto are believed: the client address that "
        "failed sign-ins are counted by, and https (cookies then carry Secure). Empty = no "
        'proxy is believed. As JSON: ["10.0.0.0/8"].',
    )
    max_body_bytes: int = Field(
        1_048_576,
        ge=1_024,
        le=100_000_000,
        description="Largest request body (JSON or form) the console reads; a larger one is "
        "refused with 413, before it is read when Content-Length says so.",
    )
    login_failures_per_client: int = Field(
        20,
        ge=1,
        le=100_000,
        description="Wrong tokens (sign-in form or bearer header) one client address (an IPv6 "
        "/64) may present within a minute; past it, every token it presents is refused "
        "unread (429 with Retry-After) until the minute has passed.",
    )
    login_failures_overall: int = Field(
        300,
        ge=1,
        le=1_000_000,
        description="Wrong tokens all clients together may present within a minute; past it, "
        "every token is refused unread (429) until the minute has passed. Sessions already "
        "signed in keep working.",
    )

    @field_validator("token")
    @classmethod
    def _empty_token_is_no_token(cls, value: SecretStr | None) -> SecretStr | None:
        # TENANTQ_WEB__TOKEN= (set, empty) must not be read as "actions need the empty
        # token": it is no token, and the console says it is read-only.
        if value is not None and not value.get_secret_value().strip():
            return None
        return value

    @field_validator("allowed_hosts")
    @classmethod
    def _host_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        names = []
        for name in value:
            cleaned = name.strip().lower().rstrip(".")
            if cleaned.startswith("[") and cleaned.endswith("]"):
                cleaned = cleaned[1:-1]
            if not re.fullmatch(r"\*|[a-z0-9._:-]{1,253}", cleaned):
                raise ValueError(f"{name[:100]!r} is not a host name or address")
            names.append(cleaned)
        return tuple(names)

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for network in value:
            try:
                ipaddress.ip_network(network.strip(), strict=False)
            except ValueError:
                raise ValueError(
                    f"{network[:100]!r} is not an address or a network (10.0.0.0/8)"
                ) from None
        return tuple(network.strip() for network in value)


class Settings(BaseSettings):
    """All of tenantq's configuration, validated once, read from ``TENANTQ_*``."""

    model_config = SettingsConfigDict(
        env_prefix="TENANTQ_", env_nested_delimiter="__", extra="forbid", validate_default=True
    )

    kafka_bootstrap_servers: str | None = Field(
        None, description="Kafka bootstrap servers; unset = the running dev stack's broker."
    )
    kafka_config: dict[str, str] = Field(
        default_factory=dict,
        repr=False,
        description="librdkafka settings passed through to every client (SASL, TLS, ...), as "
        "JSON; unset with the dev stack's brokers = a secure dev stack's SASL and TLS settings.",
    )
    database_url: SecretStr | None = Field(
        None,
        description="PostgreSQL URL (postgresql://user:pass@host:port/db?sslmode=...); "
        "unset = the running dev stack's server.",
    )
    topic_prefix: str = Field(
        "tenantq", pattern=r"^[A-Za-z0-9._-]{1,100}$", description="Prefix of every topic name."
    )
    queues: dict[str, QueueSettings] = Field(
        default_factory=lambda: {"default": QueueSettings()},
        description="Queue definitions by name, as JSON.",
    )
    max_message_bytes: int = Field(
        1_000_000, ge=1_024, le=100_000_000, description="Largest envelope accepted or consumed."
    )
    max_payload_bytes: int = Field(
        512_000,
        ge=16,
        le=100_000_000,
        description="Largest encoded job payload accepted at enqueue.",
    )
    worker: WorkerSettings = Field(default_factory=WorkerSettings)
    tenant_isolation: TenantIsolationSettings = Field(default_factory=TenantIsolationSettings)
    tenant_defaults: TenantDefaults = Field(default_factory=TenantDefaults)
    producer: ProducerSettings = Field(default_factory=ProducerSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    outbox: OutboxSettings = Field(default_factory=OutboxSettings)
    periodic: PeriodicSettings = Field(default_factory=PeriodicSettings)
    retention: RetentionSettings = Field(default_factory=RetentionSettings)
    metrics_host: str = Field(
        "127.0.0.1", description="Bind address of /metrics (localhost default)."
    )
    metrics_port: int = Field(9464, ge=0, le=65_535, description="Port of /metrics; 0 = disabled.")
    metrics_top_tenants: int = Field(
        20,
        ge=0,
        le=10_000,
        description="Tenants with their own metric label; the rest are 'other'.",
    )
    dev_home: Path = Field(default_factory=default_dev_home, description="Dev stack state folder.")
    log_level: str = Field("INFO", description="Log level of the tenantq logger.")

    @field_validator("queues")
    @classmethod
    def _queue_names(cls, value: dict[str, QueueSettings]) -> dict[str, QueueSettings]:
        import re

        if not value:
            raise ValueError("at least one queue is required")
        for name in value:
            if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
                raise ValueError(f"queue name {name!r} must match [A-Za-z0-9_-]{{1,64}}")
        return value

    @model_validator(mode="after")
    def _fill_from_dev_stack(self) -> Settings:
        if self.kafka_bootstrap_servers is None or self.database_url is None:
            state = _read_dev_state(self.dev_home)
            if state is not None:
                if self.kafka_bootstrap_servers is None:
                    self.kafka_bootstrap_servers = state.get("kafka_bootstrap_servers")
                    # A secure stack's SASL and TLS settings come with its brokers only.
                    if not self.kafka_config and isinstance(state.get("kafka_config"), dict):
                        self.kafka_config = dict(state["kafka_config"])
                if self.database_url is None and state.get("database_url"):
                    self.database_url = SecretStr(state["database_url"])
        return self

    # -- accessors -------------------------------------------------------------------------

    def queue(self, name: str) -> QueueSettings:
        """The settings of queue ``name``; a clear error when it is not declared."""
        try:
            return self.queues[name]
        except KeyError:
            declared = ", ".join(sorted(self.queues))
            raise ConfigurationError(
                f"queue {name!r} is not declared (TENANTQ_QUEUES declares: {declared})"
            ) from None

    def require_bootstrap_servers(self) -> str:
        if not self.kafka_bootstrap_servers:
            raise ConfigurationError(
                "no Kafka: set TENANTQ_KAFKA_BOOTSTRAP_SERVERS or run `tenantq dev up`"
            )
        return self.kafka_bootstrap_servers

    def require_database_url(self) -> str:
        if self.database_url is None:
            raise ConfigurationError(
                "no PostgreSQL: set TENANTQ_DATABASE_URL or run `tenantq dev up`"
            )
        return self.database_url.get_secret_value()

    def kafka_client_config(self, **overrides: Any) -> dict[str, Any]:
        """librdkafka config for any client: bootstrap servers, then pass-through keys, then
        the caller's overrides (the caller knows what its client needs)."""
        config: dict[str, Any] = {"bootstrap.servers": self.require_bootstrap_servers()}
        config.update(self.kafka_config)
        config.update(overrides)
        return config

    def redacted_kafka_config(self) -> dict[str, str]:
        """The pass-through keys with secret values masked, for logs and ``repr``."""
        return redact_kafka_config(self.kafka_config)

    @field_serializer("kafka_config")
    def _kafka_config_masked(self, config: dict[str, str]) -> dict[str, str]:
        # Dumps are for people and logs, as the database URL's SecretStr is: the clients
        # read the values through kafka_client_config, never from a dump.
        return redact_kafka_config(config)

    def __repr_args__(self) -> Any:
        yield from super().__repr_args__()
        yield "kafka_config", self.redacted_kafka_config()


def _read_dev_state(dev_home: Path) -> dict[str, Any] | None:
    path = dev_home / "state.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def load_settings(**overrides: Any) -> Settings:
    """Build the settings, turning a validation failure into a one-line error naming the
    setting (``TENANTQ_WORKER__LEASE_SECONDS: Input should be greater than 0``)."""
    try:
        return Settings(**overrides)
    except ValidationError as error:
        raise ConfigurationError(describe_validation_error(error)) from None


def describe_validation_error(error: ValidationError) -> str:
    parts = []
    for item in error.errors():
        location = "__".join(str(part) for part in item["loc"])
        parts.append(f"TENANTQ_{location.upper()}: {item['msg']}")
    return "; ".join(parts) or str(error)
