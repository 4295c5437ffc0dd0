"""The hot-path SQL of tenantq, as named statements (noun first).

Every state change is one guarded statement: the WHERE clause states which transitions of
``tenantq.states.TRANSITIONS`` it performs, and results are fenced by (job id, attempt, lease
owner). Batches travel as arrays through ``unnest`` so one round trip serves a whole poll batch.
All times come from the database clock (``now()``), never a worker's clock.

Every statement is scoped to one deployment (``%(deployment)s``, the topic prefix the store
was opened with, ``tenantq.store.engine.DeploymentConnection``): it reads and changes that
deployment's rows only. A job id is unique across deployments, so a message of this
deployment that carries another's job id finds that row and leaves it as it is: the claim
does not take it, and ``JOB_STATE_BATCH`` reports it as another deployment's (a conflict).
"""

from __future__ import annotations

#: The deployment's rows of a batch's jobs (``ids``) as two sets, so that a statement never
#: waits for a row lock: ``free``, the rows this statement now holds, and ``locked``, the rows
#: that exist but another transaction holds. Both are found by primary key and ``NOT IN`` a
#: set is a hash, so the plan stays linear in the batch: a semi-join to ``free`` is planned
#: as a nested loop over the batch, and an ``EXISTS`` beside an ``OR`` as a hash of the whole
#: table's keys. Another deployment's row is in neither (nor locked here).
_LOCKED_ROWS = """free AS (
    SELECT x.id FROM tenantq_jobs x
    WHERE x.id = ANY(%(ids)b::uuid[]) AND x.deployment = %(deployment)b
    FOR NO KEY UPDATE SKIP LOCKED
),
locked AS (
    SELECT x.id FROM tenantq_jobs x
    WHERE x.id = ANY(%(ids)b::uuid[]) AND x.deployment = %(deployment)b
      AND x.id NOT IN (SELECT id FROM free)
)"""

#: The batch's rows (``given``), the rows another transaction holds (``_LOCKED_ROWS``), and
#: those of the batch the claim may insert or take (``incoming``); ``{arrays}`` and
#: ``{columns}``: more arrays of the batch, after the job's own.
_CLAIM_GIVEN = """
given AS (
    SELECT *
    FROM unnest(
        %(ids)b::uuid[], %(queues)b::text[], %(job_types)b::text[], %(tenant_ids)b::text[],
        %(partition_keys)b::text[], %(payloads)b::bytea[], %(payload_hashes)b::bytea[],
        %(max_attempts)b::int[], %(idempotency_keys)b::text[], %(origin_topics)b::text[],
        %(origin_partitions)b::int[], %(origin_offsets)b::bigint[],
        %(enqueued_ats)b::timestamptz[]{arrays}
    ) WITH ORDINALITY AS t(id, queue, job_type, tenant_id, partition_key, payload,
           payload_sha256, max_attempts, idempotency_key, origin_topic, origin_partition,
           origin_offset, enqueued_at{columns}, position)
),
"""
_CLAIM_INCOMING = """,
incoming AS (
    SELECT * FROM given g
    WHERE g.id NOT IN (SELECT id FROM locked)
      AND (g.idempotency_key IS NULL OR (
        -- An earlier job of this batch has the key: the first one is the job.
        NOT EXISTS (
            SELECT 1 FROM given earlier
            WHERE earlier.queue = g.queue AND earlier.idempotency_key = g.idempotency_key
              AND earlier.position < g.position AND earlier.id <> g.id
        )
        -- A different job already owns this idempotency key: not ours to insert.
        AND NOT EXISTS (
            SELECT 1 FROM tenantq_jobs other
            WHERE other.deployment = %(deployment)b AND other.queue = g.queue
              AND other.idempotency_key = g.idempotency_key AND other.id <> g.id
        )
    ))
)"""
_CLAIM_INPUT = _CLAIM_GIVEN + _LOCKED_ROWS + _CLAIM_INCOMING  # noqa: S608 (constant parts)

