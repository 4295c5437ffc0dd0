"""The benchmarks' machine-speed reading: the reference work, the fastest pass kept, and the
line the reports print."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

import machine_speed  # noqa: E402


def test_the_reference_work_touches_every_tenant_key() -> None:
    assert machine_speed.reference_work(10) == 10
    assert machine_speed.reference_work(5_000) == 200


def test_the_fastest_pass_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    # Passes of 3 s, 1 s and 2 s (start, end pairs): 1 s over 1,000 steps is 1,000 µs a step.
    clock = iter([0.0, 3.0, 10.0, 11.0, 20.0, 22.0])
    monkeypatch.setattr(machine_speed.time, "perf_counter", lambda: next(clock))
    speed = machine_speed.measure(steps=1_000, passes=3)
    assert speed.step_micros == pytest.approx(1_000.0)


def test_a_real_reading_names_the_machine() -> None:
    speed = machine_speed.measure(steps=2_000, passes=2)
    assert speed.step_micros > 0
    assert speed.cores >= 1
    line = speed.describe("at the start")
    assert line.startswith("Machine speed at the start: ")
    assert f"{speed.step_micros:.3f} µs per reference Python step (best of 2 × 2,000;" in line
    assert speed.cpu in line
