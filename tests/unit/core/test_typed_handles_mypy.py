"""mypy (strict, the project's own configuration) accepts every enqueue form of a typed job
handle with the right payload model and rejects each with a wrong one, where it is called."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[3]

#: Each line that must be rejected ends in ``# rejected: <what the error names>``.
SNIPPET = textwrap.dedent(
    """
    from __future__ import annotations

    from typing import Any

    import psycopg
    from pydantic import BaseModel

    import tenantq
    from tenantq.outbox.outbox import OutboxRef
    from tenantq.producer.producer import JobRef


    class SendEmail(BaseModel):
        to: str


    class Resize(BaseModel):
        width: int


    app = tenantq.App()


    @app.job("send_email", max_attempts=8)
    def send_email(ctx: tenantq.JobContext, payload: SendEmail) -> None:
        return None


    @app.job("resize", model=Resize)
    def resize(ctx: Any, payload: Any) -> int:
        return payload.width  # type: ignore[no-any-return]


    def right(
        producer: tenantq.Producer, outbox: tenantq.Outbox, conn: psycopg.Connection[Any]
    ) -> None:
        ref: JobRef = send_email.enqueue(producer, tenant="a", payload=SendEmail(to="x")).result()
        written: OutboxRef = send_email.enqueue(outbox, conn, tenant="a", payload=SendEmail(to="x"))
        resize.enqueue(producer, tenant="a", payload=Resize(width=3), delay=5, max_attempts=2)
        producer.enqueue_batch([send_email.request(tenant="a", payload=SendEmail(to="x"))])
        producer.enqueue_many([resize.request(tenant="a", payload=Resize(width=1))])
        producer.enqueue("send_email", tenant="a", payload={"to": "x"})
        ran: int = resize(None, Resize(width=1))


    async def right_async(
        producer: tenantq.Producer, outbox: tenantq.Outbox, conn: psycopg.AsyncConnection[Any]
    ) -> None:
        mail = SendEmail(to="x")
        ref: JobRef = await send_email.enqueue_async(producer, tenant="a", payload=mail)
        written: OutboxRef = await send_email.enqueue_async(
            outbox, conn, tenant="a", payload=SendEmail(to="x")
        )


    def wrong(
        producer: tenantq.Producer, outbox: tenantq.Outbox, conn: psycopg.Connection[Any]
    ) -> None:
        mail = SendEmail(to="x")
        send_email.enqueue(producer, tenant="a", payload=Resize(width=1))  # rejected: "Resize"
        send_email.enqueue(outbox, conn, tenant="a", payload=Resize(width=1))  # rejected: "Resize"
        send_email.request(tenant="a", payload=Resize(width=1))  # rejected: expected "SendEmail"
        resize.enqueue(producer, tenant="a", payload={"width": 1})  # rejected: "dict[str, int]"
        send_email.enqueue(outbox, tenant="a", payload=mail)  # rejected: "Outbox"
        send_email.enqueue(producer, tenant="a", payload=mail, delay="soon")  # rejected: "str"
        ref: OutboxRef = send_email.enqueue(producer, tenant="a", payload=mail)  # rejected: "Future


    async def wrong_async(producer: tenantq.Producer) -> None:
        size = Resize(width=1)
        await send_email.enqueue_async(producer, tenant="a", payload=size)  # rejected: "Resize"
    """
)


def test_mypy_accepts_the_right_model_and_rejects_a_wrong_one(tmp_path: Path) -> None:
    snippet = tmp_path / "typed_handles_snippet.py"
    snippet.write_text(SNIPPET)
    out, err, status = api.run(
        [
            "--config-file",
            str(ROOT / "pyproject.toml"),
            # The project's cache (``make typecheck`` fills it): tenantq is not checked again.
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--no-error-summary",
            "--show-error-codes",
            "--hide-error-context",
            str(snippet),
        ]
    )
    assert err == ""
    errors: dict[int, list[str]] = {}
    for line in out.splitlines():
        # By file name: for a module unchanged since the cache, mypy names the path it had.
        found = re.match(rf".*{re.escape(snippet.name)}:(\d+): error: (.*)$", line)
        if found:
            errors.setdefault(int(found.group(1)), []).append(found.group(2))
    expected = {
        number: marker.split("# rejected: ", 1)[1]
        for number, marker in enumerate(SNIPPET.splitlines(), start=1)
        if "# rejected: " in marker
    }
    # Every right form type-checks: errors only on the lines marked rejected.
    assert set(errors) == set(expected), out
    for number, names in expected.items():
        message = " ".join(errors[number])
        assert names in message, f"line {number}: {message!r} does not name {names}"
    assert status == 1
    # The wrong model is the error: with the right one, the same call passes (above).
    assert any(
        "incompatible type" in message for messages in errors.values() for message in messages
    )