#: The lease itself, of the rows of ``{rows}``: inserted on first sight, or taken where the
#: job is leasable (see ``JOB_CLAIM_BATCH``).
_CLAIM_LEASE = """
INSERT INTO tenantq_jobs AS j (
    id, deployment, queue, job_type, tenant_id, partition_key, state, payload, payload_sha256,
    attempts, max_attempts, run_after, lease_owner, lease_until, heartbeat_at, idempotency_key,
    origin_topic, origin_partition, origin_offset, enqueued_at, started_at
)
SELECT id, %(deployment)b, queue, job_type, tenant_id, partition_key, 'leased', payload,
       payload_sha256, 1,
       max_attempts, now(), %(owner)b, now() + make_interval(secs => %(lease_seconds)b), now(),
       idempotency_key, origin_topic, origin_partition, origin_offset, enqueued_at, now()
FROM {rows}
ON CONFLICT (id) DO UPDATE SET
    state = 'leased',
    attempts = CASE WHEN j.state = 'leased' AND j.lease_owner = %(owner)b
                    THEN j.attempts ELSE j.attempts + 1 END,
    -- A scheduled job's pending row was written by its producer, which may not know the job
    -- type's max_attempts: the worker's value wins at the first lease.
    max_attempts = CASE WHEN j.state = 'pending' AND j.attempts = 0
                        THEN excluded.max_attempts ELSE j.max_attempts END,
    lease_owner = %(owner)b,
    lease_until = now() + make_interval(secs => %(lease_seconds)b),
    heartbeat_at = now(),
    started_at = coalesce(j.started_at, now()),
    updated_at = now()
WHERE j.deployment = %(deployment)b
  AND j.payload_sha256 IS NOT DISTINCT FROM excluded.payload_sha256
  AND (
        (j.state = 'leased' AND j.lease_owner = %(owner)b AND j.id = ANY(%(adoptable)b::uuid[]))
     OR (j.attempts < j.max_attempts
         AND j.crashes < %(crash_budget)b
         AND NOT j.cancel_requested
         AND (
               (j.state IN ('pending', 'runnable', 'retrying') AND j.run_after <= now())
            OR (j.state = 'leased' AND j.lease_owner <> %(owner)b AND (
                   j.lease_until < now()
                OR NOT EXISTS (
                     SELECT 1 FROM tenantq_workers w
                     WHERE w.deployment = %(deployment)b AND w.id = j.lease_owner
                       AND w.stopped_at IS NULL
                       AND w.heartbeat_at > now() - make_interval(secs => %(stale_owner_seconds)b)
                   )))
        ))
  )
RETURNING j.id, j.attempts, j.max_attempts, j.progress, j.replays,
          (xmax = 0) AS inserted, j.lease_until, now() AS claimed_at"""

#: Claim every job of a poll batch in one statement: insert the row on first sight (leased,
#: attempt 1), or take the lease where the job is leasable and due, or leased by an owner whose
#: lease expired or whose heartbeat went stale. Attempts are incremented here, at lease time, so
#: a handler that kills its process still moves its job toward dead. The payload hash must
#: match: the same job id with another payload is a conflict, never a takeover. A job that was
#: running in ``crash_budget`` process deaths is not leased (the worker buries it).
#:
#: Two new jobs of one batch with one idempotency key: only the first (by position) is
#: inserted, so the unique key is never violated by the batch itself. ``adoptable`` names jobs
#: this owner may hold already because an earlier try of this very claim committed before the
#: connection dropped: their lease is returned as it is, without another attempt. A job id of
#: another deployment is never updated (its row is left, and the job not leased).
#:
#: It never waits for a row lock (``_LOCKED_ROWS``): a job whose row another transaction
#: holds (an operator's ``SELECT ... FOR UPDATE``, a takeover being written) is not claimed,
#: and ``JOB_STATE_BATCH`` reports it locked. Waiting, one locked row held the whole batch,
#: and the claims lane behind it, for as long as the lock was held (a minute, seen).
JOB_CLAIM_BATCH = (
    "WITH"
    + _CLAIM_INPUT.format(arrays="", columns="")
    + _CLAIM_LEASE.format(rows="incoming")
    + "\n"
)

