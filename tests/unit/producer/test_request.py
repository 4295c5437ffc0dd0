"""``RequestPreparer``: the batch preparation fast path publishes byte for byte what the
generic path does, and what fastavro writes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import random
import uuid
from pathlib import Path
from typing import Any

import pytest
from fakes import UNIT_TOPICS, FakeKafkaProducer, make_settings
from fastavro import schemaless_writer
from pydantic import BaseModel, Field

import tenantq
from tenantq import headers as header_names
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.producer.producer import EnqueueRequest, Producer
from tenantq.schemas.envelope import DEFAULT_CODEC, SINGLE_OBJECT_MARKER, decode_envelope
from tenantq.schemas.envelope_reader import read_envelope
from tenantq.store.placement import PlacementRecord


def test_batch_fast_path_publishes_what_the_generic_path_does(tmp_path: Path) -> None:
    rows = [PlacementRecord("default", "spready", "spread", 4, ())]
    with Producer(
        make_settings(tmp_path),
        placement_book=PlacementBook(lambda queue: rows, 5.0),
        kafka_client=FakeKafkaProducer(),
    ) as made:
        preparer = made._preparer
        now = dt.datetime.now(dt.UTC)
        mixed: list[Any] = [
            EnqueueRequest("resize", "acme", {"a": [1, "é"]}, job_id=uuid.uuid4()),
            EnqueueRequest("resize", "spready", {"n": 2}, job_id=str(uuid.uuid4())),
            {"job_type": "resize", "tenant": "acme", "payload": None, "job_id": uuid.uuid4()},
            EnqueueRequest("resize", "acme", {}, job_id=uuid.uuid4(), delay=30),
            EnqueueRequest("resize", "acme", {}, job_id=uuid.uuid4(), max_attempts=2),
        ]
        batched = preparer.prepare_all(mixed, now)
        one_by_one = [preparer.prepare(request, now) for request in mixed]
        assert batched == one_by_one
        assert batched[3].topic.startswith("unit.default.retry.")
        assert dict(batched[3].extra_headers)[header_names.DELAY_REASON] == "scheduled"


class Thumbnail(BaseModel):
    """A registered payload model: its own JSON dump is what is published."""

    width: int
    label: str = Field(default="é", alias="name")


def varied_requests(generator: random.Random, count: int) -> list[Any]:
    """Requests of every shape ``prepare_all`` takes: payloads of every JSON kind (unicode,
    empty, None, nested, a registered model's, past 16 KiB where the Avro length prefix
    grows), both request forms, explicit ids, every option, every placement mode."""
    unicode = 'é漢🙂\n"\\\u2028\x00'
    payloads: list[Any] = [
        {},
        None,
        {"user": 1, "note": "x" * 64},
        {"text": unicode, "nested": {"a": [1, 2.5, True, None, {"b": []}]}},
        [unicode, -(10**30), 1e-7, 1e16],
        unicode,
        "",
        0,
        {"big": unicode * 3000},  # ~30 kB of JSON
        {"edge": "y" * (16383 - len('{"edge":""}'))},  # 16383 bytes: the last 2-byte prefix
        {"edge": "y" * (16384 - len('{"edge":""}'))},  # 16384 bytes: the first 3-byte one
        Thumbnail(width=3, name="n"),
    ]
    tenants = ["acme", "t-1", "spready", "pinny", "hot", "a.b_c:d-e", "Z" * 128]
    requests: list[Any] = []
    for index in range(count):
        job_type = generator.choice(["resize", "send.email", "thumbnail"])
        payload = (
            {"width": index, "name": unicode} if job_type == "thumbnail" else
            generator.choice(payloads)
        )  # fmt: skip
        options: dict[str, Any] = {}
        roll = generator.random()
        if roll < 0.08:
            options["job_id"] = uuid.uuid4() if generator.random() < 0.5 else str(uuid.uuid4())
        elif roll < 0.12:
            options["delay"] = generator.choice([0, 0.5, 30, dt.timedelta(hours=2)])
        elif roll < 0.15:
            options["run_after"] = dt.datetime(2001, 1, 1, tzinfo=dt.UTC)  # past: runs now
        elif roll < 0.18:
            options["max_attempts"] = generator.randint(1, 1000)
        elif roll < 0.21:
            options["idempotency_key"] = f"key-{index}-{unicode}"
        elif roll < 0.24:
            options["trace_context"] = generator.choice([{}, {"traceparent": unicode}])
        queue = generator.choice([None, None, "default", "mail"])
        fields = {"job_type": job_type, "tenant": generator.choice(tenants), "payload": payload}
        fields.update(options, queue=queue)
        requests.append(fields if generator.random() < 0.1 else EnqueueRequest(**fields))
    return requests


def expected_record(request: Any, job_id: str, key: bytes, now: dt.datetime) -> dict[str, Any]:
    """The envelope record of ``request``, worked out without the producer's encoder."""
    fields = request if isinstance(request, dict) else dataclasses.asdict(request)
    payload = fields["payload"]
    if fields["job_type"] == "thumbnail":
        payload = Thumbnail.model_validate(payload)
    if isinstance(payload, BaseModel):
        data = payload.model_dump_json(by_alias=True).encode()
    else:
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    delay = fields.get("delay")
    run_after = fields.get("run_after")
    if delay is not None:
        seconds = delay.total_seconds() if isinstance(delay, dt.timedelta) else delay
        run_after = now + dt.timedelta(seconds=seconds) if seconds else None
    elif run_after is not None and run_after <= now:
        run_after = None
    job_type = fields["job_type"]
    return {
        "job_id": job_id,
        "queue": fields.get("queue") or ("mail" if job_type == "thumbnail" else "default"),
        "job_type": job_type,
        "tenant_id": fields["tenant"],
        "partition_key": key.decode(),
        "payload": data,
        "created_at": now,
        "run_after": run_after,
        "max_attempts": fields.get("max_attempts"),
        "idempotency_key": fields.get("idempotency_key"),
        "trace_context": fields.get("trace_context") or {},
        "replay_count": 0,
        "attributes": {},
    }


