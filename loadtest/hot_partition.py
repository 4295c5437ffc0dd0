"""The hot-partition load test: one tenant floods while many small ones keep sending, through
real ``tenantq worker`` processes, and what the small ones wait for it.

    .venv/bin/python loadtest/hot_partition.py        # flood-100x, as make hot-partition
    .venv/bin/python loadtest/hot_partition.py --scenario flood-100x --compare
    .venv/bin/python loadtest/hot_partition.py --compare --repeat 3   # median of 3 rounds
    .venv/bin/python loadtest/hot_partition.py --scenario zipf --scenario calm
    .venv/bin/python loadtest/hot_partition.py --list
    .venv/bin/python loadtest/hot_partition.py --single-producer --repeat 3  # one client sends all
    .venv/bin/python loadtest/hot_partition.py --compare --worker group,share   # the spike

Servers: ``TENANTQ_KAFKA_BOOTSTRAP_SERVERS`` / ``TENANTQ_DATABASE_URL`` when set, else the dev
stack (started if needed; never stopped). Each run gets a topic prefix and a queue of its own
(default queue settings: 12 partitions), so its job rows and its hot-lane placements never mix
with anyone else's on a shared database; both are removed at the end unless ``--keep``.

A run: 2 ``tenantq worker hot_partition_app:APP --processes 1`` (default settings: 32 slots
each; the metrics endpoint off, so that no port is taken on a shared machine), a warm-up that
proves both members hold partitions, a short saturation burst that measures the workers'
capacity, then the scenario's phases, paced by the tool's own producers (one thread and one
``tenantq.Producer`` per tenant class, or one ``tenantq.Producer`` the threads share with
``--single-producer``, ``enqueue_batch`` every 10 ms tick; the tool's cyclic
garbage collector is off while they send, see ``collector_paused``). The handler sleeps
50 ms and records nothing: latencies come from the job rows (see ``hot_partition_report``).
After the last phase the tool waits until every cold job has started (``--drain-timeout``),
then stops the workers (SIGTERM, graceful) and writes ``report.md``, ``summary.json`` and the
plots to ``--report-dir`` (default ``reports/hot-partition-<time>/``).

``--worker share`` runs the share-group spike instead (``python -m tenantq.consumer.share``,
one share-group member per process; a Kafka 4.2+ broker), ``--worker group,share`` both, one
after the other for each scenario. The spike has no hot lane (its per-tenant cap is the
protection's other half) and commits no offsets, so its runs sample no lag; ``--workers``,
``--partitions`` and ``--concurrency`` change the shape of every run (more share members
than partitions, say).

The noisy-neighbour protection is switched with ``TENANTQ_TENANT_ISOLATION__HOT_LANE`` and
``TENANTQ_TENANT_ISOLATION__TENANT_MAX_SHARE`` (1.0 = no cap), passed to the workers and used
by the tool's producers.

Exit status: 0 when every run is a valid measurement (the producers achieved >= 95% of the
asked rates, every job was acknowledged, no worker died, every cold job started); 1
otherwise; 2 with ``--require-targets`` when a run with the protection on misses a target.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import psycopg  # noqa: E402
from exit_with_parent import exiting_with_this_process  # noqa: E402
from hot_partition_app import JOB_TYPE, QUEUE_VARIABLE, STARTS_VARIABLE  # noqa: E402
from hot_partition_report import (  # noqa: E402
    COLD,
    HOT,
    ClockOffset,
    LaneStay,
    PhaseSpec,
    ProducerCount,
    RunData,
    RunFigures,
    Sample,
    analyse,
    phase_of,
    phase_table,
    repeat_name,
    repeated_scenario,
    repeats,
    repeats_table,
    side_by_side_table,
    write_report,
)
from rich.console import Console  # noqa: E402
from rich.progress import (  # noqa: E402
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

import tenantq  # noqa: E402
from tenantq.demo.kafka import LagProbe  # noqa: E402
from tenantq.demo.plan import ZIPF_EXPONENT, tenant_names  # noqa: E402
from tenantq.demo.report import percentile  # noqa: E402
from tenantq.demo.run import prepare_settings  # noqa: E402
from tenantq.errors import BatchEnqueueFailed, QueueFull  # noqa: E402
from tenantq.job_ids import new_job_id  # noqa: E402
from tenantq.partitioner.placement import key_partition  # noqa: E402
from tenantq.producer.producer import EnqueueRequest, Producer  # noqa: E402
from tenantq.settings import (  # noqa: E402
    QueueSettings,
    Settings,
    TenantIsolationSettings,
    load_settings,
)
from tenantq.store import migrate  # noqa: E402
from tenantq.store.engine import create_sqlalchemy_engine, psycopg_url  # noqa: E402
from tenantq.store.statements import QUEUE_JOBS_DELETE  # noqa: E402
from tenantq.topic_admin import declared_topics, delete_topics, ensure_topics  # noqa: E402
from tenantq.topics import consumer_group  # noqa: E402

DataclassT = TypeVar("DataclassT", bound="DataclassInstance")

HOT_TENANT = "whale"
#: Worker processes of a run, unless ``--workers``.
WORKERS = 2
#: The producers' pacing tick: at 5,000 jobs/s, 50 jobs per ``enqueue_batch``.
TICK_SECONDS = 0.01
SAMPLE_SECONDS = 1.0
#: A phase whose producer handed over less than this share of the asked jobs is not a
#: measurement of the workers: the run fails loudly.
PRODUCER_SHORTFALL = 0.95
#: The saturation burst and the warm-up use tenants spread evenly, this many per partition.
SPREAD_TENANTS_PER_PARTITION = 4
#: Once every cold job has started, the hot backlog (the lag) is waited for this much longer
#: at most.
HOT_GRACE_SECONDS = 10.0
WARMUP_TIMEOUT = 90.0

CAPACITY_TIMEOUT = 180.0

console = Console(width=None if sys.stdout.isatty() else 160)


# -- scenarios --


@dataclass(frozen=True)
class Knobs:
    """What the command line may change about the scenarios (the defaults are the ones the
    isolation targets are measured with)."""

    calm_seconds: float = 20.0
    flood_seconds: float = 20.0
    after_seconds: float = 10.0
    cold_tenants: int = 50
    cold_rate: float = 50.0
    zipf_load: float = 0.8
    job_ms: float = 50.0


@dataclass(frozen=True)
class PhasePlan:
    """A phase before its rates are final: a Zipf phase's rate depends on the capacity."""

    name: str
    seconds: float
    cold_rate: float
    hot_rate: float
    #: > 0: a Zipf phase sending this share of the measured capacity over all tenants.
    zipf_load: float = 0.0


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    phases: tuple[PhasePlan, ...]
    protection: bool = True
    #: The worker the run starts: ``group`` (``tenantq worker``) or ``share`` (the spike).
    worker: str = "group"


#: The workers a run can start, and the name suffix of a scenario run with each.
WORKER_KINDS = {"group": "", "share": "-share"}


def with_worker(scenario: Scenario, kind: str) -> Scenario:
    """The scenario run by the ``kind`` of worker (``X`` and ``X-share``)."""
    summary = scenario.summary + ("; share-group spike" if kind == "share" else "")
    name = scenario.name + WORKER_KINDS[kind]
    return replace(scenario, name=name, summary=summary, worker=kind)


