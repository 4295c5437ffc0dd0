"""``tenantq worker --processes P``: P worker processes, each one group member, restarted when
one dies (a handler that calls ``os._exit`` or is killed by the OOM killer takes its process,
not the pool). SIGTERM/SIGINT are passed on, so each child drains gracefully."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter
from tenantq.observability import specs
from tenantq.settings import Settings

log = logging.getLogger("tenantq.supervisor")

#: A child that dies sooner than this after starting is restarted with a growing delay.
FAST_DEATH_SECONDS = 5.0


class Supervisor:
    def __init__(
        self,
        child_arguments: Sequence[str],
        processes: int,
        settings: Settings | None = None,
        queues: list[str] | None = None,
    ) -> None:
        self.child_arguments = list(child_arguments)
        self.processes = processes
        self.settings = settings
        self.queues = queues
        self._environment = dict(os.environ)
        self._metrics_dir: str | None = None
        self._server: Any = None
        self.children: dict[int, tuple[subprocess.Popen[bytes], float]] = {}
        #: The pool's own families, served beside the children's aggregate.
        self.registry = CollectorRegistry()
        spec = specs.SPECS_BY_NAME[specs.WORKER_RESTARTS]
        self.restarts = Counter(spec.name, spec.help, registry=self.registry)
        self._stopping = False
        self._signals = 0

    def _spawn(self, slot: int) -> None:
        command = [
            sys.executable,
            "-m",
            "tenantq.cli",
            "worker",
            *self.child_arguments,
            "--processes",
            "1",
        ]
        self.children[slot] = (
            subprocess.Popen(command, env=self._environment),
            time.monotonic(),
        )

    def _forward(self, number: int, _frame: object) -> None:
        self._stopping = True
        self._signals += 1
        for process, _ in self.children.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM if self._signals == 1 else signal.SIGINT)

    def _serve_aggregate(self) -> None:
        """Children write samples to a shared folder; the supervisor serves their sum."""
        settings = self.settings
        if settings is None or not settings.metrics_port:
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

    def _child_gone(self, pid: int) -> None:
        if self._metrics_dir is not None:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(pid, self._metrics_dir)  # type: ignore[no-untyped-call]

    def run(self) -> int:
        try:
            self._serve_aggregate()
            return self._supervise()
        finally:
            if self._server is not None:
                self._server.close()
            if self._metrics_dir is not None:
                shutil.rmtree(self._metrics_dir, ignore_errors=True)

    def _supervise(self) -> int:
        signal.signal(signal.SIGTERM, self._forward)
        signal.signal(signal.SIGINT, self._forward)
        for slot in range(self.processes):
            self._spawn(slot)
        delays = dict.fromkeys(range(self.processes), 0.5)
        while True:
            time.sleep(0.2)
            alive = 0
            for slot, (process, started) in list(self.children.items()):
                code = process.poll()
                if code is None:
                    alive += 1
                    continue
                if self._stopping:
                    continue
                self._child_gone(process.pid)
                lived = time.monotonic() - started
                delays[slot] = 0.5 if lived > FAST_DEATH_SECONDS else min(delays[slot] * 2, 30.0)
                log.warning(
                    "worker process %d exited with %s after %.1fs; restarting in %.1fs",
                    process.pid,
                    code,
                    lived,
                    delays[slot],
                )
                time.sleep(delays[slot])
                self.restarts.inc()
                self._spawn(slot)
                alive += 1
            if self._stopping and alive == 0:
                return 0