#: What became of the jobs the claim did not take (terminal, leased elsewhere, conflict, ...),
#: and whether another transaction holds the row (``locked``: the claim skipped it). A job id
#: of another deployment comes back with ``ours`` false and nothing else of its row.
JOB_STATE_BATCH = """
WITH free AS (
    SELECT x.id FROM tenantq_jobs x
    WHERE x.id = ANY(%(ids)b::uuid[]) AND x.deployment = %(deployment)b
    FOR NO KEY UPDATE SKIP LOCKED
)
SELECT x.id, j.state::text, j.lease_owner, j.lease_until, j.attempts, j.max_attempts,
       j.run_after <= now() AS due, j.cancel_requested, j.payload_sha256, j.last_error_class,
       j.last_error_message,
       GREATEST(0, EXTRACT(EPOCH FROM (j.lease_until - now())))::float8 AS lease_left_seconds,
       j.crashes, j.id NOT IN (SELECT id FROM free) AS locked, j.id IS NOT NULL AS ours
FROM tenantq_jobs x
LEFT JOIN tenantq_jobs j ON j.id = x.id AND j.deployment = %(deployment)b
WHERE x.id = ANY(%(ids)b::uuid[])
"""

#: A job found leasable with its attempts (or its crash budget) used up goes dead at lease
#: time, with the reason. The jobs are found by key: the deployment is compared with ``IS NOT
#: DISTINCT FROM`` (the same for a column that is never NULL), which no index serves, so a
#: generic plan cannot read a deployment's waiting or leased jobs through the indexes that
#: lead with it instead (it did, on a new table: see ``_RESULTS``).
JOB_BURY_EXHAUSTED = """
UPDATE tenantq_jobs
SET state = 'dead', finished_at = now(), updated_at = now(), lease_owner = NULL,
    lease_until = NULL,
    last_error_class = CASE WHEN attempts >= max_attempts THEN 'AttemptsExhausted'
                            ELSE 'PoisonJob' END,
    last_error_message = CASE
        WHEN attempts >= max_attempts
        THEN 'max attempts (' || max_attempts || ') reached; last error: '
             || coalesce(last_error_class || ': ' || last_error_message, 'none recorded')
        ELSE 'the process running it died ' || crashes || ' times (crash budget)' END
WHERE id = ANY(%(ids)b::uuid[]) AND deployment IS NOT DISTINCT FROM %(deployment)b
  AND (attempts >= max_attempts OR crashes >= %(crash_budget)b)
  AND (state IN ('pending', 'runnable', 'retrying')
       OR (state = 'leased' AND lease_until < now()))
RETURNING id
"""

#: Cancellation requested before any worker ran the job: it never runs. (The deployment as in
#: ``JOB_BURY_EXHAUSTED``.)
JOB_CANCEL_WAITING = """
UPDATE tenantq_jobs
SET state = 'canceled', finished_at = now(), updated_at = now()
WHERE id = ANY(%(ids)b::uuid[]) AND deployment IS NOT DISTINCT FROM %(deployment)b
  AND cancel_requested
  AND state IN ('pending', 'runnable', 'retrying')
RETURNING id
"""

#: The parts of ``JOB_COMPLETE_BATCH`` that ``JOB_COMPLETE_BATCH_AGAIN`` shares: the batch's
#: results as rows, the jobs whose row another transaction holds (``locked``), the fenced
#: update of the others, and their attempt rows (which the retry narrows further).
#:
#: The fence (owner, state) is written with ``IS NOT DISTINCT FROM``, which no index serves:
#: the rows can then only be found by primary key, one probe per result. With ``=`` the
#: planner may find them through the leased-state indexes instead, reading every lease of the
#: worker for each batch (a hash of 1,128 rows for 128 results), or, when its statistics
#: reckon few leases, once per result (quadratic). The worker runs these statements on one
#: generic plan (``JobStore.open``), which this keeps linear in the batch.
_RESULT_ROWS = """
    SELECT *
    FROM unnest(
        %(ids)b::uuid[], %(attempts)b::int[], %(outcomes)b::text[], %(states)b::job_state[],
        %(error_classes)b::text[], %(error_messages)b::text[], %(delays)b::float8[],
        %(give_backs)b::bool[], %(durations)b::int[], %(started_ats)b::timestamptz[]
    ) AS t(id, attempt, outcome, state, error_class, error_message, delay_seconds, give_back,
           duration_ms, started_at)"""
