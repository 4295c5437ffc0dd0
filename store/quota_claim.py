"""The claim of a batch with jobs of limited tenants, in one statement: ``JOB_CLAIM_BATCH``
with the tenants' limits applied where the leases are taken, so that they hold across every
worker of the fleet at once.

The limits of a job (tenant, queue, job type) are every row of ``tenantq_tenants`` of its
tenant whose queue and job type match it ('*' matches any) and caps or paces it, the
tenant-wide row taking the settings' defaults for what it leaves unset (a tenant without one
has the defaults as its row).

Caps and rates are exact. Each scope with one has a row in ``tenantq_tenant_usage``, which the
claim upserts first, in one fixed order (tenant, queue, job type; two claims never deadlock),
each under its row lock: a claim that waited for another's lock computes from the row that
claim left, never from what its own snapshot saw. Per scope it lets start:

- ``max_running``: the cap, less what runs: ``running_bound``, or a count of the scope's live
  leases (leased with ``lease_until`` ahead, whoever holds them: a dead worker's leases
  count until they are released or expire);
- ``rate`` and ``burst``: GCRA, ``burst`` less the starts still owed at ``rate`` by the
  scope's theoretical arrival time ``rate_tat``.

``running_bound`` is never below what runs: every start the claim lets through raises it, and
nothing else lowers it than a count. A change of the tenant's rows drops it (the next claim
counts): jobs started while the tenant had no cap took the plain claim, which raises none. The
count is made only where the bound leaves less room than the batch wants (or there is no bound
yet), so a tenant far from its cap costs no count. A count reads the statement's snapshot,
taken before the row lock was granted: it is trusted only if no claim wrote the row in between
(``claims`` unchanged), else the bound stands and the jobs it leaves out are asked for again
shortly. A tenant under its cap thus costs one row update per claim; one at its cap, a count
more. The row a claim writes is computed once, from the row as its snapshot has it; under the
lock it is written as computed when no claim wrote the row since (``claims`` unchanged), and
computed again from the row as the lock found it otherwise. The locks are held to the end of
the claim:
the claims of one capped or paced tenant take turns across the fleet (each waits for the one
before it to commit).

Shares by weight are not applied here: they are proportions, not limits, decided by each
worker before it claims (``tenantq.quotas.shares``).

A batch's demand keys (tenant, queue, job type) share a limit's grant in the order of the
keys, and a job starts if every limit of its key lets it (its place among the key's jobs is
within the least of them). A cap or rate that granted more than its keys could take is
charged all the same (its bound and rate run ahead, never behind). A job left out is not
touched (no row, no attempt spent): it comes back with the limit that held it most and when to
ask again (``retry_after``): until its next start is due for a rate, ``running_retry_seconds``
for a cap (the worker asks sooner when a job of the tenant ends on it).

Every time is the statement's own (``statement_timestamp()``), never ``now()``: a rate's time
set from a transaction's start would let the next claim start early.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from tenantq.store.binary_arrays import BigintArray, TextArray
from tenantq.store.statements import _CLAIM_INPUT, _CLAIM_LEASE
from tenantq.tenant_limits import ThrottleReason

if TYPE_CHECKING:
    from tenantq.store.job_store import ClaimRequest

#: The batch's arrays of the limited claim: per job, its demand key (``demand_*``, 1-based;
#: NULL for a job of a tenant without limits) and its place among that key's jobs.
_LIMITED_INPUT = _CLAIM_INPUT.format(
    arrays=", %(demand_nos)b::int[], %(demand_ranks)b::int[]",
    columns=", demand_no, demand_rank",
)

_DEMAND = """,
clock AS MATERIALIZED (SELECT statement_timestamp() AS now),
-- The batch's (tenant, queue, job type) of limited tenants, and how many jobs each has.
demand AS (
    SELECT *
    FROM unnest(%(demand_tenants)b::text[], %(demand_queues)b::text[],
                %(demand_job_types)b::text[], %(demand_counts)b::int[])
        WITH ORDINALITY AS d(tenant_id, queue, job_type, wanted, demand_no)
),
-- Its limited tenants, and how many jobs each has in all.
tenants_wanting AS (
    SELECT tenant_id, sum(wanted)::int AS wanted FROM demand GROUP BY tenant_id
),
-- The rows of the batch's limited tenants, by the index's leading columns (one scan for all
-- the tenants, rather than one per tenant).
tenant_rows AS MATERIALIZED (
    SELECT x.tenant_id, x.queue, x.job_type, x.max_running, x.rate, x.burst
    FROM tenantq_tenants x
    WHERE x.deployment = %(deployment)b AND x.tenant_id = ANY(%(demand_tenants)b::text[])
),"""

_CAPS_AND_RATES = """
-- Caps and rates, each with the jobs of the batch it covers: the tenant-wide row (its unset
-- limits, or all of them without a row, are the defaults), covering all the tenant's jobs, and
-- the narrower rows, covering those of their queue or job type. Summed per tenant by a hash:
-- a GROUP BY of the limits sorted every scope on six columns, text in the database's
-- collation among them.
wanting AS (
    SELECT * FROM (
        SELECT t.tenant_id, '*'::text AS queue, '*'::text AS job_type,
               coalesce(r.max_running, %(default_max_running)b::int) AS max_running,
               coalesce(r.rate, %(default_rate)b::float8) AS rate,
               CASE WHEN r.rate IS NOT NULL THEN coalesce(r.burst, 1)
                    ELSE coalesce(%(default_burst)b::int, 1) END AS burst,
               t.wanted
        FROM tenants_wanting t
        LEFT JOIN tenant_rows r
          ON r.tenant_id = t.tenant_id AND r.queue = '*' AND r.job_type = '*'
        UNION ALL
        SELECT r.tenant_id, r.queue, r.job_type, r.max_running, r.rate, coalesce(r.burst, 1),
               (SELECT sum(d.wanted)::int FROM demand d
                WHERE d.tenant_id = r.tenant_id AND r.queue IN ('*', d.queue)
                  AND r.job_type IN ('*', d.job_type))
        FROM tenant_rows r
        WHERE r.queue <> '*' OR r.job_type <> '*'
    ) AS l
    -- A narrower row none of the batch's jobs fall under is not charged.
    WHERE (l.max_running IS NOT NULL OR l.rate IS NOT NULL) AND l.wanted IS NOT NULL
),
-- The usage rows of the batch's tenants in its queues and every queue, by the index's
-- leading columns (one scan for all of them, rather than one per scope).
usage_rows AS MATERIALIZED (
    SELECT x.queue, x.tenant_id, x.job_type, x.claims, x.rate, x.burst, x.running_bound,
           x.rate_tat, x.throttled_at, x.throttled_reason
    FROM tenantq_tenant_usage x
    WHERE x.deployment = %(deployment)b
      AND x.queue = ANY(%(demand_queues)b::text[] || '*'::text)
      AND x.tenant_id = ANY(%(demand_tenants)b::text[])
),
-- Each cap's and rate's row as this statement's snapshot has it (read without a lock), and
-- the live leases counted where its bound leaves less room than wanted.
-- Materialized: inlined, the count was planned once per reference to it in the upsert's
-- expressions, and ran up to eight times per scope near a cap.
proposed AS MATERIALIZED (
    SELECT w.*, coalesce(u.claims, 0) + 1 AS claims, u.rate AS was_rate, u.burst AS was_burst,
           u.running_bound AS was_running_bound, u.rate_tat AS was_rate_tat,
           u.throttled_at AS was_throttled_at, u.throttled_reason AS was_throttled_reason,
           CASE WHEN w.max_running IS NOT NULL
                     AND (u.running_bound IS NULL OR u.running_bound + w.wanted > w.max_running)
           THEN (
               -- Up to the cap, in the leased index's order: a plain index scan, which marks
               -- the entries of leases ended since as dead for the next count.
               SELECT count(*) FROM (
                   SELECT 1 FROM tenantq_jobs j
                   WHERE j.deployment = %(deployment)b AND j.tenant_id = w.tenant_id
                     AND j.state = 'leased' AND j.lease_until > c.now
                     AND (w.queue = '*' OR j.queue = w.queue)
                     AND (w.job_type = '*' OR j.job_type = w.job_type)
                   ORDER BY j.tenant_id, j.lease_owner
                   LIMIT w.max_running) AS live)
           END AS counted
    FROM wanting w
    CROSS JOIN clock c
    LEFT JOIN usage_rows u
      ON u.queue = w.queue AND u.tenant_id = w.tenant_id AND u.job_type = w.job_type
),"""

_USAGE_COLUMNS = (
    "claims",
    "wanted",
    "granted",
    "max_running",
    "rate",
    "burst",
    "running_bound",
    "counted",
    "rate_tat",
    "throttled_at",
    "throttled_reason",
    "updated_at",
)

_NOW = "statement_timestamp()"

#: A scope's usage row after this claim, from its inputs (``{given}``: the wanting row with
#: its limits and count) and what the row was (``{was_*}``; NULL for a new row;
#: ``{trusted_count}``: the count, or NULL where it may miss leases). Written once, in stages
#: (each names the ones before it): a stage's value is used several times after it.
_STAGE_RUNNING_AND_TIME = {
    "running_now": "least({was_running_bound}, {trusted_count})",
    # A rate or burst changed since the last claim: a time owed further ahead than a full
    # burst of the new one (left by a slower rate) is brought back to one. Never otherwise:
    # this claim's clock may be older than the claim that set the time (it waited for the
    # lock), and bringing the time back by its clock would hand out starts twice.
    "tat_before": (
        "CASE WHEN {was_rate_tat} IS NOT NULL AND ({was_rate} IS DISTINCT FROM {given}.rate"
        " OR {was_burst} IS DISTINCT FROM {given}.burst)"
        f" THEN least({{was_rate_tat}}, {_NOW} + make_interval(secs => {{given}}.burst"
        " / {given}.rate)) ELSE {was_rate_tat} END"
    ),
}
_STAGE_ROOM = {
    "cap_room": (
        "CASE WHEN {given}.max_running IS NOT NULL THEN greatest({given}.max_running"
        " - coalesce({running_now}, {given}.max_running), 0) END"
    ),
    "rate_room": (
        "CASE WHEN {given}.rate IS NOT NULL THEN floor({given}.burst - least(coalesce("
        f"greatest(extract(epoch FROM {{tat_before}} - {_NOW})::float8, 0), 0)"
        " * {given}.rate, {given}.burst) + 1e-9) END"
    ),
}
_STAGE_GRANT = {"granted": "least({given}.wanted, {cap_room}, {rate_room})::int"}
_STAGE_ROW = {
    "claims": "{claims_after}",
    "wanted": "{given}.wanted",
    "granted": "{granted}",
    "max_running": "{given}.max_running",
    "rate": "{given}.rate",
    "burst": "{given}.burst",
    "running_bound": (
        "CASE WHEN {given}.max_running IS NOT NULL THEN {running_now} + {granted} END"
    ),
    "counted": "{given}.counted",
    "rate_tat": (
        f"CASE WHEN {{given}}.rate IS NOT NULL THEN greatest({{tat_before}}, {_NOW})"
        " + make_interval(secs => {granted} / {given}.rate) END"
    ),
    "throttled_at": (
        f"CASE WHEN {{granted}} < {{given}}.wanted THEN {_NOW} ELSE {{was_throttled_at}} END"
    ),
    "throttled_reason": (
        "CASE WHEN {granted} < {given}.wanted THEN CASE WHEN ({cap_room})"
        " <= coalesce({rate_room}, {cap_room}) THEN 'max_running' ELSE 'rate' END"
        " ELSE {was_throttled_reason} END"
    ),
    "updated_at": _NOW,
}
_STAGES = (_STAGE_RUNNING_AND_TIME, _STAGE_ROOM, _STAGE_GRANT)


def _usage_inline(names: dict[str, str]) -> list[str]:
    """The row's expressions (``_USAGE_COLUMNS`` order) with each stage written out where it
    is used: for the row under its lock, where no stage can be computed ahead."""
    names = dict(names)
    for stage in _STAGES:
        names.update({name: f"({formula.format(**names)})" for name, formula in stage.items()})
    return [_STAGE_ROW[column].format(**names) for column in _USAGE_COLUMNS]


def _usage_staged(source: str, names: dict[str, str]) -> tuple[str, str]:
    """The row's expressions over ``source``, whose rows each stage is computed from once (a
    subquery per stage over the one before it, every name under the alias ``s``): the select
    list, and its FROM."""
    relation = source
    for stage in _STAGES:
        columns = ", ".join(
            f"{formula.format(**names)} AS {name}" for name, formula in stage.items()
        )
        # OFFSET 0: kept a subquery rather than folded into the one above it, which would
        # write the stage out again at each of its uses.
        relation = f"(SELECT s.*, {columns} FROM {relation} s OFFSET 0)"  # noqa: S608
        names = {**names, **{name: f"s.{name}" for name in stage}}
    select = ",\n           ".join(_STAGE_ROW[column].format(**names) for column in _USAGE_COLUMNS)
    return select, f"{relation} s"


#: The row as this statement's snapshot has it (``proposed``; NULL where it had none). The
#: count is trusted: it read that same snapshot.
_SNAPSHOT_ROW = {
    "given": "s",
    "claims_after": "s.claims",
    "was_rate": "s.was_rate",
    "was_burst": "s.was_burst",
    "was_running_bound": "s.was_running_bound",
    "trusted_count": "s.counted",
    "was_rate_tat": "s.was_rate_tat",
    "was_throttled_at": "s.was_throttled_at",
    "was_throttled_reason": "s.was_throttled_reason",
}

#: The row under its lock, where a claim wrote it since this statement's snapshot was taken
#: (``excluded.claims``, the claims the snapshot saw plus one, is not the row's plus one): the
#: count, which read that snapshot, may miss the leases of that claim, and is not trusted.
_LOCKED_ROW = {
    "given": "excluded",
    "claims_after": "u.claims + 1",
    "was_rate": "u.rate",
    "was_burst": "u.burst",
    "was_running_bound": "u.running_bound",
    "trusted_count": "NULL::int",
    "was_rate_tat": "u.rate_tat",
    "was_throttled_at": "u.throttled_at",
    "was_throttled_reason": "u.throttled_reason",
}

_SNAPSHOT_SELECT, _SNAPSHOT_FROM = _usage_staged("proposed", _SNAPSHOT_ROW)

#: Columns whose value under the lock is the one computed from the snapshot whatever the row
#: was: the claim's inputs, its clock and the claims (one more than the row's either way).
_SAME_EITHER_WAY = frozenset(
    {"claims", "wanted", "max_running", "rate", "burst", "counted", "updated_at"}
)

_UPSERT = """
usage AS (
    INSERT INTO tenantq_tenant_usage AS u (deployment, queue, tenant_id, job_type, """

#: Each scope's row is computed from the snapshot's (``_SNAPSHOT_ROW``), and inserted as that
#: where there is none. Where there is one, under its lock: if no claim wrote it since the
#: snapshot (``claims`` as the snapshot saw it), it is the row computed, else it is computed
#: again from the row as the lock found it. A claim that did not wait for another thus
#: computes each scope's row once, not twice (the insert's and the update's).
_CHARGE = (
    _UPSERT  # noqa: S608 (constant parts, no input)
    + ", ".join(_USAGE_COLUMNS)
    + """)
    SELECT %(deployment)b, s.queue, s.tenant_id, s.job_type,
           """
    + _SNAPSHOT_SELECT
    + """
    FROM """
    + _SNAPSHOT_FROM
    + """
    -- One order for every claim: rows are locked as they are upserted.
    ORDER BY s.tenant_id COLLATE "C", s.queue COLLATE "C", s.job_type COLLATE "C"
    ON CONFLICT (deployment, queue, tenant_id, job_type) DO UPDATE SET
        """
    + ",\n        ".join(
        f"{column} = {expression}"
        if column in _SAME_EITHER_WAY
        else f"{column} = CASE WHEN u.claims + 1 = excluded.claims THEN excluded.{column}"
        f" ELSE {expression} END"
        for column, expression in zip(_USAGE_COLUMNS, _usage_inline(_LOCKED_ROW), strict=True)
    )
    + """
    RETURNING u.queue, u.tenant_id, u.job_type, u.wanted, u.granted, u.throttled_reason,
              u.rate, u.burst, u.rate_tat
),"""
)

_GRANTS = """
-- What each cap or rate lets each demand key it covers start: its grant (its row under its
-- lock), less what the keys before it take.
portions AS (
    SELECT d.demand_no, l.throttled_reason AS reason, l.rate, l.burst, l.rate_tat,
           greatest(l.granted - (sum(d.wanted) OVER (
               PARTITION BY l.queue COLLATE "C", l.tenant_id COLLATE "C",
                            l.job_type COLLATE "C"
               ORDER BY d.demand_no) - d.wanted), 0) AS room_left
    FROM usage l
    JOIN demand d
      ON d.tenant_id = l.tenant_id AND l.queue IN ('*', d.queue)
     AND l.job_type IN ('*', d.job_type)
),
allowed AS (
    SELECT d.demand_no, d.wanted, least(d.wanted, min(p.room_left))::int AS admit
    FROM demand d LEFT JOIN portions p USING (demand_no)
    GROUP BY d.demand_no, d.wanted
),
admits AS MATERIALIZED (
    SELECT array_agg(admit ORDER BY demand_no) AS admit FROM allowed
),
-- Every cap and rate let start all it was asked for (the usual case, far from the limits):
-- every job is let through, and what each limit leaves each demand key (``portions`` and
-- after) is never computed (a subquery runs at its first use, and OR stops at a true).
everything_granted AS MATERIALIZED (
    SELECT coalesce(bool_and(granted = wanted), true) AS granted FROM usage
),
admitted AS (
    SELECT * FROM incoming i
    WHERE i.demand_no IS NULL OR (SELECT granted FROM everything_granted)
       OR i.demand_rank <= (SELECT admit FROM admits)[i.demand_no]
),
leased AS ("""

_ANSWER = """
-- How long each held-back demand key waits: the longest of the limits that hold it back.
waits AS (
    SELECT a.demand_no, a.admit,
           (array_agg(p.reason ORDER BY p.room_left, p.reason))[1] AS reason,
           max(CASE p.reason
                   WHEN 'rate' THEN greatest(extract(epoch FROM p.rate_tat - c.now)::float8
                                             - (p.burst - 1) / p.rate, 0)
                   ELSE %(running_retry_seconds)b::float8 END) AS retry_after
    FROM allowed a
    CROSS JOIN clock c
    JOIN portions p ON p.demand_no = a.demand_no AND p.room_left < a.wanted
    WHERE a.admit < a.wanted
    GROUP BY a.demand_no, a.admit
)
SELECT id, attempts, max_attempts, progress, replays, inserted, lease_until, claimed_at,
       NULL::text AS reason, NULL::float8 AS retry_after
FROM leased
UNION ALL
SELECT g.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, w.reason, w.retry_after
FROM given g
JOIN waits w ON w.demand_no = g.demand_no AND g.demand_rank > w.admit
WHERE NOT (SELECT granted FROM everything_granted)
"""

#: ``JOB_CLAIM_BATCH`` of a batch with jobs of limited tenants, their limits applied (see the
#: module docstring). Rows of leases as ``JOB_CLAIM_BATCH`` returns them, then a row per job
#: left waiting: its id, the limit that held it (``reason``) and ``retry_after`` seconds, the
#: rest NULL.
JOB_CLAIM_BATCH_LIMITED = (
    "WITH"
    + _LIMITED_INPUT
    + _DEMAND
    + _CAPS_AND_RATES
    + _CHARGE
    + _GRANTS
    + _CLAIM_LEASE.format(rows="admitted")
    + "\n),"
    + _ANSWER
)


@dataclass(frozen=True, slots=True)
class ClaimQuotas:
    """What a claim needs to apply the caps and rates (``JOB_CLAIM_BATCH_LIMITED``'s
    parameters): the tenants they apply to (the worker's copy of the table says which: every
    tenant with a row that caps or paces it, every tenant when the defaults do), and the
    settings' ``tenant_defaults``."""

    limited_tenants: frozenset[str] | set[str]
    default_max_running: int | None = None
    default_rate: float | None = None
    default_burst: int | None = None
    #: When to ask again for a job left waiting by a cap.
    running_retry_seconds: float = 0.25

    def parameters(self, requests: Sequence[ClaimRequest]) -> dict[str, Any]:
        """The statement's parameters for the batch ``requests`` (the job rows' own arrays
        aside): each job of a limited tenant numbered by its demand key (tenant, queue, job
        type), in the order the keys first appear, with its place among that key's jobs; and
        the keys with their counts."""
        limited = self.limited_tenants
        keys: dict[tuple[str, str, str], int] = {}
        counts: list[int] = []
        numbers: list[int | None] = []
        ranks: list[int | None] = []
        # Once per job of every limited claim: each step counts (a third of the loop's time
        # went to reading each field twice and to counting before reading the count back).
        for request in requests:
            tenant = request.tenant_id
            if tenant not in limited:
                numbers.append(None)
                ranks.append(None)
                continue
            key = (tenant, request.queue, request.job_type)
            number = keys.get(key)
            if number is None:
                keys[key] = number = len(keys) + 1
                counts.append(1)
                rank = 1
            else:
                rank = counts[number - 1] = counts[number - 1] + 1
            numbers.append(number)
            ranks.append(rank)
        return {
            "demand_nos": BigintArray(numbers),
            "demand_ranks": BigintArray(ranks),
            "demand_tenants": TextArray([tenant for tenant, _, _ in keys]),
            "demand_queues": TextArray([queue for _, queue, _ in keys]),
            "demand_job_types": TextArray([job_type for _, _, job_type in keys]),
            "demand_counts": BigintArray(counts),
            "default_max_running": self.default_max_running,
            "default_rate": self.default_rate,
            "default_burst": self.default_burst,
            "running_retry_seconds": float(self.running_retry_seconds),
        }


class Throttle(NamedTuple):
    """A job the claim left waiting: the limit that held it, and when to ask again
    (seconds)."""

    reason: ThrottleReason
    retry_after: float
