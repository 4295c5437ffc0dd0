"""Unit tests run on no servers, so no ``TENANTQ_*`` variable of the shell running them
(``make test-secure`` exports a secure stack's) may reach the settings they build: a
setting's default is what they assert."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _no_tenantq_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("TENANTQ_")]:
        monkeypatch.delenv(name)