def scenarios(knobs: Knobs) -> dict[str, Scenario]:
    cold = knobs.cold_rate
    calm = PhasePlan("calm", knobs.calm_seconds, cold, 0.0)
    after = PhasePlan("after", knobs.after_seconds, cold, 0.0)

    def flood(factor: float) -> tuple[PhasePlan, ...]:
        return (calm, PhasePlan("flood", knobs.flood_seconds, cold, factor * cold), after)

    listed = (
        Scenario(
            "calm",
            f"{knobs.cold_tenants} cold tenants sending {cold:g} jobs/s in total",
            (calm,),
        ),
        Scenario(
            "flood-10x",
            f"calm, then one tenant floods at 10x the cold total ({10 * cold:,.0f} jobs/s) "
            "while the cold tenants keep their rate, then calm again",
            flood(10),
        ),
        Scenario(
            "flood-100x",
            f"calm, then one tenant floods at 100x the cold total ({100 * cold:,.0f} jobs/s, "
            "beyond capacity) while the cold tenants keep their rate, then calm again",
            flood(100),
        ),
        Scenario(
            "zipf",
            f"calm, then every tenant sends with Zipf-skewed volume (exponent {ZIPF_EXPONENT}, "
            f"{HOT_TENANT} is rank 1) at {knobs.zipf_load:.0%} of the measured capacity, "
            "then calm again",
            (
                calm,
                PhasePlan("zipf", knobs.flood_seconds, 0.0, 0.0, zipf_load=knobs.zipf_load),
                after,
            ),
        ),
        Scenario(
            "flood-100x-off",
            "flood-100x with the noisy-neighbour protection switched off (hot lane off, no "
            "per-tenant cap), for comparison",
            flood(100),
            protection=False,
        ),
    )
    return {s.name: s for s in listed}


def with_protection(scenario: Scenario, on: bool) -> Scenario:
    """The scenario with the protection on or off (``--compare``): ``X`` and ``X-off``."""
    base = scenario.name.removesuffix("-off")
    summary = scenario.summary
    if not on and not scenario.name.endswith("-off"):
        summary += "; protection off"
    return replace(scenario, name=base if on else f"{base}-off", summary=summary, protection=on)


def zipf_weights(count: int) -> list[float]:
    return [1.0 / (rank + 1) ** ZIPF_EXPONENT for rank in range(count)]


# -- settings and protection --


def protection_values(on: bool) -> dict[str, Any]:
    """The noisy-neighbour protection of a run: on = the defaults said out loud (hot lane, the
    default cap), off = no hot lane and no cap."""
    default_share = TenantIsolationSettings.model_fields["tenant_max_share"].default
    return {"hot_lane": on, "tenant_max_share": default_share if on else 1.0}


def protection_environment(on: bool) -> dict[str, str]:
    """``TENANTQ_TENANT_ISOLATION__*`` for the workers: ``protection_values``."""
    values = protection_values(on)
    return {
        "TENANTQ_TENANT_ISOLATION__HOT_LANE": "true" if values["hot_lane"] else "false",
        "TENANTQ_TENANT_ISOLATION__TENANT_MAX_SHARE": f"{values['tenant_max_share']:g}",
    }


@dataclass(frozen=True)
class Shape:
    """How many worker processes a run starts, with how many slots each (None: the default
    settings'), over a queue of how many partitions (None: the default queue's)."""

    workers: int = 2
    concurrency: int | None = None
    partitions: int | None = None

    def queue(self) -> QueueSettings:
        if self.partitions is None:
            return QueueSettings()
        return QueueSettings(partitions=self.partitions)


def run_settings(
    base: Settings, prefix: str, queue: str, on: bool, shape: Shape = Shape()
) -> Settings:
    """The run's settings for the tool's own clients: its prefix, its queue (default queue
    settings, or the shape's partitions), and the protection as the workers get it."""
    isolation = base.tenant_isolation.model_copy(update=protection_values(on))
    return base.model_copy(
        update={
            "topic_prefix": prefix,
            "queues": {queue: shape.queue()},
            "metrics_port": 0,
            "tenant_isolation": isolation,
        }
    )


def worker_environment(
    settings: Settings, queue: str, protection: dict[str, str], shape: Shape = Shape()
) -> dict[str, str]:
    """The workers' environment: this one without any ``TENANTQ_*`` (defaults only, whatever
    the shell says), plus the servers, the run's prefix and queue, and the protection."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TENANTQ_")}
    environment.update(
        {
            "TENANTQ_KAFKA_BOOTSTRAP_SERVERS": settings.require_bootstrap_servers(),
            "TENANTQ_DATABASE_URL": settings.require_database_url(),
            "TENANTQ_TOPIC_PREFIX": settings.topic_prefix,
            "TENANTQ_QUEUES": json.dumps(
                {queue: {} if shape.partitions is None else {"partitions": shape.partitions}}
            ),
            # Off so that no port is taken on a shared machine (a test waits for 9464 to be
            # free); it serves scrapes and does not change how jobs are dispatched.
            "TENANTQ_METRICS_PORT": "0",
            QUEUE_VARIABLE: queue,
            **protection,
        }
    )
    if shape.concurrency is not None:
        environment["TENANTQ_WORKER__CONCURRENCY"] = str(shape.concurrency)
    if settings.kafka_config:
        environment["TENANTQ_KAFKA_CONFIG"] = json.dumps(settings.kafka_config)
    environment["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(HERE), os.environ.get("PYTHONPATH", "")) if part
    )
    return environment


# -- the workers --


#: What the report calls the worker processes of each kind.
WORKER_NAMES = {"group": "tenantq worker", "share": "python -m tenantq.consumer.share"}
#: The command of one worker process, by kind.
WORKER_COMMANDS = {
    "group": ["-m", "tenantq.cli", "worker", "hot_partition_app:APP", "--processes", "1"],
    "share": ["-m", "tenantq.consumer.share", "hot_partition_app:APP"],
}


class WorkerProcess:
    """``tenantq worker hot_partition_app:APP --processes 1`` (or the share-group spike's
    member, ``kind="share"``) in a session of its own (a Ctrl-C at the terminal reaches the
    tool, which stops the workers once, gracefully), its output in a log file of the report
    folder; SIGTERM if the tool's process dies."""

    def __init__(self, environment: dict[str, str], log_path: Path, kind: str = "group") -> None:
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("ab")
        self.process = subprocess.Popen(
            exiting_with_this_process([sys.executable, *WORKER_COMMANDS[kind]]),
            env=environment,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.stopping = False

    def alive(self) -> bool:
        return self.process.poll() is None

    def died(self) -> str | None:
        """Why the worker is gone when nobody stopped it; None while it runs (or was stopped)."""
        code = self.process.poll()
        if code is None or self.stopping:
            return None
        return f"worker {self.process.pid} exited with {code} (see {self.log_path.name})"

    def terminate(self) -> None:
        """SIGTERM, once: the worker drains. A second signal would tell it to skip the drain."""
        if not self.stopping and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.stopping = True

    def stop(self, timeout: float) -> int | None:
        """``terminate``, then SIGKILL of its process group after ``timeout``."""
        try:
            self.terminate()
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)
                return None
        finally:
            self._log.close()


# -- the producers --


