"""The workload of ``tenantq demo``, planned up front from a seed.

Tenants get Zipf-like volumes (weight ``1 / rank ** 1.1``): rank 1 is the *hot* tenant (about
a quarter of all jobs), the next tenth of the ranks are *heavy*, the rest *light*. Each job's
type, simulated work and injected failures come from the same seeded generator, so a seed
always yields the same workload and the demo knows, before anything runs, which jobs must end
dead (the permanent failures and the one poison job).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

ZIPF_EXPONENT = 1.1
HOT, HEAVY, LIGHT = "hot", "heavy", "light"
TENANT_CLASSES = (HOT, HEAVY, LIGHT)
#: Share of jobs whose first attempts time out / are throttled.
TIMEOUT_SHARE = 0.06
THROTTLE_SHARE = 0.05
#: Permanent failures: about 0.3% of jobs, at least two.
PERMANENT_SHARE = 0.003
#: The poison job's leases before it is dead (each one crashes a worker process).
POISON_MAX_ATTEMPTS = 3
#: job type -> (share of jobs, simulated work range in milliseconds)
JOB_MIX = {
    "email": (0.55, (3.0, 15.0)),
    "webhook": (0.35, (5.0, 30.0)),
    "export": (0.10, (40.0, 120.0)),
}
PERMANENT_REASONS = {
    "email": "550 5.1.1 mailbox does not exist",
    "webhook": "HTTP 410 Gone: endpoint removed by the customer",
    "export": "export template was deleted",
}
_NAMES = (
    "acme globex initech umbrella hooli stark wayne wonka soylent tyrell cyberdyne aperture "
    "vandelay pied-piper monarch oscorp nakatomi gringotts dunder massive-dynamic"
).split()


@dataclass(frozen=True)
class PlannedJob:
    """One job of the workload, with the outcome it must reach."""

    seq: int
    job_type: str
    tenant: str
    tenant_class: str
    payload: dict[str, object]
    max_attempts: int | None
    expected_state: str  # succeeded or dead
    expected_error_class: str | None


@dataclass(frozen=True)
class Workload:
    """The planned jobs and the tenants' classes."""

    jobs: list[PlannedJob]
    tenant_classes: dict[str, str]

    @property
    def expected_dead(self) -> list[PlannedJob]:
        return [job for job in self.jobs if job.expected_state == "dead"]

    def counts(self) -> Counter[str]:
        """Planned jobs by kind of failure injected (for the summary)."""
        kinds: Counter[str] = Counter()
        for job in self.jobs:
            payload = job.payload
            if payload.get("poison"):
                kinds["poison"] += 1
            elif payload.get("permanent"):
                kinds["permanent"] += 1
            if payload.get("timeouts"):
                kinds["timeouts"] += 1
            if payload.get("throttles"):
                kinds["throttles"] += 1
        return kinds


def tenant_names(count: int) -> list[str]:
    """Readable, distinct tenant ids: ``acme``, ..., then ``acme-2``, ..."""
    return [
        _NAMES[index % len(_NAMES)]
        + (f"-{index // len(_NAMES) + 1}" if index >= len(_NAMES) else "")
        for index in range(count)
    ]


def classify_tenants(names: list[str]) -> dict[str, str]:
    """Rank 1 is hot, the next ``max(1, n // 10)`` ranks are heavy, the rest light."""
    heavy = max(1, len(names) // 10)
    return {
        name: HOT if rank == 0 else HEAVY if rank <= heavy else LIGHT
        for rank, name in enumerate(names)
    }


def plan_workload(jobs: int, tenants: int, seed: int) -> Workload:
    """``jobs`` jobs over ``tenants`` tenants, reproducible from ``seed``."""
    if jobs < 10:
        raise ValueError("the demo needs at least 10 jobs")
    if tenants < 3:
        raise ValueError("the demo needs at least 3 tenants")
    rng = random.Random(seed)
    names = tenant_names(tenants)
    classes = classify_tenants(names)
    weights = [1.0 / (rank + 1) ** ZIPF_EXPONENT for rank in range(tenants)]
    owners = rng.choices(names, weights=weights, k=jobs)
    types = list(JOB_MIX)
    kinds = rng.choices(types, weights=[JOB_MIX[t][0] for t in types], k=jobs)
    # Exact counts of the jobs that must die, at positions spread over the run; the poison
    # sits in the middle of a light tenant's traffic, so the crashes happen under load.
    permanent_count = max(2, round(jobs * PERMANENT_SHARE))
    light = [i for i in range(jobs) if classes[owners[i]] == LIGHT]
    middle = sorted(light, key=lambda i: abs(i - jobs * 0.4))
    poison_seq = middle[0] if middle else jobs // 2
    candidates = [i for i in range(jobs) if i != poison_seq]
    permanent = set(rng.sample(candidates, permanent_count))
    planned = []
    for seq in range(jobs):
        job_type = kinds[seq]
        low, high = JOB_MIX[job_type][1]
        payload: dict[str, object] = {
            "seq": seq,
            "target": _target(job_type, owners[seq], seq),
            "work_ms": round(rng.uniform(low, high), 1),
        }
        if rng.random() < TIMEOUT_SHARE:
            payload["timeouts"] = rng.choice((1, 1, 2))
        if rng.random() < THROTTLE_SHARE:
            payload["throttles"] = 1
            payload["retry_after"] = rng.choice((1.0, 2.0, 2.5))
        max_attempts = None
        state, error_class = "succeeded", None
        if seq == poison_seq:
            payload = {"seq": seq, "target": payload["target"], "work_ms": 0.0, "poison": True}
            max_attempts = POISON_MAX_ATTEMPTS
            state, error_class = "dead", "ProcessCrashed"
        elif seq in permanent:
            payload["permanent"] = PERMANENT_REASONS[job_type]
            state, error_class = "dead", "tenantq.errors.PermanentError"
        tenant = owners[seq]
        planned.append(
            PlannedJob(
                seq, job_type, tenant, classes[tenant], payload, max_attempts, state, error_class
            )
        )
    return Workload(planned, classes)


def _target(job_type: str, tenant: str, seq: int) -> str:
    if job_type == "email":
        return f"user{seq}@{tenant}.example"
    if job_type == "webhook":
        return f"https://hooks.{tenant}.example/events"
    return f"{tenant}/reports/{seq}.csv"