_RESULTS = "\nWITH results AS (" + _RESULT_ROWS + "\n),\n"
#: A result never waits for a row lock: one whose job another transaction holds (an
#: operator's ``SELECT ... FOR UPDATE``, a claim or a prune in flight) is set aside, written
#: nothing, and reported ``locked`` for the worker to write again later. Waiting, one locked
#: row held every result of the batch, and the results lane behind it, for as long as the
#: lock was held (a minute, seen).
_LOCKED = _LOCKED_ROWS + ",\n"
_APPLIED = """applied AS (
    UPDATE tenantq_jobs j
    SET state = r.state,
        attempts = j.attempts - CASE WHEN r.give_back THEN 1 ELSE 0 END,
        lease_owner = NULL,
        lease_until = NULL,
        run_after = CASE WHEN r.delay_seconds IS NULL THEN j.run_after
                         ELSE now() + make_interval(secs => r.delay_seconds) END,
        finished_at = CASE WHEN r.state IN ('succeeded', 'dead', 'canceled') THEN now() END,
        last_error_class = CASE WHEN r.outcome = 'succeeded' THEN j.last_error_class
                                ELSE coalesce(r.error_class, j.last_error_class) END,
        last_error_message = CASE WHEN r.outcome = 'succeeded' THEN j.last_error_message
                                  ELSE coalesce(r.error_message, j.last_error_message) END,
        -- A success is recorded here, not as an attempt row (migration 0008).
        success_worker_id = CASE WHEN r.outcome = 'succeeded' THEN %(owner)b END,
        success_started_at = CASE WHEN r.outcome = 'succeeded' THEN r.started_at END,
        success_duration_ms = CASE WHEN r.outcome = 'succeeded' THEN r.duration_ms END,
        updated_at = now()
    FROM results r
    WHERE j.id = r.id AND j.deployment = %(deployment)b AND j.attempts = r.attempt
      AND j.lease_owner IS NOT DISTINCT FROM %(owner)b AND j.state IS NOT DISTINCT FROM 'leased'
      AND j.id NOT IN (SELECT id FROM locked)
    RETURNING j.id
),
"""
_ATTEMPT_ROWS = """attempt_rows AS (
    INSERT INTO tenantq_attempt_log (job_id, attempt, worker_id, outcome, error_class,
                                     error_message, started_at, duration_ms)
    SELECT r.id, r.attempt, %(owner)b,
           CASE WHEN r.id IN (SELECT id FROM applied) THEN r.outcome ELSE 'stale' END,
           r.error_class, r.error_message, r.started_at, r.duration_ms
    FROM results r
    -- An applied success is recorded on its job row (``_APPLIED``): no row here. A result
    -- set aside writes nothing. An applied result's job is locked by its update; a stale
    -- one's job by ``free`` (or it is gone), so retention cannot delete it under its new
    -- attempt row (there is no foreign key).
    WHERE r.id NOT IN (SELECT id FROM locked)
      AND CASE WHEN r.id IN (SELECT id FROM applied) THEN r.outcome <> 'succeeded'
               ELSE EXISTS (SELECT 1 FROM tenantq_jobs x
                            WHERE x.id = r.id AND x.deployment = %(deployment)b
                            FOR KEY SHARE) END
"""


def _complete_batch(results: str, locked: str) -> str:
    """The batch's rows (``results``) and those set aside (``locked``), then the writes."""
    return (
        results  # noqa: S608 (constant parts, no input)
        + locked
        + _APPLIED
        + _ATTEMPT_ROWS
        + """)
SELECT id, false AS locked FROM applied
UNION ALL SELECT id, true FROM locked
"""
    )


#: Write a batch of results in one statement, each fenced by (job id, attempt, owner), with
#: the attempt records in the same statement: a success on its job row (``success_*``), any
#: other outcome as a row of ``tenantq_attempt_log``. ``give_back`` returns the attempt
#: (shutdown, revoke, snooze: they never consume one). Results of stale attempts match no job
#: row: they are refused, recorded as 'stale' attempt rows. Returns (job id, locked): the
#: results applied, and those set aside because their job's row was locked (``_LOCKED``).
JOB_COMPLETE_BATCH = _complete_batch(_RESULTS, _LOCKED)

#: The results with a bound on every row lock wait of the statement: ``set_config`` (local
#: to the statement's transaction) runs once, as the filter of the batch's rows, before any
#: of them reaches a step that locks or updates a row.
_RESULTS_BOUNDED_WAIT = (
    "\nWITH results AS ("
    + _RESULT_ROWS
    + "\n    WHERE (SELECT set_config('lock_timeout', '50ms', true)) IS NOT NULL\n),\n"
)
#: Nothing set aside: a row lock is met with the bounded wait instead.
_NONE_LOCKED = "locked AS (SELECT NULL::uuid AS id WHERE false),\n"

