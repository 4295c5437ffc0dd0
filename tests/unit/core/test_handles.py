"""``@app.job`` returns a typed handle: it registers the handler unchanged, runs it when
called, and enqueues its job through each form (producer, asyncio, outbox, batch request)
with the same validation as the job type's name."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import fakes
import pytest
from pydantic import BaseModel

import tenantq
from tenantq.errors import ConfigurationError, PayloadValidationError
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.schemas.envelope import decode_envelope


class SendEmail(BaseModel):
    to: str
    subject: str = "hello"


def test_the_handle_registers_the_handler_and_runs_it_when_called() -> None:
    app = tenantq.App()

    @app.job("send_email", queue="mail", max_attempts=8)
    def send_email(ctx: Any, payload: SendEmail) -> str:
        """Send one email."""
        return f"{ctx}:{payload.to}"

    assert isinstance(send_email, tenantq.JobHandle)
    assert (send_email.name, send_email.queue, send_email.model) == (
        "send_email",
        "mail",
        SendEmail,
    )
    job_type = app.job_type("send_email")
    assert job_type.handler is send_email.handler and job_type.model is SendEmail
    assert job_type.max_attempts == 8 and not job_type.is_async
    # Called, it is the function: positional or by keyword.
    assert send_email("ctx", SendEmail(to="a@x")) == "ctx:a@x"
    assert send_email(ctx="c", payload=SendEmail(to="b@x")) == "c:b@x"
    assert send_email.__name__ == "send_email" and send_email.__doc__ == "Send one email."
    assert send_email.__wrapped__ is send_email.handler  # type: ignore[attr-defined]
    assert "send_email" in repr(send_email) and "SendEmail" in repr(send_email)


def test_the_model_comes_from_the_decorator_or_the_annotation() -> None:
    app = tenantq.App()
    by_decorator = app.job("a", model=SendEmail)(lambda ctx, payload: None)
    assert by_decorator.model is SendEmail and app.job_type("a").model is SendEmail

    @app.job("b")
    def plain(ctx: Any, payload: dict[str, Any]) -> None:
        return None

    assert plain.model is None and app.job_type("b").model is None


def test_an_async_handler_stays_async_and_a_handle_registers_again() -> None:
    app = tenantq.App()

    @app.job("first")
    async def first(ctx: Any, payload: SendEmail) -> int:
        return len(payload.to)

    assert app.job_type("first").is_async
    assert asyncio.run(first(None, SendEmail(to="abc"))) == 3
    second = app.job("second")(first)  # the same function under another name
    assert app.job_type("second").handler is first.handler and app.job_type("second").is_async
    assert second.model is SendEmail and second.name == "second"
    with pytest.raises(ConfigurationError):
        app.job("first")(first.handler)  # names stay unique


def test_a_request_carries_every_option() -> None:
    app = tenantq.App()
    send_email = app.job("send_email")(lambda ctx, payload: None)
    job_id = uuid.uuid4()
    when = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    request = send_email.request(
        tenant="acme",
        payload=SendEmail(to="a@x"),
        queue="mail",
        job_id=job_id,
        run_after=when,
        max_attempts=3,
        idempotency_key="k",
        trace_context={"traceparent": "t"},
    )
    assert request == tenantq.EnqueueRequest(
        "send_email", "acme", SendEmail(to="a@x"), "mail", job_id, when, None, 3, "k",
        {"traceparent": "t"},
    )  # fmt: skip
    assert send_email.request(tenant="t", payload=None).queue is None  # the job type's queue


@pytest.fixture
def producer_and_kafka(tmp_path: Path) -> Any:
    settings = fakes.make_settings(tmp_path)
    app = tenantq.App(settings)
    kafka = fakes.FakeKafkaProducer()
    producer = tenantq.Producer(
        settings, app, kafka_client=kafka, placement_book=PlacementBook(None, 60.0)
    )
    yield app, producer, kafka
    producer.close()


def test_enqueue_through_a_producer_publishes_the_validated_model(producer_and_kafka: Any) -> None:
    app, producer, kafka = producer_and_kafka

    @app.job("send_email", queue="mail")
    def send_email(ctx: Any, payload: SendEmail) -> None:
        return None

    ref = send_email.enqueue(producer, tenant="acme", payload=SendEmail(to="a@x"), delay=30)
    assert ref.result(5).topic.startswith("unit.mail.retry.")
    ref = asyncio.run(send_email.enqueue_async(producer, tenant="beta", payload=SendEmail(to="b")))
    assert ref.topic == "unit.mail"
    refs = producer.enqueue_many(
        [send_email.request(tenant="gamma", payload=SendEmail(to=f"{n}")) for n in range(3)]
    )
    by_name = producer.enqueue("send_email", tenant="delta", payload={"to": "d"})
    assert all(future.result(5).topic == "unit.mail" for future in [*refs, by_name])
    envelopes = [decode_envelope(message["value"], max_bytes=10**6) for message in kafka.produced]
    assert [(e.job_type, e.tenant_id, e.payload_json()["to"]) for e in envelopes] == [
        ("send_email", "acme", "a@x"),
        ("send_email", "beta", "b"),
        *[("send_email", "gamma", f"{n}") for n in range(3)],
        ("send_email", "delta", "d"),
    ]
    assert envelopes[0].payload == SendEmail(to="a@x").model_dump_json().encode()


def test_a_payload_that_does_not_fit_is_refused_at_the_call(producer_and_kafka: Any) -> None:
    app, producer, kafka = producer_and_kafka
    send_email = app.job("send_email", model=SendEmail)(lambda ctx, payload: None)
    with pytest.raises(PayloadValidationError, match="does not fit SendEmail"):
        send_email.enqueue(producer, tenant="acme", payload={"subject": "no recipient"})
    with pytest.raises(tenantq.InvalidTenantId):
        send_email.enqueue(producer, tenant="", payload=SendEmail(to="a"))
    assert kafka.produced == []


class RecordingOutbox:
    """Stands in for ``tenantq.Outbox``: records what a handle hands it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any, tenantq.EnqueueRequest]] = []

    def enqueue_request(self, conn: Any, request: tenantq.EnqueueRequest) -> str:
        self.calls.append(("sync", conn, request))
        return "ref"

    async def enqueue_request_async(self, conn: Any, request: tenantq.EnqueueRequest) -> str:
        self.calls.append(("async", conn, request))
        return "async-ref"


