"""The application: a registry of job types and their handlers.

``App`` is shared by producers (to validate payloads at the call site) and workers (to run
handlers). A service that only enqueues may use an ``App`` with models and no handlers, or
none at all.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict, TypeVar, Unpack, overload

from pydantic import BaseModel

from tenantq.errors import ConfigurationError, UnknownJobType
from tenantq.handles import JobHandle
from tenantq.schedules import Schedule, ScheduleOptions, make_schedule
from tenantq.settings import Settings, load_settings

JOB_TYPE_PATTERN = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")

Handler = Callable[..., Any]
PayloadT = TypeVar("PayloadT")
ResultT = TypeVar("ResultT")
ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass(frozen=True)
class JobType:
    """One kind of job: its name, payload model, handler and execution limits."""

    name: str
    queue: str
    handler: Handler | None
    model: type[BaseModel] | None
    max_attempts: int | None = None
    timeout: float | None = None
    concurrency: int | None = None
    #: Slots one tenant's jobs of this type may hold in a worker at once (overrides the
    #: worker's ``tenant_max_share`` for this type).
    tenant_concurrency: int | None = None
    #: Exception types that are never retried (dead at once) / always retried.
    never_retry_on: tuple[type[BaseException], ...] = ()
    retry_on: tuple[type[BaseException], ...] = ()
    #: Retry budgets per error class: an error of that class (or a subclass) ends the job
    #: dead once the attempt number reaches the budget, whatever ``max_attempts`` says.
    retry_budgets: tuple[tuple[type[BaseException], int], ...] = ()
    #: Names of downstream dependencies (rate limits and circuit breakers apply per name).
    dependencies: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def is_async(self) -> bool:
        """The handler is a coroutine function (asked per job: looked at once)."""
        return self.handler is not None and inspect.iscoroutinefunction(self.handler)


class JobOptions(TypedDict, total=False):
    """The keyword arguments of ``App.job`` besides the model, as ``JobType`` keeps them
    (each an iterable there, a tuple here)."""

    queue: str
    max_attempts: int | None
    timeout: float | None
    concurrency: int | None
    tenant_concurrency: int | None
    never_retry_on: Iterable[type[BaseException]]
    retry_on: Iterable[type[BaseException]]
    retry_budgets: dict[type[BaseException], int] | None
    dependencies: Iterable[str]


class App:
    """A tenantq application: settings plus the registered job types.

    >>> app = App()
    >>> @app.job("send_email", queue="default", max_attempts=8, timeout=30)
    ... def send_email(ctx, payload): ...
    >>> send_email.name
    'send_email'
    """

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings
        self._job_types: dict[str, JobType] = {}
        self._dependencies: dict[str, dict[str, Any]] = {}
        self._schedules: dict[str, Schedule] = {}

    @property
    def settings(self) -> Settings:
        """The settings given at construction, else loaded from ``TENANTQ_*`` on first use."""
        if self._settings is None:
            self._settings = load_settings()
        return self._settings

    # The two forms differ only in where the payload's type comes from: the handler's
    # annotation, or the model given.
    @overload
    def job(
        self, name: str, *, model: None = None, **options: Unpack[JobOptions]
    ) -> Callable[[Callable[[Any, PayloadT], ResultT]], JobHandle[PayloadT, ResultT]]: ...

    @overload
    def job(
        self, name: str, *, model: type[ModelT], **options: Unpack[JobOptions]
    ) -> Callable[[Callable[[Any, ModelT], ResultT]], JobHandle[ModelT, ResultT]]: ...

    def job(
        self,
        name: str,
        *,
        queue: str = "default",
        model: type[BaseModel] | None = None,
        max_attempts: int | None = None,
        timeout: float | None = None,
        concurrency: int | None = None,
        tenant_concurrency: int | None = None,
        never_retry_on: Iterable[type[BaseException]] = (),
        retry_on: Iterable[type[BaseException]] = (),
        retry_budgets: dict[type[BaseException], int] | None = None,
        dependencies: Iterable[str] = (),
    ) -> Callable[[Callable[[Any, Any], Any]], JobHandle[Any, Any]]:
        """Register the decorated function as the handler of job type ``name``; the decorator
        returns the job's typed handle (``tenantq.handles.JobHandle``), which enqueues it
        (``send_email.enqueue(producer, tenant=..., payload=...)``) and, called, runs the
        handler as the function did.

        The payload model is ``model`` or, when omitted, the annotation of the handler's
        second parameter if it is a pydantic model; the handle's payload type is the same
        (the annotation, whatever it is, when there is no model).
        """

        def decorate(handler: Callable[[Any, Any], Any]) -> JobHandle[Any, Any]:
            if isinstance(handler, JobHandle):  # one function registered under two names
                handler = handler.handler
            resolved_model = model or _model_from_annotation(handler)
            self.register(
                JobType(
                    name=name,
                    queue=queue,
                    handler=handler,
                    model=resolved_model,
                    max_attempts=max_attempts,
                    timeout=timeout,
                    concurrency=concurrency,
                    tenant_concurrency=tenant_concurrency,
                    never_retry_on=tuple(never_retry_on),
                    retry_on=tuple(retry_on),
                    retry_budgets=tuple((retry_budgets or {}).items()),
                    dependencies=tuple(dependencies),
                )
            )
            return JobHandle(name, queue, handler, resolved_model)

        return decorate

    def dependency(
        self,
        name: str,
        *,
        rate: float | None = None,
        burst: int = 10,
        failure_rate: float = 0.5,
        minimum_calls: int = 10,
        window: int = 50,
        open_seconds: float = 30.0,
        probes: int = 1,
    ) -> None:
        """Declare the limits of a downstream dependency that handlers name in
        ``dependencies=[...]``: a token bucket (``rate`` calls per second, ``burst``) and a
        circuit breaker (opens at ``failure_rate`` over the last ``window`` calls, at least
        ``minimum_calls``; half-opens after ``open_seconds`` with ``probes`` trial calls)."""
        self._dependencies[name] = {
            "rate": rate,
            "burst": burst,
            "failure_rate": failure_rate,
            "minimum_calls": minimum_calls,
            "window": window,
            "open_seconds": open_seconds,
            "probes": probes,
        }

    def periodic(self, name: str, **declaration: Unpack[ScheduleOptions]) -> None:
        """Enqueue a ``job_type`` job for ``tenant`` on a schedule: ``every`` seconds (or a
        ``timedelta``, ticks at whole multiples since the epoch) or at each match of a
        five-field ``cron`` expression (UTC). Every ``tenantq worker`` of this app schedules,
        and each tick still makes one job. Ticks missed while no worker ran are skipped
        unless ``catch_up``. ``name`` is unique per deployment (``tenantq periodic list``)."""
        if name in self._schedules:
            raise ConfigurationError(f"periodic {name!r} is declared twice")
        self._schedules[name] = make_schedule(name, **declaration)

    @property
    def schedules(self) -> dict[str, Schedule]:
        """The periodic schedules, by name."""
        return dict(self._schedules)

    @property
    def dependencies(self) -> dict[str, dict[str, Any]]:
        return dict(self._dependencies)

    def register(self, job_type: JobType) -> None:
        """Add a job type (with or without handler). Names are unique."""
        if not JOB_TYPE_PATTERN.fullmatch(job_type.name):
            raise ConfigurationError(
                f"job type {job_type.name!r} must match {JOB_TYPE_PATTERN.pattern}"
            )
        if job_type.max_attempts is not None and job_type.max_attempts < 1:
            raise ConfigurationError(f"job type {job_type.name!r}: max_attempts must be >= 1")
        if job_type.timeout is not None and not job_type.timeout > 0:
            raise ConfigurationError(f"job type {job_type.name!r}: timeout must be > 0")
        for error_class, budget in job_type.retry_budgets:
            if budget < 1:
                raise ConfigurationError(
                    f"job type {job_type.name!r}: the retry budget of "
                    f"{error_class.__name__} must be >= 1"
                )
        if job_type.concurrency is not None and job_type.concurrency < 1:
            raise ConfigurationError(f"job type {job_type.name!r}: concurrency must be >= 1")
        if job_type.tenant_concurrency is not None and job_type.tenant_concurrency < 1:
            raise ConfigurationError(f"job type {job_type.name!r}: tenant_concurrency must be >= 1")
        if job_type.name in self._job_types:
            raise ConfigurationError(f"job type {job_type.name!r} is registered twice")
        self._job_types[job_type.name] = job_type

    def job_type(self, name: str) -> JobType:
        try:
            return self._job_types[name]
        except KeyError:
            raise UnknownJobType(f"unknown job type {name!r}") from None

    def find(self, name: str) -> JobType | None:
        return self._job_types.get(name)

    @property
    def job_types(self) -> dict[str, JobType]:
        return dict(self._job_types)

    def queues(self) -> list[str]:
        """The queues that have at least one registered handler, in registration order."""
        seen: dict[str, None] = {}
        for job_type in self._job_types.values():
            if job_type.handler is not None:
                seen.setdefault(job_type.queue)
        return list(seen)


def resolve_max_attempts(requested: int | None, job_type: JobType | None, default: int) -> int:
    """Max attempts of a job: set at enqueue, else the job type's, else the worker default."""
    return requested or (job_type.max_attempts if job_type is not None else None) or default


def load_app(reference: str) -> App:
    """Import ``module:attribute`` and return the ``tenantq.App`` it names (how a worker's
    handler process, started afresh, finds the same app)."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise ConfigurationError(f"expected MODULE:APP, got {reference!r}")
    if "" not in sys.path:  # the current directory, as `python -m` would have it
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigurationError(f"cannot import {module_name!r}: {error}") from None
    app = getattr(module, attribute, None)
    if not isinstance(app, App):
        raise ConfigurationError(f"{reference!r} is not a tenantq.App")
    return app


def _model_from_annotation(handler: Handler) -> type[BaseModel] | None:
    try:
        hints = inspect.get_annotations(handler, eval_str=True)
    except Exception:  # unresolvable forward references: no model, validated as plain JSON
        return None
    parameters = list(inspect.signature(handler).parameters)
    if len(parameters) < 2:
        return None
    annotation = hints.get(parameters[1])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None
