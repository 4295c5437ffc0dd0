"""enqueue from any language: the SQL function tenantq_enqueue and the queues relays serve

``tenantq_enqueue(queue, job_type, tenant, payload, idempotency_key, run_after,
topic_prefix)`` enqueues a job inside the caller's transaction from any Postgres driver: it
checks its arguments as the Python SDK does, writes the job's row (``pending``) and an outbox
entry, and returns the job id (a UUIDv7). The entry carries no Kafka record yet (no topic,
partition, key, value or headers): the relay of the queue encodes it with the SDK's own
encoder and partitioner before publishing it (``tenantq.outbox.entry_encoder``), so the wire
format and tenant placement have one implementation, in Python. Entries written by
``tenantq.Outbox`` keep their whole record; a CHECK says an entry has all five or none.

``tenantq_outbox_queues`` holds what the function needs from the deployment's settings: each
relay registers the queues it serves when it connects (their main topic, the size limits,
the default of max_attempts). A queue no relay has registered is refused: an entry that no
relay will publish is an error at the call, not a job that waits forever. Only a relay that
can encode these entries registers, so none is written before one runs.

The downgrade drops both, and refuses while entries wait for their record (the previous
release's relays could not publish them): run ``tenantq outbox relay --once`` first.

Create Date: 2026-12-09 10:00:00
"""

from __future__ import annotations

from alembic import op

from tenantq.migrations.building_blocks import (
    integer_columns,
    named_check,
    named_primary_key,
    stamped_column,
    text_columns,
)

revision: str = "0012"
down_revision: str | None = "0011"

QUEUES = "tenantq_outbox_queues"
OUTBOX = "tenantq_outbox"
#: The columns of an entry's Kafka record, absent until its relay encodes it.
RECORD_COLUMNS = ("topic", "partition", "value", "headers")
RECORD_CHECK = "record_whole_or_absent"
SIGNATURE = "tenantq_enqueue(text, text, text, jsonb, text, timestamptz, text)"

