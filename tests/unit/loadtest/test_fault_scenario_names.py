"""Guarantee: the fault suite's scenarios are keyed by name, and a name given twice is refused
rather than one scenario silently replacing another in ``--scenario``'s choices."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

import faults  # noqa: E402


def test_scenarios_are_keyed_by_their_names() -> None:
    assert all(name == scenario.name for name, scenario in faults.SCENARIOS.items())
    assert {"worker-kill", "leader-kill", faults.slow_database(50).name} <= set(faults.SCENARIOS)


def test_a_name_given_twice_is_refused() -> None:
    twice = [faults.slow_database(50), faults.slow_database(500), faults.slow_database(50)]
    with pytest.raises(ValueError, match="database-slow-50ms"):
        faults.scenarios_by_name(*twice)
