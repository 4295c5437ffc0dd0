"""``tenantq worker``: P member processes (``--processes``; by default one per CPU, at most
4: ``WorkerSettings.member_processes``), each one group member, watched by this supervisor;
and the background services of the app (outbox relay, periodic scheduler, pruner), once per
supervisor.

A member that dies is noticed at once: the supervisor stops it in the worker registry and
frees its leases in one statement (the jobs it ran count the crash and get their attempt
back), so other members and its replacement take its jobs without waiting for a lease to
expire; then it starts a replacement. Members rarely die: handlers run in each member's
handler process, whose deaths the member absorbs. SIGTERM/SIGINT are passed on, so each
member drains gracefully; a member that gives up on an unreachable database (exit 3) stops
the whole worker with that status. Under a supervisor the members' metrics are summed and
served here, with the supervisor's own.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from tenantq.background import BackgroundService
from tenantq.consumer.database_health import EXIT_DATABASE_GONE
from tenantq.errors import DatabaseUnavailable
from tenantq.observability import specs
from tenantq.settings import Settings
from tenantq.store.job_store import JobStore

log = logging.getLogger("tenantq.supervisor")

#: A member that dies sooner than this after starting is restarted with a growing delay.
FAST_DEATH_SECONDS = 5.0
#: How long background services get to stop.
SERVICE_STOP_SECONDS = 10.0


@dataclass
class Member:
    process: subprocess.Popen[bytes]
    worker_id: str
    started: float


class Supervisor:
    def __init__(
        self,
        member_arguments: Sequence[str],
        processes: int,
        settings: Settings,
        queues: list[str] | None = None,
        services: Sequence[BackgroundService] = (),
    ) -> None:
        self.member_arguments = list(member_arguments)
        self.processes = processes
        self.settings = settings
        self.queues = queues
        self.services = list(services)
        self._environment = dict(os.environ)
        self._metrics_dir: str | None = None
        self._server: Any = None
        self.members: dict[int, Member] = {}
        #: The pool's own families, served beside the members' aggregate.
        self.registry = CollectorRegistry()
        spec = specs.SPECS_BY_NAME[specs.WORKER_RESTARTS]
        self.restarts = Counter(spec.name, spec.help, registry=self.registry)
        #: Dead members whose leases are not freed yet (the database was away).
        self._unsettled: list[tuple[str, str]] = []
        self._store = JobStore.open(settings, f"supervisor-{os.getpid()}", role="supervisor")
        self._stopping = False
        self._signals = 0
        self._exit_code = 0

    # -- members -------------------------------------------------------------------------------

    def _spawn(self, slot: int) -> None:
        worker_id = f"{socket.gethostname()}-{os.getpid()}-m{slot}-{uuid.uuid4().hex[:6]}"
        command = [
            sys.executable,
            "-m",
            "tenantq.cli",
            "worker",
            *self.member_arguments,
            "--member",
            "--worker-id",
            worker_id,
        ]
        process = subprocess.Popen(command, env=self._environment)
        self.members[slot] = Member(process, worker_id, time.monotonic())

    def _forward(self, number: int, _frame: object) -> None:
        self._stopping = True
        self._signals += 1
        for member in self.members.values():
            if member.process.poll() is None:
                member.process.send_signal(signal.SIGTERM if self._signals == 1 else signal.SIGINT)

    def _member_died(self, member: Member, code: int) -> None:
        how = f"worker process {member.process.pid} exited with {_describe_exit(code)}"
        self._unsettled.append((member.worker_id, how))
        self._settle_dead_members()
        if self._metrics_dir is not None:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(member.process.pid, self._metrics_dir)  # type: ignore[no-untyped-call]

    def _settle_dead_members(self) -> None:
        """Free the leases of dead members now (or, with the database away, later)."""
        while self._unsettled:
            worker_id, how = self._unsettled[0]
            try:
                freed = self._store.worker_crashed(worker_id, how)
            except DatabaseUnavailable as error:
                log.warning("cannot free the leases of %s yet: %s", worker_id, error)
                return
            self._unsettled.pop(0)
            log.warning("%s; %d of its leases freed", how, freed)

    # -- metrics -------------------------------------------------------------------------------

    def _serve_aggregate(self) -> None:
        """Members write samples to a shared folder; the supervisor serves their sum."""
        settings = self.settings
        if not settings.metrics_port:
            return
        from prometheus_client.multiprocess import MultiProcessCollector

        from tenantq.observability.server import serve_metrics_from_settings
        from tenantq.observability.worker import MULTIPROCESS_ENV, queue_stats_collector

        self._metrics_dir = tempfile.mkdtemp(prefix="tenantq-metrics-")
        self._environment[MULTIPROCESS_ENV] = self._metrics_dir
        self._environment["TENANTQ_METRICS_PORT"] = "0"
        MultiProcessCollector(self.registry, path=self._metrics_dir)  # type: ignore[no-untyped-call]
        self.registry.register(queue_stats_collector(settings, self.queues))
        self._server = serve_metrics_from_settings(self.registry, settings)

    # -- running -------------------------------------------------------------------------------

    def run(self) -> int:
        """Supervise until SIGTERM/SIGINT; returns the exit status."""
        try:
            self._serve_aggregate()
            for service in self.services:
                service.start()
            log.info(
                "tenantq worker: %d member process(es), metrics %s, services: %s",
                self.processes,
                self._server.url if self._server is not None else "not served",
                ", ".join(service.name for service in self.services) or "none",
            )
            return self._supervise()
        finally:
            for service in self.services:
                try:
                    service.stop(SERVICE_STOP_SECONDS)
                except Exception:
                    log.exception("background service %s did not stop cleanly", service.name)
            if self._server is not None:
                self._server.close()
            if self._metrics_dir is not None:
                shutil.rmtree(self._metrics_dir, ignore_errors=True)
            self._store.close()

    def _supervise(self) -> int:
        signal.signal(signal.SIGTERM, self._forward)
        signal.signal(signal.SIGINT, self._forward)
        for slot in range(self.processes):
            self._spawn(slot)
        delays = dict.fromkeys(range(self.processes), 0.5)
        while True:
            time.sleep(0.05)
            self._settle_dead_members()
            alive = 0
            for slot, member in list(self.members.items()):
                code = member.process.poll()
                if code is None:
                    alive += 1
                    continue
                if self._stopping:
                    continue
                self._member_died(member, code)
                if code == EXIT_DATABASE_GONE:
                    log.error("a member gave up on the database; stopping the worker")
                    self._exit_code = EXIT_DATABASE_GONE
                    self._forward(signal.SIGTERM, None)
                    continue
                lived = time.monotonic() - member.started
                delays[slot] = 0.5 if lived > FAST_DEATH_SECONDS else min(delays[slot] * 2, 30.0)
                log.warning("restarting member %d in %.1fs", slot, delays[slot])
                time.sleep(delays[slot])
                self.restarts.inc()
                self._spawn(slot)
                alive += 1
            if self._stopping and alive == 0:
                return self._exit_code


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"code {code}"