#: The function, for the schema the tables are in (``{schema}``, quoted). Every name is
#: schema-qualified and the search path is pinned, so no object of the caller's search path
#: can stand in for one of tenantq's or of ``pg_catalog``.
#:
#: The envelope bound: the payload and the variable fields (the tenant twice: its id and the
#: partition key), plus 128 bytes for the rest: the schema header (10), the job id (37), two
#: timestamps and the union branches (about 25), the length prefixes (13 at most) and a spread
#: shard's suffix (5 at most). ``tests/integration/test_enqueue_sql_rules.py`` holds it to the
#: encoder's lengths.
FUNCTION = r"""
CREATE FUNCTION {schema}.tenantq_enqueue(
    queue text,
    job_type text,
    tenant text,
    payload jsonb,
    idempotency_key text DEFAULT NULL,
    run_after timestamptz DEFAULT NULL,
    topic_prefix text DEFAULT 'tenantq'
) RETURNS uuid
LANGUAGE plpgsql
VOLATILE
SECURITY INVOKER
SET search_path = pg_catalog, pg_temp
AS $function$
#variable_conflict use_column
DECLARE
    -- The arguments under names no column has: statements below name only these.
    queue_name text := queue;
    type_name text := job_type;
    tenant_name text := tenant;
    given_payload jsonb := payload;
    key_text text := idempotency_key;
    wanted_at timestamptz := run_after;
    deployment_name text := topic_prefix;
    at_enqueue timestamptz := pg_catalog.clock_timestamp();
    target record;
    payload_bytes bytea;
    payload_hash bytea;
    due_at timestamptz;
    bad_character text;
    registered text;
    id_bytes bytea;
    new_id uuid;
    holder record;
    same_payload boolean;
BEGIN
    IF type_name IS NULL OR type_name !~ '^[A-Za-z0-9_.:-]{1,128}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('tenantq_enqueue: job_type %s must match ^[A-Za-z0-9_.:-]{1,128}$',
                             coalesce(quote_literal(left(type_name, 140)), 'NULL'));
    END IF;

    -- The tenant id rule of tenantq.tenant_ids, with its messages.
    IF tenant_name IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'tenantq_enqueue: tenant must not be NULL';
    ELSIF tenant_name = '' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'tenantq_enqueue: tenant id is empty';
    ELSIF char_length(tenant_name) > 128 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('tenantq_enqueue: tenant id is %s characters, the limit is 128',
                             char_length(tenant_name));
    ELSIF tenant_name !~ '^[A-Za-z0-9._:-]+$' THEN
        bad_character := substring(tenant_name FROM '[^A-Za-z0-9._:-]');
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('tenantq_enqueue: tenant id %s has character %s at position %s; '
                             'allowed: letters, digits and . _ : -',
                             quote_literal(left(tenant_name, 40)), quote_literal(bad_character),
                             strpos(tenant_name, bad_character) - 1);
    END IF;

    IF deployment_name IS NULL OR deployment_name !~ '^[A-Za-z0-9._-]{1,100}$' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('tenantq_enqueue: topic_prefix %s must match ^[A-Za-z0-9._-]{1,100}$',
                             coalesce(quote_literal(left(deployment_name, 140)), 'NULL'));
    END IF;
    IF queue_name IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'tenantq_enqueue: queue must not be NULL';
    END IF;
    SELECT q.main_topic, q.max_payload_bytes, q.max_message_bytes, q.default_max_attempts
    INTO target
    FROM {schema}.tenantq_outbox_queues q
    WHERE q.deployment = deployment_name AND q.queue = queue_name;
    IF NOT FOUND THEN
        SELECT string_agg(q.queue, ', ' ORDER BY q.queue) INTO registered
        FROM {schema}.tenantq_outbox_queues q WHERE q.deployment = deployment_name;
        IF registered IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
                MESSAGE = format('tenantq_enqueue: topic_prefix %s: no relay of this deployment '
                                 'has registered a queue in this database',
                                 quote_literal(deployment_name)),
                HINT = format('Start a tenantq worker or run `tenantq outbox relay --once` with '
                              'TENANTQ_TOPIC_PREFIX=%s: its relay publishes what '
                              'tenantq_enqueue writes.', deployment_name);
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('tenantq_enqueue: queue %s has no relay in deployment %s '
                             '(registered: %s)', quote_literal(left(queue_name, 100)),
                             quote_literal(deployment_name), registered),
            HINT = 'Declare the queue in TENANTQ_QUEUES and start a worker or relay that serves it.';
    END IF;

    IF given_payload IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'tenantq_enqueue: payload must not be NULL (a JSON null is ''null''::jsonb)';
    END IF;

    IF wanted_at IS NOT NULL THEN
        IF NOT isfinite(wanted_at) THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('tenantq_enqueue: run_after must be a finite time, got %s',
                                 wanted_at);
        END IF;
        -- 366 days of 24 hours, whatever the session's time zone does to calendar days.
        IF wanted_at - at_enqueue > interval '8784 hours' THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = format('tenantq_enqueue: run_after %s is more than 366 days ahead',
                                 wanted_at);
        END IF;
        IF wanted_at > at_enqueue THEN
            due_at := wanted_at;
        END IF;
    END IF;

    IF key_text IS NOT NULL AND char_length(key_text) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('tenantq_enqueue: idempotency_key must be a string of 1..256 '
                             'characters, got %s', char_length(key_text));
    END IF;

    -- The payload as it travels: its JSON text in UTF-8, whatever the database's encoding.
    payload_bytes := convert_to(given_payload::text, 'UTF8');
    IF octet_length(payload_bytes) > target.max_payload_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('tenantq_enqueue: payload of %s is %s bytes encoded, the limit '
                             '(max_payload_bytes) is %s', quote_literal(type_name),
                             octet_length(payload_bytes), target.max_payload_bytes);
    END IF;
    IF octet_length(payload_bytes) + octet_length(queue_name) + octet_length(type_name)
       + 2 * octet_length(tenant_name) + coalesce(octet_length(key_text), 0) + 128
       > target.max_message_bytes THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('tenantq_enqueue: payload of %s makes an envelope of up to %s '
                             'bytes, the limit (max_message_bytes) is %s',
                             quote_literal(type_name),
                             octet_length(payload_bytes) + octet_length(queue_name)
                             + octet_length(type_name) + 2 * octet_length(tenant_name)
                             + coalesce(octet_length(key_text), 0) + 128,
                             target.max_message_bytes);
    END IF;
    payload_hash := sha256(payload_bytes);

    -- A UUIDv7 as tenantq.job_ids makes them: the millisecond in the first 48 bits, version
    -- 7, the variant, and 74 random bits (gen_random_uuid's, which has the variant already).
    id_bytes := overlay(uuid_send(gen_random_uuid())
                        PLACING substring(int8send(floor(extract(epoch FROM at_enqueue) * 1000)::bigint)
                                          FROM 3 FOR 6)
                        FROM 1 FOR 6);
    id_bytes := set_byte(id_bytes, 6, (get_byte(id_bytes, 6) & 15) | 112);
    new_id := encode(id_bytes, 'hex')::uuid;

    -- Inserted, or the job holding the key is the answer. A holder that is gone by the time
    -- it is read (pruned in between) frees the key: try again.
    FOR try_number IN 1..3 LOOP
        INSERT INTO {schema}.tenantq_jobs AS j (
            id, deployment, queue, job_type, tenant_id, partition_key, state, payload,
            payload_sha256, max_attempts, run_after, idempotency_key, enqueued_at
        )
        VALUES (
            new_id, deployment_name, queue_name, type_name, tenant_name, tenant_name, 'pending',
            payload_bytes, payload_hash, target.default_max_attempts,
            coalesce(due_at, now()), key_text, at_enqueue
        )
        ON CONFLICT (deployment, queue, idempotency_key) WHERE idempotency_key IS NOT NULL
        DO NOTHING;
        IF FOUND THEN
            INSERT INTO {schema}.tenantq_outbox (deployment, queue, main_topic, job_id, tenant_id)
            VALUES (deployment_name, queue_name, target.main_topic, new_id, tenant_name);
            RETURN new_id;
        END IF;

        SELECT h.id, h.job_type, h.tenant_id, h.payload, h.payload_sha256 INTO holder
        FROM {schema}.tenantq_jobs h
        WHERE h.deployment = deployment_name AND h.queue = queue_name
          AND h.idempotency_key = key_text;
        IF FOUND THEN
            same_payload := holder.payload_sha256 IS NOT DISTINCT FROM payload_hash;
            IF NOT same_payload AND holder.payload IS NOT NULL THEN
                -- Written by another client (the Python SDK writes compact JSON): the same
                -- JSON value is the same payload.
                BEGIN
                    same_payload := convert_from(holder.payload, 'UTF8')::jsonb = given_payload;
                EXCEPTION WHEN invalid_text_representation OR character_not_in_repertoire
                               OR untranslatable_character THEN
                    same_payload := false;
                END;
            END IF;
            IF holder.job_type = type_name AND holder.tenant_id = tenant_name AND same_payload THEN
                RETURN holder.id;
            END IF;
            RAISE EXCEPTION USING ERRCODE = 'unique_violation',
                CONSTRAINT = 'uq_tenantq_jobs_deployment_queue_idempotency_key',
                MESSAGE = format('tenantq_enqueue: idempotency_key %s of queue %s already names '
                                 'job %s (%s of tenant %s) with another job type, tenant or '
                                 'payload; the original is kept',
                                 quote_literal(left(key_text, 100)), quote_literal(queue_name),
                                 holder.id, holder.job_type, quote_literal(holder.tenant_id));
        END IF;
    END LOOP;
    RAISE EXCEPTION USING ERRCODE = 'serialization_failure',
        MESSAGE = format('tenantq_enqueue: idempotency_key %s of queue %s is held by a job that '
                         'could not be read; try again', quote_literal(left(key_text, 100)),
                         quote_literal(queue_name));
END
$function$
"""