def quiet_producer(settings: Settings) -> Producer:
    """A producer whose librdkafka informational lines (a closing producer purging its
    background queue) do not tear through the progress bar; warnings and errors still show."""
    kafka_config = {**settings.kafka_config, "log_level": "4"}
    return Producer(settings.model_copy(update={"kafka_config": kafka_config}))


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection in the tool's process while the phases run.

    A job's enqueue time is stamped inside ``enqueue_batch``, just before the message goes to
    librdkafka. A full collection of the tool's heap stops every thread, and one that lands
    between a cold job's stamp and its send counts the tool's own pause as the system's
    latency: a 59 ms collection 15.3 s into the calm phase (the same allocations every run)
    was that phase's worst wait in half of 18 runs. The phases allocate little that only the
    collector frees, and it runs again once they are over."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


@dataclass
class Schedule:
    """What one producer thread sends: per phase, a rate and whom to draw tenants from."""

    klass: str
    rates: list[float]
    tenants: list[list[str]]
    weights: list[list[float] | None]


class Pacer(threading.Thread):
    """One tenant class's producer: every tick, ``enqueue_batch`` of the jobs due by now
    (rate x time since the phase began, minus those sent), tenants drawn from a generator
    seeded per class, so a seed always gives the same sequence of tenants. Cold jobs carry
    job ids the tool keeps (few: 50/s), to tell a cold job that never started by name."""

    def __init__(
        self,
        settings: Settings,
        queue: str,
        schedule: Schedule,
        phases: Sequence[PhasePlan],
        payload: dict[str, Any],
        seed: int,
        t0_mono: float,
        stop: threading.Event,
        shared: Producer | None = None,
    ) -> None:
        super().__init__(name=f"hot-partition-{schedule.klass}", daemon=True)
        #: The one producer of every class (``--single-producer``), owned by the run; None:
        #: this class's own.
        self.shared = shared
        self.settings = settings
        self.queue = queue
        self.schedule = schedule
        self.phases = list(phases)
        self.payload = payload
        self.rng = random.Random(f"{seed}-{schedule.klass}")
        self.t0_mono = t0_mono
        self.stop_event = stop
        self.counts = [
            ProducerCount(planned=round(rate * phase.seconds))
            for rate, phase in zip(schedule.rates, self.phases, strict=True)
        ]
        #: (job id, tenant, wall time handed over) of every cold job.
        self.cold_ids: list[tuple[uuid.UUID, str, float]] = []
        #: (wall time handed over, wall time acknowledged) of every cold batch: what the
        #: producer and Kafka add before a worker can read the jobs.
        self.cold_acknowledged: list[tuple[float, float]] = []
        self.error: str | None = None
        self._batches: list[tuple[int, Any]] = []

    @property
    def sent(self) -> int:
        return sum(count.sent for count in self.counts)

    def run(self) -> None:
        try:
            self._run()
        except Exception as error:  # reported as a problem of the run, not a dead thread
            self.error = f"{type(error).__name__}: {error}"

    def _run(self) -> None:
        keep_ids = self.schedule.klass == COLD
        # Default producer settings and placement book: when the hot lane moves a tenant,
        # this producer routes its new jobs to the lane, as an application's would.
        with contextlib.ExitStack() as owned:
            producer = self.shared or owned.enter_context(quiet_producer(self.settings))
            start = 0.0
            for index, phase in enumerate(self.phases):
                end = start + phase.seconds
                rate = self.schedule.rates[index]
                tenants = self.schedule.tenants[index]
                weights = self.schedule.weights[index]
                count = self.counts[index]
                tick = self.t0_mono + start
                while not self.stop_event.is_set():
                    now = time.monotonic() - self.t0_mono
                    if now >= end:
                        break
                    due = min(count.planned, int(rate * (now - start)))
                    if due > count.sent and tenants:
                        chosen = self.rng.choices(tenants, weights=weights, k=due - count.sent)
                        requests = []
                        handed = time.time()
                        for tenant in chosen:
                            job_id = new_job_id() if keep_ids else None
                            if job_id is not None:
                                self.cold_ids.append((job_id, tenant, handed))
                            requests.append(
                                EnqueueRequest(
                                    JOB_TYPE, tenant, self.payload, queue=self.queue, job_id=job_id
                                )
                            )
                        batch = self._hand_over(producer, requests)
                        if keep_ids:
                            batch.add_done_callback(
                                lambda _, at=handed: self.cold_acknowledged.append(
                                    (at, time.time())
                                )
                            )
                        self._batches.append((index, batch))
                        count.sent = due
                    tick += TICK_SECONDS
                    time.sleep(max(0.0, tick - time.monotonic()))
                start = end
            producer.flush(120)
            self._settle(time.monotonic() + 120)

    @staticmethod
    def _hand_over(producer: Producer, requests: list[EnqueueRequest]) -> Any:
        for _ in range(30):
            try:
                return producer.enqueue_batch(requests)
            except QueueFull:
                time.sleep(0.5)
        raise RuntimeError("the producer's buffer stayed full for 15 s")

    def _settle(self, deadline: float) -> None:
        """Count acknowledged and failed jobs, and those published to the hot lane's topic."""
        lane_suffix = f".{self.queue}.lane"
        for index, batch in self._batches:
            count = self.counts[index]
            try:
                refs: Sequence[Any] = batch.result(max(0.1, deadline - time.monotonic()))
            except BatchEnqueueFailed as failed:
                refs = [ref for ref in failed.refs if ref is not None]
                count.failed += len(failed.failures)
            except Exception:
                continue  # timed out: neither acknowledged nor known to have failed
            count.acknowledged += len(refs)
            count.to_lane += sum(1 for ref in refs if ref.topic.endswith(lane_suffix))
        self._batches.clear()