#: ``JOB_COMPLETE_BATCH`` without locking the batch's rows first: a row another transaction
#: holds for longer than 50 ms fails the statement (``lock_not_available``), which writes
#: nothing, and the store runs ``JOB_COMPLETE_BATCH`` instead, which sets that job aside.
#: 50 ms outlasts most holds of a row by a statement of the worker's own (a heartbeat renewing
#: its leases, a claim; a batch written the careful way sets such rows aside too, to be
#: written again), and is far shorter than a results lane may stall. Locking every row first
#: (``_LOCKED``) writes a WAL record per row and took about a third of the statement's server
#: CPU, in every batch, for a lock seldom there.
JOB_COMPLETE_BATCH_BOUNDED_WAIT = _complete_batch(_RESULTS_BOUNDED_WAIT, _NONE_LOCKED)

_ALREADY = """already AS (
    SELECT r.id FROM results r
    JOIN tenantq_attempt_log a ON a.job_id = r.id AND a.attempt = r.attempt
     AND a.worker_id = %(owner)b AND a.outcome = r.outcome
    -- An attempt row belongs to its job's deployment.
    WHERE EXISTS (SELECT 1 FROM tenantq_jobs x WHERE x.id = r.id AND x.deployment = %(deployment)b)
    UNION
    -- A success is recorded on its job row.
    SELECT r.id FROM results r
    JOIN tenantq_jobs j ON j.id = r.id AND j.deployment = %(deployment)b
     AND j.attempts = r.attempt AND j.success_worker_id = %(owner)b
    WHERE r.outcome = 'succeeded'
),
"""

#: ``JOB_COMPLETE_BATCH`` once more, after the connection dropped while it ran: a result that
#: was applied then has its attempt row already (same job, attempt, owner and outcome), or, a
#: success, its record on the job row (same attempt, owner); it is reported as applied again
#: and not written twice.
JOB_COMPLETE_BATCH_AGAIN = (
    _RESULTS  # noqa: S608 (constant parts, no input)
    + _ALREADY
    + _LOCKED
    + _APPLIED
    + _ATTEMPT_ROWS
    + """      AND r.id NOT IN (SELECT id FROM already)
)
SELECT id, false AS locked FROM applied UNION SELECT id, false FROM already
UNION ALL SELECT id, true FROM locked WHERE id NOT IN (SELECT id FROM already)
"""
)

#: The process running these attempts died and nobody knows which of them killed it: each
#: job counts the crash (``crashes``), fenced like a result, and gets a ``crashed`` attempt
#: row; the attempt itself is not spent (the job runs again under the same lease).
JOB_CRASH_BATCH = """
WITH crashed AS (
    SELECT * FROM unnest(%(ids)b::uuid[], %(attempts)b::int[], %(started_ats)b::timestamptz[],
                         %(durations)b::int[])
        AS t(id, attempt, started_at, duration_ms)
),
counted AS (
    UPDATE tenantq_jobs j
    SET crashes = j.crashes + 1, updated_at = now()
    FROM crashed c
    WHERE j.id = c.id AND j.deployment = %(deployment)b AND j.attempts = c.attempt
      -- The fence by primary key only (see _RESULTS).
      AND j.lease_owner IS NOT DISTINCT FROM %(owner)b AND j.state IS NOT DISTINCT FROM 'leased'
    RETURNING j.id, j.crashes
),
attempt_rows AS (
    INSERT INTO tenantq_attempt_log (job_id, attempt, worker_id, outcome, error_class,
                                     error_message, started_at, duration_ms)
    SELECT c.id, c.attempt, %(owner)b, 'crashed', 'ProcessCrashed', %(reason)b, c.started_at,
           c.duration_ms
    FROM crashed c JOIN counted USING (id)
)
SELECT id, crashes FROM counted
"""

