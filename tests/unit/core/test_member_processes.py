"""How many member processes ``tenantq worker`` starts when not told: one per CPU the worker
may run on, at most four; ``TENANTQ_WORKER__PROCESSES`` (or ``--processes``) decides
otherwise."""

from __future__ import annotations

import os

import pytest

from tenantq import settings as settings_module
from tenantq.settings import DEFAULT_PROCESSES_CAP, Settings, WorkerSettings


@pytest.mark.parametrize(("cpus", "members"), [(1, 1), (2, 2), (3, 3), (4, 4), (16, 4)])
def test_one_member_per_cpu_up_to_the_cap(
    monkeypatch: pytest.MonkeyPatch, cpus: int, members: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    assert DEFAULT_PROCESSES_CAP == 4
    assert WorkerSettings().member_processes() == members


def test_the_cpus_the_process_may_run_on_not_the_machine_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {5}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert settings_module.usable_cpus() == 1
    assert WorkerSettings().member_processes() == 1


def test_without_affinity_the_cpu_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert WorkerSettings().member_processes() == 3


def test_the_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    monkeypatch.setenv("TENANTQ_WORKER__PROCESSES", "7")
    assert Settings().worker.member_processes() == 7
    monkeypatch.setenv("TENANTQ_WORKER__PROCESSES", "0")
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        Settings()