def cold_acknowledged(
    phases: Sequence[PhaseSpec], pacers: Sequence[Pacer], t0: float
) -> dict[str, dict[str, float]]:
    """Per phase, how long the cold batches took from the tool's hand-over to Kafka's
    acknowledgement (batches, p50, p99, max, seconds): the producer's and the broker's part of
    the cold jobs' wait, apart from the workers'."""
    waits: dict[str, list[float]] = {}
    for pacer in pacers:
        for handed, acknowledged in list(pacer.cold_acknowledged):
            phase = phase_of(phases, handed - t0).name
            waits.setdefault(phase, []).append(acknowledged - handed)
    found = {}
    for phase, values in waits.items():
        values.sort()
        found[phase] = {
            "batches": float(len(values)),
            "p50": values[len(values) // 2],
            "p99": values[min(len(values) - 1, int(0.99 * len(values)))],
            "max": values[-1],
        }
    return found


# -- the database --


def clock_offset(connection: psycopg.Connection[Any], rounds: int = 7) -> tuple[float, float]:
    """(database clock - tool clock, half the round trip) of the fastest of ``rounds``."""
    best: tuple[float, float] | None = None
    for _ in range(rounds):
        before = time.time()
        row = connection.execute("SELECT extract(epoch FROM clock_timestamp())::float8").fetchone()
        after = time.time()
        assert row is not None
        trip = after - before
        if best is None or trip / 2 < best[1]:
            best = (float(row[0]) - (before + after) / 2, trip / 2)
    assert best is not None
    return best


def started_among(connection: psycopg.Connection[Any], ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    """Those of the jobs ``ids`` that started (a row with ``started_at``): primary-key
    lookups of the few jobs not seen started yet, cheap enough to run every second whatever
    indexes the job table has."""
    rows = connection.execute(
        "SELECT id FROM tenantq_jobs WHERE id = ANY(%s) AND started_at IS NOT NULL", (list(ids),)
    ).fetchall()
    return [row[0] for row in rows]


def progress_of(connection: psycopg.Connection[Any], ids: Sequence[uuid.UUID]) -> tuple[int, int]:
    """(started, finished) of the jobs ``ids``."""
    row = connection.execute(
        "SELECT count(*) FILTER (WHERE started_at IS NOT NULL), "
        "count(*) FILTER (WHERE finished_at IS NOT NULL) FROM tenantq_jobs WHERE id = ANY(%s)",
        (list(ids),),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def lane_members(
    connection: psycopg.Connection[Any], queue: str
) -> list[tuple[str, str | None, str | None]]:
    """(tenant, reason, updated_by) of the tenants in the queue's hot lane now."""
    rows = connection.execute(
        "SELECT tenant_id, reason, updated_by FROM tenantq_tenant_placement "
        "WHERE queue = %(queue)s AND mode = 'lane' ORDER BY tenant_id",
        {"queue": queue},
    ).fetchall()
    return [(row[0], row[1], row[2]) for row in rows]


def job_rows(
    connection: psycopg.Connection[Any], queue: str, tenants: Sequence[str]
) -> list[tuple[str, float, float, uuid.UUID]]:
    """(tenant, enqueued_at, started_at, id) of the started jobs of ``tenants``, epoch seconds:
    ``enqueued_at`` on the tool's clock, ``started_at`` on the database's."""
    rows = connection.execute(
        "SELECT tenant_id, extract(epoch FROM enqueued_at)::float8, "
        "extract(epoch FROM started_at)::float8, id FROM tenantq_jobs "
        "WHERE queue = %(queue)s AND tenant_id = ANY(%(tenants)s) AND started_at IS NOT NULL",
        {"queue": queue, "tenants": list(tenants)},
    ).fetchall()
    return [(row[0], float(row[1]), float(row[2]), row[3]) for row in rows]


def worker_ids_of(connection: psycopg.Connection[Any], ids: Sequence[uuid.UUID]) -> int:
    """How many distinct workers ran the jobs ``ids``."""
    row = connection.execute(
        "SELECT count(DISTINCT worker_id) FROM tenantq_job_attempts WHERE job_id = ANY(%s)",
        (list(ids),),
    ).fetchone()
    return int(row[0]) if row else 0


def handler_start_gap(
    folder: Path, started_at: dict[str, float], t0: float
) -> dict[str, float] | None:
    """How long after its claim (``started_at``, on the tool's clock) each handler really
    started, from the lines the handlers wrote with ``--handler-starts`` (the files are
    removed once read); None without them."""
    if not folder.is_dir():
        return None
    gaps = []
    for path in sorted(folder.glob("*.txt")):
        for line in path.read_text().splitlines():
            job_id, _, at = line.partition(" ")
            claimed = started_at.get(job_id)
            if claimed is not None and at:
                gaps.append(float(at) - t0 - claimed)
        path.unlink()
    with contextlib.suppress(OSError):
        folder.rmdir()
    if not gaps:
        return None
    gaps.sort()
    return {
        "jobs": len(gaps),
        "min": gaps[0],
        "p50": percentile(gaps, 0.5),
        "p99": percentile(gaps, 0.99),
        "max": gaps[-1],
    }


def remove_rows(connection: psycopg.Connection[Any], prefix: str, queue: str) -> None:
    """The run's job rows with their attempts, and its placements: the run's deployment
    (topic prefix) and queue are its own, so nobody else's rows match."""
    connection.execute(QUEUE_JOBS_DELETE, {"deployment": prefix, "queue": queue})
    connection.execute(
        "DELETE FROM tenantq_tenant_placement WHERE deployment = %s AND queue = %s",
        (prefix, queue),
    )


def migrate_database(settings: Settings) -> str:
    """Bring the database to this tenantq's head; a database already ahead of it (a newer
    tenantq migrated the shared one) is used as it is."""
    engine = create_sqlalchemy_engine(settings)
    try:
        current = migrate.current(engine)
        known = migrate.head()
        try:
            return migrate.upgrade(engine) or ""
        except Exception as error:  # alembic: "Can't locate revision ..."
            if current is not None and current != known:
                return f"{current} (ahead of this tenantq's {known}: left as it is)"
            raise error
    finally:
        engine.dispose()


# -- one run --


@dataclass
class Options:
    knobs: Knobs = field(default_factory=Knobs)
    seed: int = 7
    capacity: float | None = None
    saturation_jobs: int = 4000
    drain_timeout: float = 600.0
    keep: bool = False
    handler_starts: bool = False
    until_released: bool = False
    #: One ``tenantq.Producer`` for every tenant class (``--single-producer``): the way one
    #: service enqueues for all its tenants, the flood and the cold jobs through one client.
    single_producer: bool = False
    #: The capacity the Zipf phases' rate is a share of (set by the first run that needs it).
    zipf_basis: float | None = None
    report_dir: Path = Path("reports")
    shape: Shape = field(default_factory=Shape)


def spread_tenants(partitions: int, per_partition: int) -> list[str]:
    """Tenant ids that hash ``per_partition`` to each partition, so that a burst of their
    jobs keeps every member's slots equally busy."""
    chosen: list[str] = []
    filled = [0] * partitions
    index = 0
    while len(chosen) < partitions * per_partition:
        name = f"spread-{index:03d}"
        index += 1
        partition = key_partition(name, partitions)
        if filled[partition] < per_partition:
            filled[partition] += 1
            chosen.append(name)
    return chosen


class Run:
    """One scenario, from starting the workers to the run's data."""

    def __init__(
        self,
        scenario: Scenario,
        base: Settings,
        options: Options,
        progress: Progress,
    ) -> None:
        self.scenario = scenario
        self.options = options
        self.knobs = options.knobs
        self.progress = progress
        tag = uuid.uuid4().hex[:6]
        self.queue = f"hp{tag}"
        self.prefix = f"hotpart{dt.datetime.now():%Y%m%d%H%M%S}{tag}"
        self.protection_env = protection_environment(scenario.protection)
        self.protection = "on" if scenario.protection else "off"
        self.shape = options.shape
        self.settings = run_settings(base, self.prefix, self.queue, scenario.protection, self.shape)
        self.partitions = self.settings.queue(self.queue).partitions
        self.slots = self.shape.concurrency or self.settings.worker.concurrency
        self.worker_count = self.shape.workers
        self.cold_tenants = tenant_names(self.knobs.cold_tenants)
        self.hot_partition = key_partition(HOT_TENANT, self.partitions)
        self.neighbours = [
            t for t in self.cold_tenants if key_partition(t, self.partitions) == self.hot_partition
        ]
        self.payload = {"ms": self.knobs.job_ms}
        self.problems: list[str] = []
        self.workers: list[WorkerProcess] = []
        self.samples: list[Sample] = []
        self.lane_stays: dict[str, LaneStay] = {}
        #: Cold jobs handed over but not seen started yet, and how many were seen started.
        self._cold_pending: set[uuid.UUID] = set()
        self._cold_noted = 0
        self._cold_started = 0
        self.task = progress.add_task(f"{scenario.name}: starting", total=None, info="")

    # -- the steps --

    def execute(self) -> RunData:
        ensure_topics(self.settings)
        lane_name = f"{self.prefix}.{self.queue}.lane"
        lane_topic = any(spec.name == lane_name for spec in declared_topics(self.settings))
        group = consumer_group(self.prefix, self.queue)
        dlq = f"{self.prefix}.{self.queue}.dlq"
        url = psycopg_url(self.settings.require_database_url())
        environment = worker_environment(self.settings, self.queue, self.protection_env, self.shape)
        folder = self.options.report_dir
        starts_dir = folder / f"{self.scenario.name}.handler-starts"
        if self.options.handler_starts:
            starts_dir.mkdir(parents=True, exist_ok=True)
            environment[STARTS_VARIABLE] = str(starts_dir)
        log_names = [f"{self.scenario.name}.worker{i}.log" for i in range(self.worker_count)]
        probes: list[LagProbe] = []
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                self.workers = [
                    WorkerProcess(environment, folder / name, self.scenario.worker)
                    for name in log_names
                ]
                self._warm_up(conn)
                capacity, method, detail = self._capacity(conn)
                phases = self._phases(capacity)
                # A share group commits no offsets: its runs sample no lag.
                if self.scenario.worker == "group":
                    probes.append(
                        LagProbe(self.settings, f"{self.prefix}.{self.queue}", dlq, group)
                    )
                if lane_topic and self.scenario.worker == "group":
                    probes.append(LagProbe(self.settings, lane_name, dlq, group))
                before = clock_offset(conn)
                t0, pacers = self._flow(conn, phases, probes)
                drain, drained = self._drain(conn, t0, phases, pacers, probes)
                after = clock_offset(conn)
                offset = ClockOffset(
                    (before[0] + after[0]) / 2,
                    max(before[1], after[1]) + abs(before[0] - after[0]) / 2,
                )
                jobs, hot_left, started_at = self._collect(conn, t0, offset.offset, phases, pacers)
                self._stop_workers()
                start_gap = handler_start_gap(starts_dir, started_at, t0)
        finally:
            self._stop_workers()
            for probe in probes:
                probe.close()
            if not self.options.keep:
                self._clean_up()
        total = self.progress.tasks[self.task].total
        self.progress.update(
            self.task, description=f"{self.scenario.name}: done", completed=total, info=""
        )
        producer = {pacer.schedule.klass: pacer.counts for pacer in pacers}
        acknowledged = cold_acknowledged(phases, pacers, t0)
        self._check_producers(phases, pacers)
        return RunData(
            name=self.scenario.name,
            scenario=self.scenario.name,
            summary=self.scenario.summary,
            protection=self.protection,
            protection_environment=self.protection_env,
            prefix=self.prefix,
            queue=self.queue,
            partitions=self.partitions,
            workers=self.worker_count,
            slots_per_worker=self.slots,
            job_ms=self.knobs.job_ms,
            seed=self.options.seed,
            hot_tenant=HOT_TENANT,
            cold_tenants=self.cold_tenants,
            neighbours=self.neighbours,
            hot_partition=self.hot_partition,
            phases=phases,
            capacity=capacity,
            capacity_method=method,
            capacity_detail=detail,
            producer=producer,
            jobs=jobs,
            hot_not_started=hot_left,
            samples=self.samples,
            lane_stays=self.lane_stays,
            clock=offset,
            drain_seconds=drain,
            drained=drained,
            lane_topic=lane_topic,
            start_gap=start_gap,
            cold_acknowledged=acknowledged,
            problems=self.problems,
            worker_logs=log_names,
            worker_command=WORKER_NAMES[self.scenario.worker],
        )

    def _clean_up(self) -> None:
        """The run's topics, also after a run that failed (best effort: what is left is the
        run's own and harms nobody). Its rows go at the end of the invocation
        (``remove_runs_rows``): deleting 100,000 rows here would have autovacuum working
        through them during the next run's measurement."""
        with contextlib.suppress(Exception):
            delete_topics(self.settings, [spec.name for spec in declared_topics(self.settings)])

    def _show(self, description: str, **fields: Any) -> None:
        self.progress.update(
            self.task, description=f"{self.scenario.name}: {description}", **fields
        )

    def _note_deaths(self) -> bool:
        """Note, once each, the workers gone without being stopped; True if any is."""
        dead = False
        for worker in self.workers:
            why = worker.died()
            if why is not None:
                dead = True
                if why not in self.problems:
                    self.problems.append(why)
        return dead

    def _watch_workers(self) -> None:
        if self._note_deaths():
            raise RuntimeError("; ".join(self.problems))

    def _enqueue_now(self, tenants: Sequence[str]) -> list[uuid.UUID]:
        """Jobs of ``tenants`` (one each, in order), as fast as the producer takes them."""
        ids = [new_job_id() for _ in tenants]
        with quiet_producer(self.settings) as producer:
            futures = []
            for start in range(0, len(tenants), 500):
                futures.append(
                    producer.enqueue_batch(
                        EnqueueRequest(
                            JOB_TYPE, tenant, self.payload, queue=self.queue, job_id=job_id
                        )
                        for tenant, job_id in zip(
                            tenants[start : start + 500], ids[start : start + 500], strict=True
                        )
                    )
                )
            for future in futures:
                future.result(60)
        return ids

    def _wait_started(
        self, conn: psycopg.Connection[Any], ids: Sequence[uuid.UUID], what: str, timeout: float
    ) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self._watch_workers()
            started, finished = progress_of(conn, ids)
            self.progress.update(
                self.task,
                description=f"{self.scenario.name}: {what}",
                total=len(ids),
                completed=finished,
                info=f"{started:,} started, {finished:,} finished",
            )
            if finished >= len(ids):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{what}: {finished} of {len(ids)} jobs finished in {timeout:.0f}s"
                )
            time.sleep(0.25)

    def _warm_up(self, conn: psycopg.Connection[Any]) -> None:
        """Jobs of tenants spread over the partitions, again until every worker that can hold
        a partition ran some (all of them, or one per partition when there are more workers
        than partitions): the members hold partitions and have their handler processes up
        before anything is measured."""
        tenants = spread_tenants(self.partitions, 1)
        per_round = max(self.worker_count, self.partitions) * 2
        expected = min(self.worker_count, self.partitions)
        deadline = time.monotonic() + WARMUP_TIMEOUT
        warmed: list[uuid.UUID] = []
        while True:
            ids = self._enqueue_now([tenants[i % len(tenants)] for i in range(per_round)])
            self._wait_started(conn, ids, "warm-up (workers joining)", WARMUP_TIMEOUT)
            warmed += ids
            if worker_ids_of(conn, warmed) >= expected:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"warm-up: fewer than {expected} of the {self.worker_count} workers ran "
                    "jobs (the others got no partition)"
                )
            time.sleep(1.0)

    def _capacity(self, conn: psycopg.Connection[Any]) -> tuple[float, str, dict[str, Any]]:
        """Jobs/s the workers start when saturated: a burst of jobs of tenants spread evenly
        over the partitions, timed from the database's ``started_at`` between the 10th and
        the 90th percentile of the burst (leaving out the ramp up and the tail)."""
        if self.options.capacity is not None:
            return self.options.capacity, "given", {}
        jobs = self.options.saturation_jobs
        tenants = spread_tenants(self.partitions, SPREAD_TENANTS_PER_PARTITION)
        ids = self._enqueue_now([tenants[i % len(tenants)] for i in range(jobs)])
        self._wait_started(conn, ids, "measuring capacity (saturation burst)", CAPACITY_TIMEOUT)
        rows = conn.execute(
            "SELECT extract(epoch FROM started_at)::float8 FROM tenantq_jobs WHERE id = ANY(%s) "
            "ORDER BY started_at",
            (ids,),
        ).fetchall()
        starts = [float(row[0]) for row in rows]
        low, high = round(0.1 * (len(starts) - 1)), round(0.9 * (len(starts) - 1))
        span = starts[high] - starts[low]
        capacity = (high - low) / span if span > 0 else float("nan")
        ideal = self.worker_count * self.slots / (self.knobs.job_ms / 1000)
        time.sleep(1.0)  # the last results written, the slots free again
        return (
            capacity,
            "measured",
            {
                "burst_jobs": jobs,
                "burst_tenants": len(tenants),
                "window_seconds": round(span, 3),
                "slots_bound_jobs_per_second": ideal,
                "share_of_slots_bound": round(capacity / ideal, 3),
            },
        )

    def _phases(self, capacity: float) -> list[PhaseSpec]:
        phases = []
        start = 0.0
        for plan in self.scenario.phases:
            cold, hot = plan.cold_rate, plan.hot_rate
            if plan.zipf_load > 0:
                # One basis for every run of the invocation (the first capacity measured):
                # runs compared side by side must be offered the same load, and a measured
                # capacity moves by 10% from run to run on a shared machine.
                if self.options.zipf_basis is None:
                    self.options.zipf_basis = capacity
                weights = zipf_weights(len(self.cold_tenants) + 1)
                total = plan.zipf_load * self.options.zipf_basis
                hot = total * weights[0] / sum(weights)
                cold = total - hot
            phases.append(
                PhaseSpec(plan.name, start, start + plan.seconds, cold, hot, plan.zipf_load > 0)
            )
            start += plan.seconds
        return phases

    def _schedules(self, phases: Sequence[PhaseSpec]) -> list[Schedule]:
        cold = Schedule(COLD, [], [], [])
        hot = Schedule(HOT, [], [], [])
        ranked = zipf_weights(len(self.cold_tenants) + 1)[1:]
        for phase in phases:
            cold.rates.append(phase.cold_rate)
            cold.tenants.append(self.cold_tenants)
            cold.weights.append(ranked if phase.zipf else None)
            hot.rates.append(phase.hot_rate)
            hot.tenants.append([HOT_TENANT])
            hot.weights.append(None)
        return [cold, hot]

    def _flow(
        self,
        conn: psycopg.Connection[Any],
        phases: list[PhaseSpec],
        probes: list[LagProbe],
    ) -> tuple[float, list[Pacer]]:
        """The phases: the pacers send, the tool samples once a second."""
        stop = threading.Event()
        plans = [PhasePlan(p.name, p.seconds, p.cold_rate, p.hot_rate) for p in phases]
        t0_mono = time.monotonic() + 0.2
        t0 = time.time() + (t0_mono - time.monotonic())
        shared = quiet_producer(self.settings) if self.options.single_producer else None
        pacers = [
            Pacer(
                self.settings,
                self.queue,
                schedule,
                plans,
                self.payload,
                self.options.seed,
                t0_mono,
                stop,
                shared,
            )  # fmt: skip
            for schedule in self._schedules(phases)
        ]
        try:
            with collector_paused():
                self._send(conn, phases, probes, pacers, stop, t0)
        finally:
            if shared is not None:
                shared.close()
        for pacer in pacers:
            if pacer.error:
                self.problems.append(f"the {pacer.schedule.klass} producer failed: {pacer.error}")
        return t0, pacers

    def _send(
        self,
        conn: psycopg.Connection[Any],
        phases: list[PhaseSpec],
        probes: list[LagProbe],
        pacers: list[Pacer],
        stop: threading.Event,
        t0: float,
    ) -> None:
        """Start the pacers, sample once a second until they are done."""
        total = phases[-1].end
        for pacer in pacers:
            pacer.start()
        self.progress.update(self.task, total=total, completed=0)
        try:
            while any(pacer.is_alive() for pacer in pacers):
                at = time.time() - t0
                sample = self._sample(conn, at, probes, pacers)
                phase = next((p for p in phases if at < p.end), phases[-1])
                sent = sum(pacer.sent for pacer in pacers)
                self._show(
                    f"{phase.name} ({max(0.0, at - phase.start):.0f}/{phase.seconds:.0f}s)",
                    completed=min(total, max(0.0, at)),
                    info=self._info(sample, sent),
                )
                self._watch_workers()
                self._pause(t0, at)
        finally:
            stop.set()
            for pacer in pacers:
                pacer.join(180)

    def _drain(
        self,
        conn: psycopg.Connection[Any],
        t0: float,
        phases: list[PhaseSpec],
        pacers: list[Pacer],
        probes: list[LagProbe],
    ) -> tuple[float, bool]:
        """Until every acknowledged cold job started, then until the lag is gone (everything
        committed) for ``HOT_GRACE_SECONDS`` at most: the hot backlog is not waited for."""
        end = phases[-1].end
        cold = sum(c.acknowledged for p in pacers if p.schedule.klass == COLD for c in p.counts)
        deadline = time.monotonic() + self.options.drain_timeout
        cold_done_at: float | None = None
        self.progress.update(self.task, total=cold, completed=0)
        while True:
            at = time.time() - t0
            sample = self._sample(conn, at, probes, pacers)
            cold_started = sample.started.get(COLD, 0)
            lag = sum(sample.lag.values()) + sum(sample.lane_lag.values())
            self._show(
                "waiting for every cold job to start"
                if cold_started < cold
                else "cold done; waiting for the lane to give its tenants back"
                if self.options.until_released and self.lane_stays
                else "cold done; the hot backlog, briefly",
                completed=cold_started,
                info=self._info(sample, None),
            )
            self._watch_workers()
            if cold_started >= cold:
                cold_done_at = cold_done_at or time.monotonic()
                if self.options.until_released and self.lane_stays:
                    # Until the lane keeper gave every moved tenant back (the backlog drained
                    # and the hysteresis waited out), to see the whole stay.
                    if not sample.lane:
                        return max(0.0, at - end), True
                elif lag == 0 or time.monotonic() - cold_done_at >= HOT_GRACE_SECONDS:
                    return max(0.0, at - end), True
            if time.monotonic() > deadline:
                if cold_started >= cold:
                    # Only --until-released was still waiting: the measurement is complete.
                    return max(0.0, at - end), True
                missing = cold - cold_started
                self.problems.append(
                    f"{missing:,} cold jobs had not started {self.options.drain_timeout:.0f}s "
                    "after the last phase (--drain-timeout): their latency is a lower bound"
                )
                return max(0.0, at - end), False
            self._pause(t0, at)

    @staticmethod
    def _pause(t0: float, at: float) -> None:
        """Sleep to the next whole second since t0, so samples fall on a steady grid."""
        next_at = (int(at / SAMPLE_SECONDS) + 1) * SAMPLE_SECONDS
        time.sleep(max(0.05, next_at - (time.time() - t0)))

    def _info(self, sample: Sample, sent: int | None) -> str:
        lag = sum(sample.lag.values())
        lane = sum(sample.lane_lag.values())
        parts = []
        if sent is not None:
            parts.append(f"sent {sent:,}")
        parts.append(f"cold started {sample.started.get(COLD, 0):,}")
        parts.append(f"lag {lag:,}" + (f" + lane {lane:,}" if lane else ""))
        parts.append("lane: " + (", ".join(sample.lane) or "-"))
        return " | ".join(parts)

    def _sample(
        self,
        conn: psycopg.Connection[Any],
        at: float,
        probes: list[LagProbe],
        pacers: Sequence[Pacer],
    ) -> Sample:
        lag = probes[0].lag() if probes else {}
        lane_lag = probes[1].lag() if len(probes) > 1 else {}
        members = lane_members(conn, self.queue)
        for tenant, reason, updated_by in members:
            stay = self.lane_stays.setdefault(tenant, LaneStay(first=at, last=at))
            stay.last = at
            stay.samples += 1
            stay.reason = reason or stay.reason
            stay.updated_by = updated_by or stay.updated_by
        # Cold jobs are counted by id, a handful of primary-key lookups a second: the tool's
        # own queries take next to nothing from the database being measured. The hot tenant
        # is followed through the lag instead (its rows are many).
        for pacer in pacers:
            if pacer.schedule.klass == COLD:
                noted = pacer.cold_ids[self._cold_noted :]
                self._cold_noted += len(noted)
                self._cold_pending.update(job_id for job_id, _, _ in noted)
        if self._cold_pending:
            seen = started_among(conn, list(self._cold_pending))
            self._cold_pending.difference_update(seen)
            self._cold_started += len(seen)
        started = {COLD: self._cold_started}
        sample = Sample(at, lag, lane_lag, tuple(t for t, _, _ in members), started)
        self.samples.append(sample)
        return sample

    def _collect(
        self,
        conn: psycopg.Connection[Any],
        t0: float,
        offset: float,
        phases: Sequence[PhaseSpec],
        pacers: list[Pacer],
    ) -> tuple[list[tuple[str, float, float | None]], dict[str, int], dict[str, float]]:
        """Every started job of the phases, and every cold job, as (tenant, enqueued, started
        or None), seconds since t0 on the tool's clock; per phase, the hot jobs that had not
        started (the backlog left when the tool stopped); and every started job's start by id."""
        rows = job_rows(conn, self.queue, [*self.cold_tenants, HOT_TENANT])
        seen = {row[3] for row in rows}
        jobs: list[tuple[str, float, float | None]] = [
            (tenant, enqueued - t0, started - offset - t0) for tenant, enqueued, started, _ in rows
        ]
        # A cold job that never started has no row, or one without started_at: its enqueue
        # time is the one the tool noted when it handed the job's batch over.
        for pacer in pacers:
            jobs.extend((tenant, at - t0, None) for job_id, tenant, at in pacer.cold_ids
                        if job_id not in seen)  # fmt: skip
        hot_started = Counter(
            phase_of(phases, enqueued).name
            for tenant, enqueued, started in jobs
            if tenant == HOT_TENANT and started is not None
        )
        hot_left = {}
        for pacer in pacers:
            if pacer.schedule.klass == HOT:
                for phase, count in zip(phases, pacer.counts, strict=True):
                    hot_left[phase.name] = max(0, count.acknowledged - hot_started[phase.name])
        started_at = {str(row[3]): row[2] - offset - t0 for row in rows}
        return jobs, hot_left, started_at

    def _check_producers(self, phases: Sequence[PhaseSpec], pacers: list[Pacer]) -> None:
        """The producers must not be what limits the run: every phase's asked jobs handed over
        (>= 95%) and acknowledged."""
        for pacer in pacers:
            for phase, count in zip(phases, pacer.counts, strict=True):
                if count.planned == 0:
                    continue
                if count.sent < PRODUCER_SHORTFALL * count.planned:
                    self.problems.append(
                        f"PRODUCER TOO SLOW: {pacer.schedule.klass} in {phase.name} asked "
                        f"{count.planned / phase.seconds:,.0f} jobs/s, achieved "
                        f"{count.sent / phase.seconds:,.0f} jobs/s"
                    )
                if count.acknowledged < count.sent:
                    missing = count.sent - count.acknowledged
                    self.problems.append(
                        f"{pacer.schedule.klass} in {phase.name}: {missing:,} of "
                        f"{count.sent:,} jobs not acknowledged ({count.failed:,} failed)"
                    )

    def _stop_workers(self) -> None:
        self._note_deaths()
        # Both at once: each drains on its own (running jobs finish in 50 ms).
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            status = worker.stop(timeout=self.settings.worker.drain_seconds + 20)
            if status not in (0, None) and worker.process.returncode not in (0, -signal.SIGTERM):
                self.problems.append(f"worker {worker.process.pid} ended with {status} on SIGTERM")
        self.workers = []


# -- the whole invocation --


@contextlib.contextmanager
def removing_rows(base: Settings, queues: list[tuple[str, str]], *, keep: bool) -> Iterator[None]:
    """On the way out, the rows of every run's (prefix, queue) (those of a failed run too)."""
    try:
        yield
    finally:
        if not keep and queues:
            url = psycopg_url(base.require_database_url())
            with contextlib.suppress(Exception), psycopg.connect(url, autocommit=True) as conn:
                for prefix, queue in queues:
                    remove_rows(conn, prefix, queue)


def run_all(chosen: Sequence[Scenario], options: Options) -> tuple[list[RunFigures], list[str]]:
    """Every chosen run in turn; returns their figures and the runs that failed outright (a
    worker died, the warm-up never saw both workers): those are said, and the others go on."""
    base = prepare_settings(console)
    revision = migrate_database(base)
    options.report_dir.mkdir(parents=True, exist_ok=True)
    console.print(
        f"[bold]hot-partition load test[/]: {', '.join(s.name for s in chosen)}; Kafka "
        f"{base.kafka_bootstrap_servers}; database at {revision}; report in {options.report_dir}"
    )
    results: list[RunFigures] = []
    failures: list[str] = []
    queues: list[tuple[str, str]] = []
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(bar_width=24),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
        console=console,
    )
    with progress, removing_rows(base, queues, keep=options.keep):
        for scenario in chosen:
            run = Run(scenario, base, options, progress)
            queues.append((run.prefix, run.queue))
            try:
                data = run.execute()
            except Exception as error:
                progress.console.print(f"[bold red]{scenario.name} FAILED[/]: {error}")
                failures.append(f"{scenario.name}: {type(error).__name__}: {error}")
                continue
            figures = analyse(data)
            results.append(figures)
            progress.console.print(phase_table(figures))
            gap = data.start_gap
            if gap:
                progress.console.print(
                    f"claim (started_at) -> handler start: p50 {gap['p50'] * 1000:.1f} ms, "
                    f"p99 {gap['p99'] * 1000:.1f} ms, max {gap['max'] * 1000:.1f} ms "
                    f"({gap['jobs']:,.0f} jobs)"
                )
            for problem in data.problems:
                progress.console.print(f"[bold red]{scenario.name}[/]: {problem}")
    return results, failures