#: A worker process died (its supervisor saw it): it is stopped in the registry, so nothing
#: waits for its heartbeat, and every lease it held is free at once. The jobs it was running
#: count the crash and get their attempt back; a ``crashed`` attempt row says what happened.
WORKER_CRASHED = """
WITH stopped AS (
    UPDATE tenantq_workers SET stopped_at = now(), running_jobs = 0
    WHERE deployment = %(deployment)s AND id = %(id)s
),
released AS (
    UPDATE tenantq_jobs
    SET state = 'runnable', attempts = attempts - 1, crashes = crashes + 1,
        lease_owner = NULL, lease_until = NULL, updated_at = now(),
        last_error_class = 'ProcessCrashed', last_error_message = %(reason)s
    WHERE deployment = %(deployment)s AND lease_owner = %(id)s AND state = 'leased'
    RETURNING id, attempts + 1 AS attempt, started_at
),
attempt_rows AS (
    INSERT INTO tenantq_attempt_log (job_id, attempt, worker_id, outcome, error_class,
                                     error_message)
    SELECT id, attempt, %(id)s, 'crashed', 'ProcessCrashed', %(reason)s FROM released
)
SELECT id FROM released
"""

#: The database failed over to a standby that lacked the end of the old primary's history:
#: the leases this worker holds on the new primary are left from a history it no longer
#: follows (it gave up every job it was running, and reads its partitions again), so each is
#: given back at once, its attempt returned, with a 'released' attempt row that says why.
JOB_RELEASE_OWNER_LEASES = """
WITH released AS (
    UPDATE tenantq_jobs
    SET state = 'runnable', attempts = attempts - 1, lease_owner = NULL, lease_until = NULL,
        updated_at = now()
    WHERE deployment = %(deployment)s AND lease_owner = %(owner)s AND state = 'leased'
    RETURNING id, attempts + 1 AS attempt
),
attempt_rows AS (
    INSERT INTO tenantq_attempt_log (job_id, attempt, worker_id, outcome, error_message)
    SELECT id, attempt, %(owner)s, 'released', %(reason)s FROM released
)
SELECT id FROM released
"""

#: Extend the leases of every job a worker runs, and refresh its registry row, in one
#: statement. Returns the jobs still ours and whether an operator asked to cancel them.
#:
#: It never waits for a row lock. Waiting let it deadlock with the worker's own result batch,
#: which locks the same rows in another order: Postgres then broke the cycle after
#: ``deadlock_timeout`` (1 s) by failing the batch, which was written again, and the jobs
#: behind it waited that second (seen as a 1.4 s enqueue-to-start p99 under load). A row
#: locked by someone else is being written at that moment (our own result, a checkpoint, an
#: operator's cancel, another worker's takeover of a stale lease) and is skipped: its lease
#: keeps its time until the next beat, far inside ``lease_seconds``. Whether a job is still
#: ours, and whether it was asked to cancel, is read from the statement's snapshot, so a
#: skipped job is not reported lost; a takeover that commits meanwhile shows at the next beat.
#:
#: Every row is found by its key (``id = ANY``) and nothing is joined: the state and owner are
#: compared with ``IS NOT DISTINCT FROM``, which no index serves, so a generic plan cannot pick
#: the owner index and join the leases to themselves. It did (the owner's estimate was one row
#: on a ledger of finished jobs): nested loops whose cost grew with the square of the leases
#: held, 190 ms for 1,000 of them, up to 1.3 s under load, while the rows it had locked held up
#: the worker's own result batch. Now 11-14 ms for 1,000 and 53-83 ms for 5,000.
LEASE_RENEW = """
WITH ours AS (
    SELECT x.id, x.cancel_requested FROM tenantq_jobs x
    WHERE x.id = ANY(%(ids)b::uuid[]) AND x.deployment = %(deployment)b
      AND x.state IS NOT DISTINCT FROM 'leased' AND x.lease_owner IS NOT DISTINCT FROM %(owner)b
),
free AS (
    SELECT x.id FROM tenantq_jobs x
    WHERE x.id = ANY(%(ids)b::uuid[]) AND x.deployment = %(deployment)b
      AND x.state IS NOT DISTINCT FROM 'leased' AND x.lease_owner IS NOT DISTINCT FROM %(owner)b
    FOR NO KEY UPDATE SKIP LOCKED
),
renewed AS (
    UPDATE tenantq_jobs j
    SET lease_until = now() + make_interval(secs => %(lease_seconds)b), heartbeat_at = now()
    WHERE j.id = ANY(ARRAY(SELECT id FROM free)) AND j.deployment = %(deployment)b
      AND j.state IS NOT DISTINCT FROM 'leased' AND j.lease_owner IS NOT DISTINCT FROM %(owner)b
),
registry AS (
    UPDATE tenantq_workers
    SET heartbeat_at = now(), running_jobs = coalesce(%(running)b::int, running_jobs),
        slots = coalesce(%(slots)b::int, slots)
    WHERE deployment = %(deployment)b AND id = %(owner)b
)
SELECT id, cancel_requested FROM ours
"""