def test_enqueue_with_a_connection_goes_to_the_outbox_s_transaction() -> None:
    app = tenantq.App()
    send_email = app.job("send_email", model=SendEmail)(lambda ctx, payload: None)
    outbox = RecordingOutbox()
    conn = object()
    assert send_email.enqueue(outbox, conn, tenant="acme", payload=SendEmail(to="a")) == "ref"
    awaited = asyncio.run(
        send_email.enqueue_async(outbox, conn, tenant="b", payload=SendEmail(to="b"), delay=5)
    )
    assert awaited == "async-ref"
    assert outbox.calls == [
        ("sync", conn, tenantq.EnqueueRequest("send_email", "acme", SendEmail(to="a"))),
        ("async", conn, tenantq.EnqueueRequest("send_email", "b", SendEmail(to="b"), delay=5)),
    ]


def test_a_target_that_cannot_enqueue_is_a_clear_error() -> None:
    app = tenantq.App()
    send_email = app.job("send_email")(lambda ctx, payload: None)
    with pytest.raises(TypeError, match="through a producer"):
        send_email.enqueue(object(), tenant="a", payload={})  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="or an outbox and a connection"):
        send_email.enqueue(RecordingOutbox(), tenant="a", payload={})  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="through an outbox"):
        send_email.enqueue(object(), object(), tenant="a", payload={})  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="needs a producer"):
        asyncio.run(send_email.enqueue_async(object(), tenant="a", payload={}))  # type: ignore[call-overload]
