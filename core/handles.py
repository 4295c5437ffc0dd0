"""Typed job handles: what ``@app.job(...)`` returns.

A handle names one job type and carries the type of its payload, taken from the handler's
annotation or the decorator's ``model``, to every enqueue call, so that mypy finds a wrong
payload model where the job is enqueued::

    @app.job("send_email", max_attempts=8)
    def send_email(ctx: tenantq.JobContext, payload: SendEmail) -> None: ...

    send_email.enqueue(producer, tenant="acme", payload=SendEmail(to="a@example.com"))
    send_email.enqueue(outbox, conn, tenant="acme", payload=SendEmail(...))  # conn's transaction
    await send_email.enqueue_async(producer, tenant="acme", payload=SendEmail(...))
    producer.enqueue_batch([send_email.request(tenant=t, payload=p) for t, p in jobs])

| form                                 | calls                              | returns            |
| ------------------------------------ | ---------------------------------- | ------------------ |
| ``enqueue(producer, ...)``           | ``producer.enqueue_many([r])[0]``  | ``Future[JobRef]`` |
| ``enqueue(outbox, conn, ...)``       | ``outbox.enqueue_request(conn, r)``| ``OutboxRef``      |
| ``enqueue_async(producer, ...)``     | ``producer.enqueue_async(...)``    | ``JobRef``         |
| ``enqueue_async(outbox, conn, ...)`` | ``outbox.enqueue_request_async``   | ``OutboxRef``      |
| ``request(...)``                     | nothing: a value for a batch       | ``EnqueueRequest`` |

The handle is duck-typed on what it is given (the small protocols below), so anything with
the same methods works too (``tenantq.testing.RecordingProducer``). Validation is that of the
call it makes: the same errors, raised at the call. Calling the handle runs the handler
(``send_email(ctx, payload)``), as calling the decorated function did. The job type's name
keeps working everywhere a string is taken (``producer.enqueue("send_email", ...)``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar, Unpack, overload

from tenantq.enqueue_request import EnqueueOptions, EnqueueRequest

__all__ = [
    "AsyncPublisher",
    "AsyncTransactionalPublisher",
    "JobHandle",
    "Publisher",
    "TransactionalPublisher",
]

PayloadT = TypeVar("PayloadT")
ResultT = TypeVar("ResultT")
RefT = TypeVar("RefT")
RefT_co = TypeVar("RefT_co", covariant=True)


class Publisher(Protocol[RefT_co]):
    """Publishes a batch of requests, one ref per request (``tenantq.Producer``)."""

    def enqueue_many(self, requests: Iterable[EnqueueRequest], /) -> Sequence[RefT_co]: ...


class AsyncPublisher(Protocol[RefT_co]):
    """Publishes one job for asyncio code (``tenantq.Producer.enqueue_async``)."""

    def enqueue_async(self, job_type: str, **arguments: Any) -> Awaitable[RefT_co]: ...


class TransactionalPublisher(Protocol[RefT_co]):
    """Writes one job in the caller's open transaction (``tenantq.Outbox``)."""

    def enqueue_request(self, conn: Any, request: EnqueueRequest, /) -> RefT_co: ...


class AsyncTransactionalPublisher(Protocol[RefT_co]):
    """Writes one job in the caller's open async transaction (``tenantq.Outbox``)."""

    def enqueue_request_async(
        self, conn: Any, request: EnqueueRequest, /
    ) -> Awaitable[RefT_co]: ...


#: No connection given: the target publishes on its own (a producer).
_NO_CONNECTION: Any = object()