#: Save a running job's progress so that a later attempt can resume (fenced).
JOB_CHECKPOINT = """
UPDATE tenantq_jobs SET progress = %(progress)s, heartbeat_at = now(), updated_at = now()
WHERE id = %(id)s AND deployment = %(deployment)s AND attempts = %(attempt)s
  AND lease_owner = %(owner)s AND state = 'leased'
RETURNING id
"""

#: Ask for a job to be canceled. Jobs not yet running end canceled at once; a running job
#: sees the request through its heartbeat. A job no worker has seen yet gets a canceled row
#: so that it never runs when its message arrives, if ``create_unseen`` says it exists; an id
#: another deployment holds gets none.
JOB_CANCEL = """
WITH requested AS (
    UPDATE tenantq_jobs
    SET cancel_requested = true, updated_at = now(),
        state = CASE WHEN state IN ('pending', 'runnable', 'retrying') THEN 'canceled'::job_state
                     ELSE state END,
        finished_at = CASE WHEN state IN ('pending', 'runnable', 'retrying') THEN now()
                           ELSE finished_at END
    WHERE id = %(id)s AND deployment = %(deployment)s
      AND state NOT IN ('succeeded', 'dead', 'canceled')
    RETURNING id, state::text
),
unseen AS (
    INSERT INTO tenantq_jobs (id, deployment, queue, job_type, tenant_id, partition_key, state,
                              max_attempts, cancel_requested, finished_at,
                              last_error_class, last_error_message)
    SELECT %(id)s, %(deployment)s, %(queue)s, '(unseen)', '(unseen)', '', 'canceled', 1, true,
           now(), 'Canceled', 'canceled before any worker saw it'
    WHERE %(create_unseen)s AND NOT EXISTS (SELECT 1 FROM tenantq_jobs WHERE id = %(id)s)
    ON CONFLICT (id) DO NOTHING
    RETURNING id, state::text
)
SELECT id, state FROM requested UNION ALL SELECT id, state FROM unseen
"""

JOB_GET = """
SELECT id, queue, job_type, tenant_id, partition_key, state::text, attempts, max_attempts,
       replays, run_after, lease_owner, lease_until, heartbeat_at, cancel_requested,
       last_error_class, last_error_message, progress, origin_topic, origin_partition,
       origin_offset, idempotency_key, created_at, enqueued_at, started_at, finished_at,
       payload
FROM tenantq_jobs WHERE id = %(id)s AND deployment = %(deployment)s
"""

#: A job's attempts, oldest first, through the view of migration 0008: the log's rows and the
#: success recorded on the job row, which has no log id and comes last.
ATTEMPT_LIST = """
SELECT attempt, worker_id, outcome, error_class, error_message, started_at, finished_at,
       duration_ms
FROM tenantq_job_attempts
WHERE job_id = %(id)s
  AND EXISTS (SELECT 1 FROM tenantq_jobs WHERE id = %(id)s AND deployment = %(deployment)s)
ORDER BY id NULLS LAST
"""

WORKER_REGISTER = """
INSERT INTO tenantq_workers (deployment, id, hostname, pid, queues, slots)
VALUES (%(deployment)s, %(id)s, %(hostname)s, %(pid)s, %(queues)s, %(slots)s)
ON CONFLICT (deployment, id) DO UPDATE SET heartbeat_at = now(), stopped_at = NULL,
    queues = excluded.queues, slots = excluded.slots
"""

WORKER_STOP = """
UPDATE tenantq_workers SET stopped_at = now(), running_jobs = 0, heartbeat_at = now()
WHERE deployment = %(deployment)s AND id = %(id)s
"""

#: Delete every job of a queue, whatever its state, with its attempt rows (which have no
#: foreign key to cascade from, migration 0007): for a throwaway queue of a benchmark or a
#: test, never a deployment's.
QUEUE_JOBS_DELETE = """
WITH gone AS (
    DELETE FROM tenantq_jobs WHERE deployment = %(deployment)s AND queue = %(queue)s
    RETURNING id
)
DELETE FROM tenantq_attempt_log a USING gone WHERE a.job_id = gone.id
"""