def fastavro_bytes(record: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    buffer.write(SINGLE_OBJECT_MARKER + DEFAULT_CODEC.writer.fingerprint)
    schemaless_writer(buffer, DEFAULT_CODEC.writer.parsed, record)
    return buffer.getvalue()


def explicit_id(request: Any) -> object:
    return request.get("job_id") if isinstance(request, dict) else request.job_id


def test_every_envelope_is_the_bytes_fastavro_writes(tmp_path: Path) -> None:
    """Batches of varied requests: each envelope is byte for byte fastavro's
    ``schemaless_writer`` output of the record worked out from its request, carries the id
    it is published under, and reads back (worker's reader, fastavro) as that record."""
    rows = [
        PlacementRecord("default", "spready", "spread", 4, ()),
        PlacementRecord("default", "pinny", "pinned", None, (1, 3)),
        PlacementRecord("default", "hot", "lane", None, ()),
    ]
    app = tenantq.App()

    @app.job("thumbnail", queue="mail")
    def thumbnail(ctx: Any, payload: Thumbnail) -> None:
        return None

    generator = random.Random(5)
    kafka = FakeKafkaProducer({**UNIT_TOPICS, "unit.default.lane": 6, "unit.mail.lane": 2})
    with Producer(
        make_settings(tmp_path),
        app,
        placement_book=PlacementBook(lambda queue: rows, 5.0),
        kafka_client=kafka,
    ) as made:
        for size in (1, 15, 16, 17, 400):
            requests = varied_requests(generator, size)
            now = dt.datetime.now(dt.UTC) + dt.timedelta(microseconds=generator.randrange(10**6))
            prepared = made._preparer.prepare_all(requests, now)
            assert len(prepared) == len(requests)
            for request, job, job_id in zip(requests, prepared, prepared.ids, strict=True):
                record = expected_record(request, job.job_id, job.key, now)
                assert job.value == fastavro_bytes(record)
                assert job.job_id == str(uuid.UUID(int=job.job_int)) == job_id.decode()
                if explicit_id(request) is not None:
                    assert job.job_id == str(explicit_id(request))
                else:
                    assert uuid.UUID(job.job_id).version == 7
                read = read_envelope(job.value, max_bytes=1_000_000)
                assert read == decode_envelope(job.value, max_bytes=1_000_000)
                assert str(read.job_id) == job.job_id and read.payload == record["payload"]
            fresh = [
                job.job_id
                for job, request in zip(prepared, requests, strict=True)
                if explicit_id(request) is None
            ]
            assert len(set(fresh)) == len(fresh)
            # What is handed to Kafka: the same bytes, under the id the envelope carries.
            kafka.produced.clear()
            made.enqueue_many(requests)
            assert len(kafka.produced) == len(requests)
            for request, message in zip(requests, kafka.produced, strict=True):
                envelope = decode_envelope(message["value"], max_bytes=1_000_000)
                headers = dict(message["headers"])
                assert headers[header_names.JOB_ID] == str(envelope.job_id)
                assert headers[header_names.TENANT] == envelope.tenant_id == request_tenant(request)
                record = expected_record(
                    request, str(envelope.job_id), message["key"], envelope.created_at
                )
                assert message["value"] == fastavro_bytes(record)


def request_tenant(request: Any) -> str:
    return str(request["tenant"] if isinstance(request, dict) else request.tenant)


def test_prepared_jobs_read_as_the_list_of_their_jobs(tmp_path: Path) -> None:
    with Producer(
        make_settings(tmp_path),
        placement_book=PlacementBook(None, 5.0),
        kafka_client=FakeKafkaProducer(),
    ) as made:
        requests = [
            EnqueueRequest("resize", f"t{n % 3}", {"n": n}, queue="mail" if n == 4 else None)
            for n in range(6)
        ]
        prepared = made._preparer.prepare_all(requests, dt.datetime.now(dt.UTC))
        jobs = list(prepared)
        assert len(prepared) == 6 and prepared == jobs and prepared[-1] == jobs[5]
        assert prepared[1:4] == jobs[1:4] and list(prepared.subset([5, 0])) == [jobs[5], jobs[0]]
        assert prepared.tenant_counts() == {"t0": 2, "t1": 2, "t2": 2}
        assert prepared.queues() == {"default", "mail"}
        assert not prepared.keyed and prepared.generic == 0
        for job, request in zip(jobs, requests, strict=True):
            assert job.tenant_id == request.tenant and job.key == request.tenant.encode()
            assert job.kafka_headers()[0] == (header_names.JOB_ID, job.job_id)
        keyed = made._preparer.prepare_all(
            [EnqueueRequest("resize", "t", {}, idempotency_key="k")], dt.datetime.now(dt.UTC)
        )
        assert keyed.keyed and keyed.generic == 1 and keyed[0].keyed


#: The options that send a request down ``prepare``'s own path within ``prepare_all``.
OPTIONS = ("run_after", "delay", "max_attempts", "idempotency_key", "trace_context")


def lane_partitions(job: Any, topics: dict[str, int]) -> int:
    return topics[job.topic]


def test_prepare_all_is_prepare_job_by_job(tmp_path: Path) -> None:
    """The differential test of the batch fast path: over many varied batches (every payload
    kind, both request forms, explicit ids, every option, every placement mode, a registered
    model), each job ``prepare_all`` makes is the job ``prepare`` makes of its request alone
    with the same id. A hot-lane job's partition is the one exception, by design: a batch
    keeps a lane partition for ``LANE_BATCH_JOBS`` jobs (``_lane_partition``), where
    ``prepare`` draws one per job; the first of each run is ``prepare``'s draw."""
    from tenantq.producer.request import LANE_BATCH_JOBS

    rows = [
        PlacementRecord("default", "spready", "spread", 4, ()),
        PlacementRecord("default", "pinny", "pinned", None, (1, 3)),
        PlacementRecord("default", "hot", "lane", None, ()),
        PlacementRecord("mail", "hot", "lane", None, ()),
    ]
    app = tenantq.App()

    @app.job("thumbnail", queue="mail")
    def thumbnail(ctx: Any, payload: Thumbnail) -> None:
        return None

    topics = {**UNIT_TOPICS, "unit.default.lane": 6, "unit.mail.lane": 2}
    generator = random.Random(21)
    compared = lane_jobs = 0
    with Producer(
        make_settings(tmp_path),
        app,
        placement_book=PlacementBook(lambda queue: rows, 5.0),
        kafka_client=FakeKafkaProducer(topics),
    ) as made:
        preparer = made._preparer
        batches = [varied_requests(generator, size) for size in [1, 2, 15, 16, 17, 65, 300] * 3]
        # Long runs of one hot-lane route, with other jobs between.
        batches.append(
            [EnqueueRequest("resize", "hot", {"n": n}) for n in range(150)]
            + varied_requests(generator, 40)
            + [EnqueueRequest("resize", "hot", {"n": n}) for n in range(70)]
        )
        moved = 0
        for requests in batches:
            now = dt.datetime.now(dt.UTC) + dt.timedelta(microseconds=generator.randrange(10**6))
            batched = preparer.prepare_all(requests, now)
            assert len(batched) == len(requests)
            run: dict[tuple[object, ...], tuple[int, int]] = {}
            for index, (request, job) in enumerate(zip(requests, batched, strict=True)):
                alone = preparer.prepare(request, now, batched.job_ints[index])
                compared += 1
                fields = request if isinstance(request, dict) else dataclasses.asdict(request)
                if not job.topic.endswith(".lane") or any(
                    fields.get(option) is not None for option in OPTIONS
                ):
                    assert job == alone
                    continue
                lane_jobs += 1
                assert job._replace(partition=alone.partition) == alone
                assert 0 <= job.partition < lane_partitions(job, topics)
                # A run per (job type, tenant, queue asked for): it starts at prepare's draw
                # for its first job, keeps its partition, then moves to the next one.
                key = (fields["job_type"], fields["tenant"], fields.get("queue"))
                partition, jobs = run.get(key, (-1, 0))
                if partition < 0:
                    assert job.partition == alone.partition
                    run[key] = (job.partition, 1)
                elif jobs < LANE_BATCH_JOBS:
                    assert job.partition == partition
                    run[key] = (partition, jobs + 1)
                else:
                    assert job.partition == (partition + 1) % lane_partitions(job, topics)
                    run[key] = (job.partition, 1)
                    moved += 1
    assert compared > 1500 and lane_jobs > 200 and moved >= 3


class Refused(BaseModel):
    count: int


def test_prepare_all_refuses_what_prepare_refuses(tmp_path: Path) -> None:
    """Every kind of bad request, at any position of a batch of good ones: ``prepare_all``
    raises the error ``prepare`` raises for it alone (same class, same message), with a note
    naming its index."""
    app = tenantq.App()
    app.job("counted", model=Refused)(lambda ctx, payload: None)
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    bad_requests: list[Any] = [
        EnqueueRequest("resize", "", {}),
        EnqueueRequest("resize", "bad tenant!", {}),
        EnqueueRequest("resize", 7, {}),  # type: ignore[arg-type]
        EnqueueRequest("bad type!", "acme", {}),
        EnqueueRequest(None, "acme", {}),  # type: ignore[arg-type]
        EnqueueRequest("resize", "acme", {}, queue="undeclared"),
        EnqueueRequest("resize", "acme", {"x": float("nan")}),
        EnqueueRequest("resize", "acme", {"when": dt.datetime(2026, 1, 1)}),
        EnqueueRequest("resize", "acme", cyclic),
        EnqueueRequest("resize", "acme", {"big": "x" * 300_000}),
        EnqueueRequest("counted", "acme", {"count": "many"}),
        EnqueueRequest("counted", "acme", Thumbnail(width=1)),
        EnqueueRequest("resize", "acme", {}, max_attempts=0),
        EnqueueRequest("resize", "acme", {}, delay=float("nan")),
        EnqueueRequest("resize", "acme", {}, job_id="not-a-uuid"),
        EnqueueRequest("resize", "acme", {}, idempotency_key=""),
        {"job_type": "resize", "tenant": "acme"},
        {"job_type": "resize", "tenant": "acme", "payload": {}, "colour": "red"},
        "not a request",
    ]
    good = [EnqueueRequest("resize", f"t{n}", {"n": n}) for n in range(20)]
    generator = random.Random(22)
    with Producer(
        make_settings(tmp_path, max_payload_bytes=200_000),
        app,
        placement_book=PlacementBook(None, 5.0),
        kafka_client=FakeKafkaProducer(),
    ) as made:
        preparer = made._preparer
        now = dt.datetime.now(dt.UTC)
        for bad in bad_requests:
            with pytest.raises(tenantq.TenantqError) as alone:
                preparer.prepare(bad, now)
            position = generator.randrange(len(good) + 1)
            batch = [*good[:position], bad, *good[position:]]
            with pytest.raises(type(alone.value)) as batched:
                preparer.prepare_all(batch, now)
            assert str(batched.value) == str(alone.value)
            assert f"request #{position} of the batch" in " ".join(batched.value.__notes__)