COMMENT = r"""
COMMENT ON FUNCTION {schema}.tenantq_enqueue(text, text, text, jsonb, text, timestamptz, text) IS
'Enqueue a tenantq job in the caller''s transaction and return its id (a UUIDv7). The job runs
once the transaction commits and the relay of its queue has published it; a rollback leaves
nothing. The arguments are checked as the Python SDK checks them (job type name, tenant id,
the queue registered by a relay of the deployment topic_prefix, idempotency key of 1..256
characters, run_after at most 366 days ahead, the payload size limits registered by the relay);
a bad one raises SQLSTATE 22023 (invalid_parameter_value) with a message naming it; a deployment
none of whose relays has run raises 55000. An idempotency_key that already names a job of the
queue returns that job''s id when the job type, tenant and payload are the same, and raises
23505 (unique_violation) otherwise. See docs/enqueue-from-sql.md.'
"""

#: Downgrade: an entry without its record would never be published by the previous release.
REFUSE_UNENCODED = """
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM tenantq_outbox WHERE value IS NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = 'outbox entries written by tenantq_enqueue are not published yet',
            HINT = 'Run `tenantq outbox relay --once` (this release) before the downgrade.';
    END IF;
END
$$
"""


def _schema() -> str:
    """The schema the tables are in (the migration's current schema), quoted."""
    return str(op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar())


def upgrade() -> None:
    op.create_table(
        QUEUES,
        *text_columns("deployment", "queue", "main_topic"),
        *integer_columns("max_payload_bytes", "max_message_bytes", "default_max_attempts"),
        stamped_column("registered_at"),
        named_check(QUEUES, "limits_positive", "max_payload_bytes > 0 AND max_message_bytes > 0"),
        named_check(QUEUES, "default_max_attempts_positive", "default_max_attempts >= 1"),
        named_primary_key(QUEUES, "deployment", "queue"),
    )
    for column in RECORD_COLUMNS:
        op.alter_column(OUTBOX, column, nullable=True)
    op.create_check_constraint(
        op.f(f"ck_{OUTBOX}_{RECORD_CHECK}"),
        OUTBOX,
        f"num_nulls({', '.join(RECORD_COLUMNS)}) IN (0, {len(RECORD_COLUMNS)})",
    )
    schema = _schema()
    op.execute(FUNCTION.replace("{schema}", schema))
    op.execute(COMMENT.replace("{schema}", schema))


def downgrade() -> None:
    op.execute(REFUSE_UNENCODED)
    op.execute(f"DROP FUNCTION {_schema()}.{SIGNATURE}")
    op.drop_constraint(op.f(f"ck_{OUTBOX}_{RECORD_CHECK}"), OUTBOX, type_="check")
    for column in RECORD_COLUMNS:
        op.alter_column(OUTBOX, column, nullable=False)
    op.drop_table(QUEUES)
