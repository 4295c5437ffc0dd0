"""Guarantee: corrupt bytes, an unknown schema fingerprint, an empty message, an oversized
message and an envelope with an invalid tenant id each land in the DLQ with their reason,
without a handler call, and the partition keeps flowing: the valid job behind them succeeds
and the offsets move past them."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any

import psycopg
from confluent_kafka import Producer
from support import all_in, caught_up, running_worker, wait_for
from test_failures import dlq_records

import tenantq
from tenantq import headers
from tenantq.schemas.envelope import Envelope, encode_envelope
from tenantq.topics import main_topic


def test_bad_messages_are_dead_lettered_and_the_partition_flows(
    make_settings: Any, db: psycopg.Connection[Any]
) -> None:
    settings = make_settings(max_message_bytes=4096)
    app = tenantq.App(settings)
    ran: list[Any] = []

    @app.job("fine")
    def fine(ctx: tenantq.JobContext, payload: dict[str, Any]) -> None:
        ran.append(ctx.job_id)

    topic = main_topic(settings.topic_prefix, "default")
    raw = Producer(settings.kafka_client_config())
    bad = [
        b"\x00\x01garbage that is not avro",
        b"\xc3\x01" + b"\x99" * 8 + b"\x02\x04body",  # single-object marker, unknown schema
        b"",
        b"\xc3\x01" + b"x" * 6000,  # larger than max_message_bytes
        b"\xc3\x01\x00",  # truncated header
        # a well-formed envelope whose tenant id breaks the rule (twice: each is judged)
        *[
            encode_envelope(
                Envelope(
                    uuid.uuid4(),
                    "default",
                    "fine",
                    "no spaces",
                    "no spaces",
                    b"{}",
                    dt.datetime.now(dt.UTC),
                )
            )
        ]
        * 2,
    ]
    for value in bad:
        raw.produce(topic, value=value, key=b"acme", partition=0)
    assert raw.flush(30) == 0
    with tenantq.Producer(settings, app) as producer:
        good = producer.enqueue("fine", tenant="acme", payload={}).result(30)
    # the valid job sits behind the bad ones when they share the partition
    with running_worker(app, settings) as worker:
        wait_for(lambda: all_in(db, [good.job_id], {"succeeded"}), timeout=60, what="good job")
        wait_for(
            lambda: caught_up(settings, worker.group_id, topic),
            timeout=30,
            what="offsets past the bad messages",
        )
    assert ran == [good.job_id]
    reasons = sorted(r[headers.ERROR_CLASS] for r in dlq_records(settings))
    assert reasons == sorted(
        [
            "Undecodable:corrupt",
            "Undecodable:unknown_schema",
            "Undecodable:empty",
            "Undecodable:oversized",
            "Undecodable:truncated",
            "Undecodable:invalid_tenant",
            "Undecodable:invalid_tenant",
        ]
    )
