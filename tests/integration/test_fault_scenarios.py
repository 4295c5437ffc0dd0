"""Guarantee: under each fault of the suite (``loadtest/faults.py``: worker kill -9, SIGSTOP
past the lease, graceful churn, broker kill -9, Postgres kill -9, a handler that calls
``os._exit``, one idempotency key twice in a batch, a slow database, connections cut
mid-statement, a result held past its lease until the job is taken over, an operator's
row locks held for a minute; and on three brokers with a Postgres standby,
``loadtest/fault_scenarios_cluster.py``: a partition leader killed, a rolling restart, a
failover after the standby lagged, a lane tenant's leader killed), injected several times
while a Zipf multi-tenant workload flows through three ``tenantq worker`` processes, every
acknowledged job ends in exactly one terminal state, every job runs, nothing runs twice where
nothing died and no lease expired (and each duplicate of an expired lease or a lost partition
is accounted for), nothing is left leased, Kafka is consumed to the end and no worker dies
uninvited; among them the issue's measurement, Postgres killed every 8 s six times under
5,000 jobs.

Long (minutes): ``slow`` marker, left out of the default run; ``pytest -m slow`` or
``make faults`` (the same scenarios with a report) runs them. On a private stack."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from private_stack import PrivateStack

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "loadtest"))

import fault_scenarios_cluster  # noqa: E402
import faults  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.private_stack]


@pytest.fixture(scope="module")
def warm_stack(
    private_stack: PrivateStack, tmp_path_factory: pytest.TempPathFactory
) -> PrivateStack:
    """The private stack once the suite's warm-up ran on it (``faults.WARM_UP``): a cold
    broker is slow for minutes, whatever the fault."""
    run_and_check(faults.WARM_UP, private_stack, tmp_path_factory.mktemp("warm-up"))
    return private_stack


@pytest.fixture(scope="module")
def cluster_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateStack]:
    """Three brokers and a PostgreSQL primary with a streaming standby, of this module's own
    (the cluster's scenarios, ``fault_scenarios_cluster``), warmed up."""
    with fault_scenarios_cluster.cluster_stack() as stack:
        run_and_check(faults.WARM_UP, stack, tmp_path_factory.mktemp("warm-up"))
        yield stack


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "name",
    [name for name in faults.SCENARIOS if name not in fault_scenarios_cluster.CLUSTER_SCENARIOS],
)
def test_fault_scenario(name: str, warm_stack: PrivateStack, tmp_path: Path) -> None:
    run_and_check(faults.SCENARIOS[name], warm_stack, tmp_path)


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", list(fault_scenarios_cluster.CLUSTER_SCENARIOS))
def test_cluster_fault_scenario(name: str, cluster_stack: PrivateStack, tmp_path: Path) -> None:
    run_and_check(faults.SCENARIOS[name], cluster_stack, tmp_path)


def run_and_check(scenario: faults.Scenario, stack: PrivateStack, report_dir: Path) -> None:
    run = faults.Run(scenario, stack, faults.SuiteOptions(report_dir))
    result = faults.run_scenario(run)
    faults.console.print(faults.scenario_table(result))
    faults.console.print(faults.checks_table(result))
    failed = [f"{check.name}: {check.detail}" for check in result.checks if not check.ok]
    assert not failed, "\n".join(failed)
