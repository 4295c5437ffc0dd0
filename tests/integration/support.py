"""Helpers of the integration scenarios: workers in threads or in processes, waiting on the
database for jobs to reach their states, and the `tenantq` command and the load test tools run
as operators run them."""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Protocol, TypeVar

import psycopg

import tenantq
from tenantq.consumer.worker import Worker
from tenantq.store.job_store import ClaimRequest

HERE = Path(__file__).resolve().parent


class Runnable(Protocol):
    """A worker of either kind: ``run()`` until ``stop()``."""

    def run(self) -> None: ...

    def stop(self) -> None: ...


RunnableT = TypeVar("RunnableT", bound=Runnable)


@contextlib.contextmanager
def running_worker(
    app: tenantq.App, settings: tenantq.Settings, **options: Any
) -> Iterator[Worker]:
    """A worker in a thread of this process; stopped gracefully on exit."""
    import apps

    apps.RECORD_URL = settings.require_database_url()
    worker = Worker(app, settings=settings, install_signal_handlers=False, **options)
    with running_in_thread(worker, "test-worker", "worker") as running:
        yield running


@contextlib.contextmanager
def running_in_thread(worker: RunnableT, thread_name: str, what: str) -> Iterator[RunnableT]:
    """``worker.run()`` in a thread named ``thread_name``; on exit, stopped, its thread joined
    (an AssertionError naming ``what`` if it does not stop) and its error raised."""
    errors: list[BaseException] = []

    def main() -> None:
        try:
            worker.run()
        except BaseException as error:  # surfaced in the test
            errors.append(error)

    thread = threading.Thread(target=main, name=thread_name, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(60)
        assert not thread.is_alive(), f"{what} did not stop"
        if errors:
            raise errors[0]


def wait_for(
    predicate: Callable[[], bool], timeout: float = 60.0, interval: float = 0.1, what: str = ""
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


def short_leases(lease_seconds: float = 2.0, **worker: Any) -> dict[str, Any]:
    """Worker settings (for ``make_settings(worker=...)``) under which a frozen or killed
    worker's lease runs out, and its owner counts as gone, ``lease_seconds`` after its last
    heartbeat; ``worker`` sets further fields."""
    return {
        "lease_seconds": lease_seconds,
        "heartbeat_interval_seconds": 0.5,
        "stale_owner_seconds": lease_seconds,
        **worker,
    }


def states(db: psycopg.Connection[Any], job_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    rows = db.execute(
        "SELECT id, state::text FROM tenantq_jobs WHERE id = ANY(%s)", (job_ids,)
    ).fetchall()
    return {row[0]: row[1] for row in rows}


def all_in(db: psycopg.Connection[Any], job_ids: list[uuid.UUID], wanted: set[str]) -> bool:
    found = states(db, job_ids)
    return len(found) == len(job_ids) and all(state in wanted for state in found.values())


def committed_offsets(settings: tenantq.Settings, group: str, topic: str) -> dict[int, int]:
    """The group's committed offset per partition of ``topic``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(settings.kafka_client_config(**{"group.id": group}))
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        partitions = [TopicPartition(topic, p) for p in metadata.topics[topic].partitions]
        return {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=10)}
    finally:
        consumer.close()


def end_offsets(settings: tenantq.Settings, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(settings.kafka_client_config(**{"group.id": f"probe-{uuid.uuid4()}"}))
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        result = {}
        for partition in metadata.topics[topic].partitions:
            result[partition] = _high_watermark(consumer, TopicPartition(topic, partition))
        return result
    finally:
        consumer.close()


def _high_watermark(consumer: Any, partition: Any) -> int:
    """The end offset of ``partition``; a topic created a moment ago may still be electing its
    leader (NOT_LEADER_FOR_PARTITION) on a busy machine: ask again for a while."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + 30
    while True:
        try:
            _, high = consumer.get_watermark_offsets(partition, timeout=10)
            return int(high)
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def member_arguments(members: int | None) -> tuple[str, ...]:
    """``tenantq worker``'s ``--processes`` for a test's worker: one member unless the test is
    about several (a second member joining moves partitions while the test's jobs run, and
    work read again after the move changes which copy of a record runs, or gives back a
    lease the test is watching); None: the default (one per CPU, at most four)."""
    return () if members is None else ("--processes", str(members))


def start_worker_command(
    environment: dict[str, str],
    app: str,
    extra: tuple[str, ...],
    log: IO[bytes],
    *,
    new_session: bool,
    stdin: int | None = None,
    runner: tuple[str, ...] = ("tenantq.cli", "worker"),
) -> subprocess.Popen[bytes]:
    """``tenantq worker app *extra`` (or another ``runner``: the module, and its command, run
    with ``python -m``) in a process of its own, with ``environment`` (this folder first on
    its ``PYTHONPATH``, for the apps), its output into ``log``."""
    environment = {
        **environment,
        "PYTHONPATH": str(HERE) + os.pathsep + environment.get("PYTHONPATH", ""),
    }
    return subprocess.Popen(
        [sys.executable, "-m", *runner, app, *extra],
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=stdin,
        start_new_session=new_session,
    )


class WorkerProcess:
    """A worker in its own process (``tests/integration/apps.py:APP``), for kill -9, SIGSTOP
    and graceful-shutdown scenarios. Settings travel as ``TENANTQ_*`` variables.

    ``tenantq worker`` is a supervisor with member processes and their handler processes, in
    a process group of its own: SIGSTOP, SIGCONT and SIGKILL go to the whole group (the host
    freezes, or dies), SIGTERM and SIGINT to the supervisor, which passes them on."""

    def __init__(
        self,
        settings: tenantq.Settings,
        app: str,
        *extra: str,
        env: dict[str, str] | None = None,
        runner: tuple[str, ...] = ("tenantq.cli", "worker"),
        members: int | None = 1,
    ) -> None:
        """``runner``: the module (and its command) run with ``python -m``; the share-group
        spike's member is ``("tenantq.consumer.share",)``. ``members``: see
        ``member_arguments``."""
        environment = dict(os.environ)
        environment.update(settings_environment(settings))
        environment.update(env or {})
        # A file, not a pipe: nobody reads a pipe while the worker runs, and a full one would
        # block the worker's logging.
        self._log = tempfile.TemporaryFile()
        if runner == ("tenantq.cli", "worker"):
            extra = (*extra, *member_arguments(members))
        self.process = start_worker_command(
            environment, app, extra, self._log, new_session=True, runner=runner
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def signal(self, number: int) -> None:
        if number in (signal.SIGSTOP, signal.SIGCONT, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, number)
        else:
            os.kill(self.process.pid, number)

    def terminate(self, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.signal(signal.SIGKILL)
        self.process.wait(30)

    def output(self) -> str:
        """What the worker printed so far."""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")


@contextlib.contextmanager
def migrated_database(server_url: str, prefix: str) -> Iterator[str]:
    """A new database on the server of ``server_url`` (named ``prefix`` and a random tail),
    migrated to the head revision; dropped, whoever still holds it, on exit."""
    from sqlalchemy.engine import make_url

    from tenantq.store import migrate
    from tenantq.store.engine import psycopg_url

    name = f"{prefix}{uuid.uuid4().hex[:10]}"
    admin_url = psycopg_url(make_url(server_url).set(database="postgres").render_as_string(False))
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    try:
        migrate.upgrade_database(tenantq.Settings(database_url=url))
        yield url
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def leased_by_a_worker_process(
    settings: tenantq.Settings, db: psycopg.Connection[Any], seconds: float = 4.0
) -> Iterator[tuple[uuid.UUID, WorkerProcess]]:
    """An ``uncooperative`` job of ``seconds`` leased by a ``WorkerProcess`` of ``apps:APP``:
    yields the job id and the process, which is resumed (SIGCONT) and killed on exit."""
    with tenantq.Producer(settings) as producer:
        job_id = (
            producer.enqueue("uncooperative", tenant="acme", payload={"seconds": seconds})
            .result(30)
            .job_id
        )
    holder = WorkerProcess(settings, "apps:APP")
    try:
        wait_for(lambda: all_in(db, [job_id], {"leased"}), timeout=60, what="first lease")
        yield job_id, holder
    finally:
        holder.signal(signal.SIGCONT)
        holder.kill()


def take_over_from_frozen_owner(
    db: psycopg.Connection[Any],
    job_id: uuid.UUID,
    owner: WorkerProcess,
    successor: contextlib.AbstractContextManager[Any],
    refused: str,
) -> tuple[str | None, Any]:
    """Freeze the job's lease ``owner`` (SIGSTOP); while ``successor`` (a running worker's
    context) takes the job over and succeeds it, resume the owner and wait until its result
    is refused as stale (``refused`` names that wait). Returns the frozen owner's worker id
    and the successor, stopped; the successor ran this job only."""
    owner_id = lease_owner(db, job_id)
    owner.signal(signal.SIGSTOP)
    with successor as running:
        wait_for(lambda: all_in(db, [job_id], {"succeeded"}), timeout=90, what="takeover")
        owner.signal(signal.SIGCONT)
        wait_for(lambda: stale_attempts(db, job_id) == 1, timeout=60, what=refused)
        assert running.stats["succeeded"] == 1
    return owner_id, running


def tool_environment(servers: tuple[str, str], database_url: str) -> dict[str, str]:
    """The environment of a command line tool run against the test servers: they are named
    to it by ``TENANTQ_KAFKA_BOOTSTRAP_SERVERS`` and ``TENANTQ_DATABASE_URL``, and it gets
    no other ``TENANTQ_*`` of this process but the servers' client security."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TENANTQ_")}
    environment["TENANTQ_KAFKA_BOOTSTRAP_SERVERS"] = servers[0]
    environment["TENANTQ_DATABASE_URL"] = database_url
    if "TENANTQ_KAFKA_CONFIG" in os.environ:  # the servers' client security (a secure stack)
        environment["TENANTQ_KAFKA_CONFIG"] = os.environ["TENANTQ_KAFKA_CONFIG"]
    return environment


def run_tool(
    command: list[str], servers: tuple[str, str], database_url: str, timeout: float
) -> str:
    """Run a command line tool against the test servers (``tool_environment``); asserts it
    exits 0 and returns what it printed."""
    completed = subprocess.run(
        command,
        env=tool_environment(servers, database_url),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output
    return output


def tenantq_command(
    arguments: list[str], environment: dict[str, str], timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """`tenantq ARGUMENTS` as an operator runs it: with only these ``TENANTQ_*`` variables
    (none of this process's), this folder first on its ``PYTHONPATH`` (for the apps) and a
    wide terminal (an error line is not wrapped); its output captured."""
    clean = {name: value for name, value in os.environ.items() if not name.startswith("TENANTQ_")}
    clean["PYTHONPATH"] = str(HERE) + os.pathsep + clean.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "tenantq.cli", *arguments],
        env={**clean, **environment, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line(stderr: str) -> str:
    """The one line of a command's ``stderr`` (asserted: one line, no traceback)."""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    return lines[0]


def counting_app(
    settings: tenantq.Settings, job_type: str, *, seconds: float = 0.0, max_attempts: int = 3
) -> tuple[tenantq.App, Counter[uuid.UUID]]:
    """An app whose one job type sleeps ``seconds`` (a backlog can build up) and counts its
    runs, per job id."""
    app = tenantq.App(settings)
    ran: Counter[uuid.UUID] = Counter()
    lock = threading.Lock()

    @app.job(job_type, max_attempts=max_attempts)
    def count(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        if seconds:
            time.sleep(seconds)
        with lock:
            ran[ctx.job_id] += 1

    return app, ran


def settings_environment(settings: tenantq.Settings) -> dict[str, str]:
    """The ``TENANTQ_*`` variables that rebuild ``settings`` in another process."""
    data = settings.model_dump(mode="json")
    environment = {
        "TENANTQ_KAFKA_BOOTSTRAP_SERVERS": settings.require_bootstrap_servers(),
        "TENANTQ_DATABASE_URL": settings.require_database_url(),
        "TENANTQ_TOPIC_PREFIX": settings.topic_prefix,
        "TENANTQ_QUEUES": json.dumps(data["queues"]),
        "TENANTQ_WORKER": json.dumps(data["worker"]),
        "TENANTQ_PRODUCER": json.dumps(data["producer"]),
        "TENANTQ_TENANT_ISOLATION": json.dumps(data["tenant_isolation"]),
        "TENANTQ_METRICS_PORT": str(settings.metrics_port),
    }
    if settings.kafka_config:
        # The client's security settings as they are (a dump masks the password).
        environment["TENANTQ_KAFKA_CONFIG"] = json.dumps(settings.kafka_config)
    return environment


def caught_up(settings: tenantq.Settings, group: str, topic: str) -> bool:
    """True when ``group`` has committed the end offset of every non-empty partition."""
    ends = end_offsets(settings, topic)
    committed = committed_offsets(settings, group, topic)
    return all(committed.get(p) == end for p, end in ends.items() if end > 0)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape(port: int) -> str:
    """The text of ``/metrics`` served on 127.0.0.1:``port``."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return str(response.read().decode())


def sample_value(text: str, name: str, **labels: str) -> float | None:
    """The value of sample ``name`` whose labels include ``labels`` in a scrape, or None."""
    for line in text.splitlines():
        if not line.startswith(name) or line[len(name) : len(name) + 1] not in ("{", " "):
            continue
        if all(f'{key}="{value}"' in line for key, value in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


class LoggedWorkerProcess:
    """``tenantq worker`` (``python -m tenantq.cli worker``) in its own process, its output in
    a file that can be read while it runs (start-up lines, tracebacks, supervisor restarts).

    ``environment`` is the whole ``TENANTQ_*`` set (``settings_environment``); variables named
    in ``unset`` are removed even from this process's environment, so a test can show a
    default (the metrics port) really is the default. ``new_session`` puts the worker and its
    members in a process group of their own, for signals to the whole worker (kill -9 of a
    service, SIGSTOP of a host). ``members``: ``member_arguments``."""

    def __init__(
        self,
        environment: dict[str, str],
        app: str,
        *extra: str,
        log_path: Path,
        unset: tuple[str, ...] = (),
        new_session: bool = False,
        members: int | None = 1,
    ) -> None:
        merged = dict(os.environ)
        merged.update(environment)
        for name in unset:
            merged.pop(name, None)
        self.log_path = log_path
        self._log = log_path.open("ab")
        self.process = start_worker_command(
            merged,
            app,
            (*extra, *member_arguments(members)),
            self._log,
            new_session=new_session,
            stdin=subprocess.DEVNULL,
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def signal(self, number: int) -> None:
        if self.alive():
            os.kill(self.process.pid, number)

    def signal_group(self, number: int) -> None:
        """Signal the worker's whole process group (needs ``new_session``)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, number)

    def terminate(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait; kill -9 (the whole group when it has one) after ``timeout``.
        Returns the exit status, or None when it had to be killed."""
        self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        finally:
            self._log.close()

    def kill(self) -> None:
        """kill -9 the worker and every process it started (its members)."""
        for pid in [*descendants(self.process.pid), self.process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait(30)
        self._log.close()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")


def descendants(pid: int) -> list[int]:
    """Every living process below ``pid`` (children, their children, ...), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        children = [child for child, parent in parents.items() if parent == current]
        found.extend(children)
        frontier.extend(children)
    return found


def assert_alive(*workers: LoggedWorkerProcess) -> None:
    """Fail at once, with its output, when a worker process has exited."""
    for worker in workers:
        code = worker.process.poll()
        if code is not None:
            raise AssertionError(
                f"worker {worker.pid} exited with status {code}; its output:\n"
                + worker.output()[-6000:]
            )


def while_alive(predicate: Callable[[], bool], *workers: LoggedWorkerProcess) -> Callable[[], bool]:
    """``predicate`` for ``wait_for`` that first fails fast when one of ``workers`` exited."""

    def check() -> bool:
        assert_alive(*workers)
        return predicate()

    return check


def wait_for_states(
    db: psycopg.Connection[Any],
    job_ids: list[uuid.UUID],
    wanted: set[str],
    *workers: LoggedWorkerProcess,
    timeout: float,
    what: str,
) -> None:
    """Wait until every job of ``job_ids`` is in a state of ``wanted``; fails at once when one
    of ``workers`` has exited."""
    wait_for(while_alive(lambda: all_in(db, job_ids, wanted), *workers), timeout=timeout, what=what)


def migrate_to(url: str, revision: str, *, down: bool = False) -> None:
    """Upgrade (or with ``down``, downgrade) the database of ``url`` to ``revision``, in one
    transaction."""
    from alembic import command

    from tenantq.store import migrate
    from tenantq.store.engine import create_sqlalchemy_engine

    engine = create_sqlalchemy_engine(tenantq.Settings(database_url=url))
    config = migrate.alembic_config()
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            (command.downgrade if down else command.upgrade)(config, revision)
    finally:
        engine.dispose()


def count_of(db: psycopg.Connection[Any], sql: str, parameters: Any = None) -> int:
    """The number a ``SELECT count(*)`` statement answers."""
    row = db.execute(sql, parameters).fetchone()
    assert row is not None
    return int(row[0])


def stale_attempts(db: psycopg.Connection[Any], job_id: uuid.UUID) -> int:
    """How many of the job's attempts had their result refused as stale (fenced off)."""
    return count_of(
        db,
        "SELECT count(*) FROM tenantq_job_attempts WHERE job_id = %s AND outcome = 'stale'",
        (job_id,),
    )


def lease_owner(db: psycopg.Connection[Any], job_id: uuid.UUID) -> str | None:
    """The worker that holds the job's lease now (None: no lease, or no such job)."""
    row = db.execute("SELECT lease_owner FROM tenantq_jobs WHERE id = %s", (job_id,)).fetchone()
    return row[0] if row else None


def attempt_outcomes(db: psycopg.Connection[Any], job_id: uuid.UUID) -> list[tuple[Any, ...]]:
    """The job's attempt rows as ``(attempt, worker_id, outcome)``, in attempt order."""
    return db.execute(
        "SELECT attempt, worker_id, outcome FROM tenantq_job_attempts "
        "WHERE job_id = %s ORDER BY attempt, id",
        (job_id,),
    ).fetchall()


def executions(db: psycopg.Connection[Any], job_id: uuid.UUID) -> list[tuple[int, str]]:
    """The job's runs as the test apps' handlers recorded them in ``test_executions``:
    ``(attempt, note)``, in the order they were recorded."""
    rows = db.execute(
        "SELECT attempt, note FROM test_executions WHERE job_id = %s ORDER BY at", (job_id,)
    ).fetchall()
    return [(int(row[0]), str(row[1])) for row in rows]


def topic_records(settings: tenantq.Settings, topic: str, group: str) -> list[Any]:
    """Every record of ``topic`` from the start of each partition (the client's messages), read
    until none came for six polls of half a second."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(settings.kafka_client_config(**{"group.id": group}))
    records = []
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, partition, 0) for partition in partitions])
        idle = 0
        while idle < 6:
            message = consumer.poll(0.5)
            if message is None or message.error():
                idle += 1
                continue
            records.append(message)
    finally:
        consumer.close()
    return records


def hot_lane_settings(
    make_settings: Callable[..., tenantq.Settings], release_after_seconds: float, **more: Any
) -> tenantq.Settings:
    """Settings of a hot-lane scenario: the queue ``default`` of two partitions (retries after
    1 s and 3 s), a tenant moved to the lane past a backlog of 50 and back after
    ``release_after_seconds``, placements read again every half second; ``more`` as keywords
    of ``make_settings``."""
    return make_settings(
        queues={"default": tenantq.QueueSettings(partitions=2, retry_delays_seconds=(1.0, 3.0))},
        tenant_isolation={"hot_backlog": 50, "release_after_seconds": release_after_seconds},
        producer={"placement_ttl_seconds": 0.5},
        **more,
    )


def flood(
    producer: tenantq.Producer, whale: str, jobs: int, cold: Iterable[str]
) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """``jobs`` jobs ``work`` of ``whale`` in one batch, then one of each ``cold`` tenant;
    their job ids (the whale's, the cold tenants')."""
    flooded = [
        ref.job_id
        for ref in producer.enqueue_batch(
            [{"job_type": "work", "tenant": whale, "payload": {"n": n}} for n in range(jobs)]
        ).result(60)
    ]
    quiet = [
        producer.enqueue("work", tenant=tenant, payload={}).result(30).job_id for tenant in cold
    ]
    return flooded, quiet


def new_claim_requests(
    tenant: str, count: int, *, queue: str = "default", job_type: str = "export"
) -> list[ClaimRequest]:
    """``count`` new jobs of ``tenant`` (payload ``{}``), as a poll batch hands them to the
    claim: offsets 0 to ``count - 1`` of one partition."""
    now = dt.datetime.now(dt.UTC)
    payload = b"{}"
    digest = hashlib.sha256(payload).digest()
    return [
        ClaimRequest(
            job_id=uuid.uuid4(),
            queue=queue,
            job_type=job_type,
            tenant_id=tenant,
            partition_key=tenant,
            payload=payload,
            payload_sha256=digest,
            max_attempts=3,
            idempotency_key=None,
            origin_topic="topic",
            origin_partition=0,
            origin_offset=offset,
            enqueued_at=now,
        )
        for offset in range(count)
    ]
