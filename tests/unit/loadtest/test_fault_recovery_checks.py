"""Guarantee: the fault suite's recovery budgets judge every fault: a scenario passes its
throughput and stall budgets only when each fault's figure was measured and the worst is
within the budget, and a scenario without a budget gets no such check."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

import faults  # noqa: E402

SCENARIO = faults.Scenario(
    "budgets",
    "none",
    "both budgets",
    repeat=2,
    interval=1.0,
    jobs=10,
    stall_budget=3.0,
    rate_budget=5.0,
)


def event(index: int, stall: float | None, rate_back: float | None) -> faults.FaultEvent:
    return faults.FaultEvent(index, "none", 0.0, "", stall=stall, rate_back=rate_back)


def verdicts(events: list[faults.FaultEvent]) -> list[tuple[str, bool]]:
    return [(check.name, check.ok) for check in faults._recovery_checks(SCENARIO, events)]


def test_within_both_budgets_passes_both() -> None:
    assert verdicts([event(0, 1.0, 2.0), event(1, 3.0, 5.0)]) == [
        ("throughput kept (back to 80% within 5s)", True),
        ("recovery within budget (partition stall <= 3s)", True),
    ]


def test_a_worst_fault_past_its_budget_fails_that_check_alone() -> None:
    assert [ok for _, ok in verdicts([event(0, 1.0, 2.0), event(1, 3.5, 5.0)])] == [True, False]
    assert [ok for _, ok in verdicts([event(0, 1.0, 6.0), event(1, 3.0, 5.0)])] == [False, True]


def test_a_fault_whose_rate_never_came_back_fails() -> None:
    checks = faults._recovery_checks(SCENARIO, [event(0, 1.0, None), event(1, 1.0, 1.0)])
    assert [check.ok for check in checks] == [False, True]
    assert checks[0].detail == "slowest 1.00s; per fault {1: None, 2: 1.0}"


def test_no_fault_passes_nothing_and_no_budget_checks_nothing() -> None:
    assert [ok for _, ok in verdicts([])] == [False, False]
    unpromised = faults.Scenario("plain", "none", "no budget", repeat=1, interval=1.0, jobs=10)
    assert faults._recovery_checks(unpromised, [event(0, 99.0, None)]) == []
