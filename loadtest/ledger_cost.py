"""WAL bytes and server time per job of the worker's two hot statements, the claim and the
result, at the batch sizes a worker sends (for docs/scaling.md).

Each trial claims ``--batch`` new jobs in one ``JOB_CLAIM_BATCH`` and records their success
in one ``JOB_COMPLETE_BATCH``, on a database of its own on the dev stack's server (dropped at
the end), and reads ``pg_current_wal_insert_lsn()`` before and after each statement. The
server is shared, so other users' WAL lands in the same window: the least of ``--trials``
is the figure (a window nobody else wrote in).

    python loadtest/ledger_cost.py                       # batches of 32, 250 and 1,000
    python loadtest/ledger_cost.py --batch 500 --trials 9
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import sys
import time
import uuid

import psycopg
from bench_tenantq import prepare_database
from throughput_bench import drop_database, find_servers

import tenantq
from tenantq.states import JobState
from tenantq.store.engine import psycopg_url
from tenantq.store.job_store import ClaimRequest, JobStore, Result

PAYLOAD = b"{}"


def _requests(count: int, offset: int) -> list[ClaimRequest]:
    now = dt.datetime.now(dt.UTC)
    digest = hashlib.sha256(PAYLOAD).digest()
    return [
        ClaimRequest(
            uuid.uuid4(),
            "default",
            "noop",
            f"tenant-{n % 200}",
            f"tenant-{n % 200}",
            PAYLOAD,
            digest,
            8,
            None,
            "bench.default",
            n % 12,
            offset + n,
            now,
        )  # fmt: skip
        for n in range(count)
    ]


def _lsn(connection: psycopg.Connection[tuple[int]]) -> int:
    row = connection.execute("SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


def measure(url: str, batch: int, trials: int) -> tuple[float, float, float, float]:
    """Least WAL bytes per job of the claim and of the result, and least wall time per job
    of each (µs), over ``trials``."""
    store = JobStore.open(tenantq.Settings(database_url=url), "ledger-cost")
    claim_wal, result_wal, claim_time, result_time = [], [], [], []
    with psycopg.connect(psycopg_url(url), autocommit=True) as probe:
        for trial in range(trials + 1):  # the first prepares the statements: not counted
            requests = _requests(batch, trial * batch)
            before = _lsn(probe)
            started = time.perf_counter()
            leases = store.claim_batch(requests, 30.0, 60.0, 3)
            claimed = time.perf_counter()
            middle = _lsn(probe)
            results = [
                Result(
                    lease.job_id,
                    lease.attempt,
                    "succeeded",
                    JobState.SUCCEEDED,
                    duration_ms=0,
                    started_at=lease.claimed_at,
                )  # fmt: skip
                for lease in leases.values()
            ]
            started_result = time.perf_counter()
            applied = store.complete_batch(results)
            finished = time.perf_counter()
            after = _lsn(probe)
            assert len(leases) == len(applied) == batch
            if trial == 0:
                continue
            claim_wal.append((middle - before) / batch)
            result_wal.append((after - middle) / batch)
            claim_time.append((claimed - started) * 1e6 / batch)
            result_time.append((finished - started_result) * 1e6 / batch)
    store.close()
    return min(claim_wal), min(result_wal), min(claim_time), min(result_time)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, action="append", help="jobs per statement")
    parser.add_argument("--trials", type=int, default=5)
    arguments = parser.parse_args()
    servers = find_servers()
    name = f"tqledger_{uuid.uuid4().hex[:8]}"
    url = prepare_database(servers, name)
    try:
        print("| jobs per statement | WAL bytes/job: claim | result | total | wall µs/job: claim "
              "| result |")  # fmt: skip
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for batch in arguments.batch or [32, 250, 1000]:
            claim, result, claim_us, result_us = measure(url, batch, arguments.trials)
            print(
                f"| {batch:,} | {claim:,.0f} | {result:,.0f} | {claim + result:,.0f} "
                f"| {claim_us:,.1f} | {result_us:,.1f} |"
            )
    finally:
        drop_database(servers, name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
