"""The no-op job type of the throughput benchmark (``loadtest/throughput_bench.py``),
importable by ``tenantq worker`` processes as ``throughput_app:APP`` (``loadtest/`` on
``PYTHONPATH``).

The handler does nothing and takes no payload model, so what the benchmark measures is the
queue's own cost per job: consume, claim, dispatch to the handler process, complete, commit.
"""

from __future__ import annotations

import os
from typing import Any

import start_trace
from start_trace import START_TRACE_VARIABLE

import tenantq

#: The benchmark's only queue; every run has topics of its own under a fresh prefix.
QUEUE = "bench"
JOB_TYPE = "noop"

APP = tenantq.App()


#: Set (by ``--tenantq ...a``) in the worker's environment: the no-op is an ``async def``
#: handler, run on the handler runner's event loop instead of a thread of its own.
ASYNC_HANDLER_VARIABLE = "THROUGHPUT_ASYNC_HANDLER"


def noop(ctx: object, payload: dict[str, Any]) -> None:
    return None


async def noop_async(ctx: object, payload: dict[str, Any]) -> None:
    return None


def noop_traced(ctx: Any, payload: dict[str, Any]) -> None:
    start_trace.handler_started(ctx.job_id)


async def noop_async_traced(ctx: Any, payload: dict[str, Any]) -> None:
    start_trace.handler_started(ctx.job_id)


_TRACE_FOLDER = os.environ.get(START_TRACE_VARIABLE)
if _TRACE_FOLDER:
    start_trace.install(_TRACE_FOLDER)
    _handlers = (noop_traced, noop_async_traced)
else:
    _handlers = (noop, noop_async)
APP.job(JOB_TYPE, queue=QUEUE)(
    _handlers[1] if os.environ.get(ASYNC_HANDLER_VARIABLE) else _handlers[0]
)
