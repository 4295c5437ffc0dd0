"""``tenantq stats`` formatting: ages read at a glance, and a database that cannot be reached
is one line and exit code 2, not a traceback."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tenantq.cli import app
from tenantq.cli.stats import format_age


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.25, "250ms"), (42.4, "42s"), (425, "7m05s"), (11_520, "3h12m")],
)
def test_format_age(seconds: float | None, text: str) -> None:
    assert format_age(seconds) == text


def test_unreachable_database_is_one_line_without_the_password() -> None:
    result = CliRunner().invoke(
        app,
        ["stats", "--json"],
        env={"TENANTQ_DATABASE_URL": "postgresql://app:hunter2@127.0.0.1:1/jobs"},
    )
    assert result.exit_code == 2
    assert "tenantq: PostgreSQL at 127.0.0.1:1/jobs: connection failed" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "hunter2" not in result.output
    assert "Traceback" not in result.output
