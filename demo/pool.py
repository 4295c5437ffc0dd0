"""The demo's worker pool: ``tenantq worker tenantq.demo.workload:APP --processes P`` in a
subprocess (the real supervisor), its settings passed as ``TENANTQ_*`` variables and its
output in a log file, stopped gracefully with SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from tenantq.settings import Settings

WORKLOAD_APP = "tenantq.demo.workload:APP"
WORKER_COMMAND = (sys.executable, "-m", "tenantq.cli", "worker", WORKLOAD_APP)


def worker_environment(settings: Settings, kafka_config: dict[str, str]) -> dict[str, str]:
    """This process's environment with the ``TENANTQ_*`` variables that rebuild ``settings``
    (and ``kafka_config`` for the workers' clients) in the worker processes."""
    data = settings.model_dump(mode="json")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TENANTQ_")}
    environment.update(
        {
            "TENANTQ_KAFKA_BOOTSTRAP_SERVERS": settings.require_bootstrap_servers(),
            "TENANTQ_DATABASE_URL": settings.require_database_url(),
            "TENANTQ_TOPIC_PREFIX": settings.topic_prefix,
            "TENANTQ_QUEUES": json.dumps(data["queues"]),
            "TENANTQ_WORKER": json.dumps(data["worker"]),
            "TENANTQ_KAFKA_CONFIG": json.dumps(kafka_config),
            "TENANTQ_METRICS_PORT": str(settings.metrics_port),
            "TENANTQ_LOG_LEVEL": settings.log_level,
        }
    )
    return environment


def stop_process(process: subprocess.Popen[bytes], timeout: float = 60.0) -> int | None:
    """SIGTERM (a graceful drain), then SIGKILL of its process group (a session of its own)
    after ``timeout``. Returns the exit status, None if it had to be killed."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
        return None


class WorkerPool:
    """A supervised pool of worker processes running the demo's job types. ``processes``
    must be at least 2: with one, ``tenantq worker`` runs without a supervisor and the poison
    job's crash would end the pool."""

    def __init__(
        self, settings: Settings, processes: int, log_path: Path, kafka_config: dict[str, str]
    ) -> None:
        self.settings = settings
        if processes < 2:
            raise ValueError("the demo's worker pool needs at least 2 processes")
        self.processes = processes
        self.log_path = log_path
        self.kafka_config = kafka_config
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[Any] | None = None

    def start(self) -> WorkerPool:
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(
            [*WORKER_COMMAND, "--processes", str(self.processes)],
            env=worker_environment(self.settings, self.kafka_config),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # Own session: a Ctrl-C at the terminal reaches the demo, which then stops the
            # pool once, gracefully, instead of every process getting the signal at once.
            start_new_session=True,
        )
        return self

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self, timeout: float) -> int | None:
        """SIGTERM to the supervisor, which passes it on so each worker drains; after
        ``timeout`` the pool's process group (started by us, in its own session) is killed.
        Returns the supervisor's exit status (None if it had to be killed)."""
        if self._process is None:
            return None
        try:
            return stop_process(self._process, timeout)
        finally:
            if self._log is not None:
                self._log.close()

    def crashes(self) -> int:
        """Processes that died and were started again — handler processes a job killed, and
        members — from the worker's log."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return 0
        return sum(
            1
            for line in text.splitlines()
            if ("tenantq.supervisor" in line and "exited with" in line)
            or ("handler process" in line and "starting another" in line)
        )