class JobHandle(Generic[PayloadT, ResultT]):
    """A registered job type, typed by its payload (``PayloadT``) and by what its handler
    returns (``ResultT``). Made by ``App.job``; see the module docstring for its forms."""

    def __init__(
        self,
        name: str,
        queue: str,
        handler: Callable[..., ResultT],
        model: type[Any] | None,
    ) -> None:
        #: The job type's name, as string-named enqueue calls take it.
        self.name = name
        #: The queue its jobs go to unless a call names another.
        self.queue = queue
        #: The function the decorator was given.
        self.handler = handler
        #: The payload model the job type validates with (None: plain JSON).
        self.model = model
        functools.update_wrapper(self, handler)

    def __call__(self, *args: Any, **kwargs: Any) -> ResultT:
        """Run the handler with these arguments, as calling the decorated function did."""
        return self.handler(*args, **kwargs)

    def __repr__(self) -> str:
        model = self.model.__name__ if self.model is not None else "JSON"
        return f"<JobHandle {self.name!r} queue={self.queue!r} payload={model}>"

    def request(
        self, *, tenant: str, payload: PayloadT, **options: Unpack[EnqueueOptions]
    ) -> EnqueueRequest:
        """This job type's ``EnqueueRequest``: one element of a batch for
        ``Producer.enqueue_many`` / ``enqueue_batch``, checked when that is called."""
        return EnqueueRequest(job_type=self.name, tenant=tenant, payload=payload, **options)

    @overload
    def enqueue(
        self,
        producer: Publisher[RefT],
        /,
        *,
        tenant: str,
        payload: PayloadT,
        **options: Unpack[EnqueueOptions],
    ) -> RefT: ...

    @overload
    def enqueue(
        self,
        outbox: TransactionalPublisher[RefT],
        conn: Any,
        /,
        *,
        tenant: str,
        payload: PayloadT,
        **options: Unpack[EnqueueOptions],
    ) -> RefT: ...

    def enqueue(
        self,
        target: Any,
        conn: Any = _NO_CONNECTION,
        /,
        *,
        tenant: str,
        payload: PayloadT,
        **options: Unpack[EnqueueOptions],
    ) -> Any:
        """Enqueue one job: ``enqueue(producer, ...)`` publishes it (a future of its
        ``JobRef``, as ``Producer.enqueue``); ``enqueue(outbox, conn, ...)`` writes it in
        ``conn``'s open transaction (its ``OutboxRef``, as ``Outbox.enqueue``). Raises what
        those raise, at once, for a request they refuse."""
        request = self.request(tenant=tenant, payload=payload, **options)
        if conn is _NO_CONNECTION:
            return _publisher(target).enqueue_many([request])[0]
        return _transactional(target, "enqueue_request").enqueue_request(conn, request)

    @overload
    async def enqueue_async(
        self,
        producer: AsyncPublisher[RefT],
        /,
        *,
        tenant: str,
        payload: PayloadT,
        **options: Unpack[EnqueueOptions],
    ) -> RefT: ...

    @overload
    async def enqueue_async(
        self,
        outbox: AsyncTransactionalPublisher[RefT],
        conn: Any,
        /,
        *,
        tenant: str,
        payload: PayloadT,
        **options: Unpack[EnqueueOptions],
    ) -> RefT: ...

    async def enqueue_async(
        self,
        target: Any,
        conn: Any = _NO_CONNECTION,
        /,
        *,
        tenant: str,
        payload: PayloadT,
        **options: Unpack[EnqueueOptions],
    ) -> Any:
        """``enqueue`` for asyncio code: ``await enqueue_async(producer, ...)`` is the
        acknowledged ``JobRef`` (``Producer.enqueue_async``); ``await enqueue_async(outbox,
        conn, ...)`` writes the job in the transaction of a psycopg ``AsyncConnection``."""
        if conn is _NO_CONNECTION:
            if not callable(getattr(target, "enqueue_async", None)):
                raise TypeError(f"{self.name}.enqueue_async needs a producer, got {target!r}")
            return await target.enqueue_async(self.name, tenant=tenant, payload=payload, **options)
        request = self.request(tenant=tenant, payload=payload, **options)
        transactional = _transactional(target, "enqueue_request_async")
        return await transactional.enqueue_request_async(conn, request)


def _publisher(target: object) -> Any:
    if not callable(getattr(target, "enqueue_many", None)):
        raise TypeError(
            f"a job handle enqueues through a producer (or an outbox and a connection), "
            f"got {target!r}"
        )
    return target


def _transactional(target: object, method: str) -> Any:
    if not callable(getattr(target, method, None)):
        raise TypeError(
            f"a job handle given a connection enqueues through an outbox, got {target!r}"
        )
    return target
