"""What the member sends a handler process for one attempt: a plain tuple that reads back as
the ``TaskSpec`` it stands for, field by field."""

from __future__ import annotations

import time
import uuid

import tenantq
from tenantq.consumer.context import JobContext
from tenantq.consumer.executor import _spec
from tenantq.consumer.handler_process import TaskSpec
from tenantq.consumer.runner import Task


def test_a_task_travels_as_its_task_spec() -> None:
    app = tenantq.App(tenantq.Settings())

    @app.job("export")
    def export(ctx: tenantq.JobContext, payload: dict[str, object]) -> None: ...

    job_id = uuid.uuid4()
    deadline = time.monotonic() + 30
    context = JobContext(
        job_id=job_id,
        queue="default",
        job_type="export",
        tenant="acme",
        attempt=2,
        max_attempts=5,
        deadline=deadline,
        progress={"page": 3},
        replays=1,
        idempotency_key="key-1",
    )
    spec = TaskSpec._make(_spec(Task(app.job_type("export"), b'{"a": 1}', context, deadline)))
    assert spec._replace(timeout=0.0) == TaskSpec(
        job_id=job_id.bytes,
        job_type="export",
        queue="default",
        tenant="acme",
        payload=b'{"a": 1}',
        attempt=2,
        max_attempts=5,
        timeout=0.0,
        progress={"page": 3},
        replays=1,
        idempotency_key="key-1",
    )
    assert 29 < spec.timeout <= 30