def _revision() -> str:
    """The checkout's commit (and whether it has changes), for the report."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{head} ({Path(tenantq.__file__).parent})"


def _load() -> str:
    """The 1, 5 and 15 minute load averages: how shared the machine was (figures from a busy
    machine are noisy)."""
    try:
        return ", ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "?"


def from_command_line(
    kind: type[DataclassT], arguments: argparse.Namespace, **given: Any
) -> DataclassT:
    """A ``kind`` (a dataclass) of ``given`` and, for its other fields, the values of the
    command line's options named after them; a field that neither names keeps its default."""
    named = vars(arguments)
    values = {
        f.name: named[f.name] for f in fields(kind) if f.name in named and f.name not in given
    }
    return kind(**values, **given)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    knobs = Knobs()
    parser.add_argument(
        "--scenario",
        action="append",
        choices=sorted(scenarios(knobs)),
        help="a scenario to run (repeatable; default: flood-100x)",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="run each chosen scenario twice, protection on and off, side by side",
    )
    parser.add_argument(
        "--off-first",
        action="store_true",
        help="with --compare: the run with the protection off first (to see order effects)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run each chosen scenario (each side of --compare) N times, named <scenario>-r1.."
        "; the report adds each run's ratio, the median (the verdict of --require-targets) "
        "and the pooled figures",
    )
    parser.add_argument(
        "--worker",
        default="group",
        help="the worker each scenario runs with: group (tenantq worker), share (the "
        "share-group spike, a Kafka 4.2+ broker), or group,share for both, side by side",
    )
    parser.add_argument("--workers", type=int, default=WORKERS, help="worker processes")
    parser.add_argument(
        "--partitions", type=int, help="partitions of the run's queue (default: 12)"
    )
    parser.add_argument(
        "--concurrency", type=int, help="handler slots per worker process (default: 32)"
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--seed", type=int, default=7, help="seed of the tenants' choices")
    parser.add_argument("--capacity", type=float, help="jobs/s; default: measured by a burst")
    parser.add_argument("--saturation-jobs", type=int, default=4000, help="the burst's size")
    parser.add_argument("--calm-seconds", type=float, default=knobs.calm_seconds)
    parser.add_argument("--flood-seconds", type=float, default=knobs.flood_seconds)
    parser.add_argument("--after-seconds", type=float, default=knobs.after_seconds)
    parser.add_argument("--cold-tenants", type=int, default=knobs.cold_tenants)
    parser.add_argument("--cold-rate", type=float, default=knobs.cold_rate, help="jobs/s, all")
    parser.add_argument("--zipf-load", type=float, default=knobs.zipf_load,
                        help="the Zipf phase's rate, as a share of the capacity")  # fmt: skip
    parser.add_argument("--job-ms", type=float, default=knobs.job_ms, help="handler's sleep")
    parser.add_argument("--drain-timeout", type=float, default=600.0,
                        help="seconds to wait for the cold jobs after the last phase")  # fmt: skip
    parser.add_argument("--report-dir", type=Path, help="default: reports/hot-partition-<time>")
    parser.add_argument("--keep", action="store_true", help="keep the run's topics and rows")
    parser.add_argument(
        "--until-released",
        action="store_true",
        help="after the cold jobs, wait until the hot lane has given every tenant back (the "
        "backlog drained, then the release delay; up to --drain-timeout)",
    )
    parser.add_argument(
        "--handler-starts",
        action="store_true",
        help="cross-check: handlers note when they start (a file per handler process), and "
        "the report shows how long after the claim (started_at) that was",
    )
    parser.add_argument(
        "--single-producer",
        action="store_true",
        help="one tenantq.Producer sends every tenant class's jobs (the cold tenants' and the "
        "flood), as one service enqueues for all its tenants; default: one per class",
    )
    parser.add_argument(
        "--require-targets",
        action="store_true",
        help="exit 2 when a run with the protection on misses an isolation target",
    )
    args = parser.parse_args(argv)
    # SIGTERM (a CI timeout, a kill) cleans up as Ctrl-C does: the workers are stopped
    # gracefully and the run's topics and rows removed, instead of workers left running in
    # sessions of their own.
    signal.signal(signal.SIGTERM, _interrupt)
    knobs = from_command_line(Knobs, args)
    known = scenarios(knobs)
    if args.list:
        for scenario in known.values():
            seconds = sum(p.seconds for p in scenario.phases)
            print(f"{scenario.name:15} {seconds:4.0f}s  {scenario.summary}")
        return 0
    chosen: list[Scenario] = []
    for name in args.scenario or ["flood-100x"]:
        scenario = known[name]
        if args.compare:
            pair = [with_protection(scenario, True), with_protection(scenario, False)]
            chosen += pair[::-1] if args.off_first else pair
        else:
            chosen.append(scenario)
    kinds = [kind.strip() for kind in args.worker.split(",") if kind.strip()]
    unknown = [kind for kind in kinds if kind not in WORKER_KINDS]
    if unknown or not kinds:
        parser.error(f"--worker: one or more of {', '.join(WORKER_KINDS)}, not {args.worker!r}")
    chosen = [with_worker(scenario, kind) for scenario in chosen for kind in kinds]
    unique = {s.name: s for s in chosen}  # --compare of X and X-off: each once
    if args.repeat > 1:
        # Rounds, not runs of a scenario back to back: a machine that slows down for a while
        # slows every scenario's k-th run alike.
        unique = {
            repeat_name(s.name, k): replace(s, name=repeat_name(s.name, k))
            for k in range(1, args.repeat + 1)
            for s in unique.values()
        }
    report_dir = args.report_dir or ROOT / "reports" / (
        "hot-partition-" + dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    )
    options = from_command_line(
        Options,
        args,
        knobs=knobs,
        report_dir=report_dir,
        shape=Shape(args.workers, args.concurrency, args.partitions),
    )
    started = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    load_before = _load()
    try:
        results, failures = run_all(list(unique.values()), options)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]: workers stopped, the runs' topics and rows removed")
        return 130
    base = load_settings()
    meta = {
        "started": started,
        "revision": _revision(),
        "kafka": base.kafka_bootstrap_servers,
        "seed": args.seed,
        "machine": f"{os.cpu_count()} cores; load average {load_before} at the start, "
        f"{_load()} at the end.",
        "knobs": knobs.__dict__,
        "producers": "one for every tenant class" if args.single_producer else "one per class",
        "failed_runs": failures,
    }
    # Pools every run's cold jobs: once, for the report, the table and the verdict.
    found = repeats(results)
    if results:
        report, _ = write_report(results, report_dir, meta, found)
        console.print(side_by_side_table(results))
        if found:
            console.print(repeats_table(found))
        console.print(f"report: [bold]{report}[/]")
    if failures or not all(f.valid for f in results):
        console.print("[bold red]NOT A VALID MEASUREMENT[/]: see the problems above")
        return 1
    if args.require_targets:
        # A scenario run several times is judged on its median run.
        judged = {r.scenario: r for r in found}
        missed = [
            name
            for name, r in judged.items()
            if r.protection == "on" and False in (r.ratio_met, r.share_met)
        ] + [
            f.data.name
            for f in results
            if repeated_scenario(f.data.name) not in judged
            and f.data.protection == "on"
            and f.done_when is not None
            and False in (f.done_when.p99_ratio_met, f.done_when.hot_share_met)
        ]
        if missed:
            console.print(
                f"[bold red]targets missed[/] with the protection on: {', '.join(missed)}"
            )
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
