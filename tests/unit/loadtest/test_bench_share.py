"""The throughput benchmark's share-group runs: ``--share`` spells its configurations as
``--tenantq`` does, and each is compared with the consumer-group run of the same shape in
the same round, never with another round's."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

from bench_run import Measured  # noqa: E402
from bench_share import ShareConfig  # noqa: E402
from bench_tenantq import TenantqConfig  # noqa: E402
from throughput_bench import round_order, share_ratios  # noqa: E402


def measured(system: str, label: str, rate: float, round_number: int) -> Measured:
    return Measured(
        system=system, label=label, command="", jobs=int(rate * 10), first_start=0.0,
        last_finish=10.0, finishes=[], startup_seconds=0.0, cpu=None, cpu_jobs=0,
        round_number=round_number,
    )  # fmt: skip


def test_each_spelling_turns_on_what_it_says() -> None:
    assert ShareConfig.parse("512x1") == ShareConfig(512, 1)
    assert ShareConfig.parse("512x2t") == ShareConfig(512, 2, threads=True)
    assert ShareConfig.parse("64x4ta") == ShareConfig(64, 4, threads=True, asynchronous=True)
    assert ShareConfig.parse("512x2t").label == "share c512 p2 threads"
    assert ShareConfig.parse("512").arguments() == ["--concurrency", "512"]


def test_a_share_run_is_compared_with_the_group_run_of_its_shape_and_round() -> None:
    results = [
        measured("tenantq", "tenantq c512 p1", 4000.0, 1),
        measured("tenantq", "tenantq c512 p1 threads", 8000.0, 1),
        measured("share", "share c512 p1", 2000.0, 1),
        measured("tenantq", "tenantq c512 p1", 5000.0, 2),
        measured("share", "share c512 p1", 2000.0, 2),
        measured("share", "share c64 p1", 1000.0, 2),  # no group run of its shape
    ]
    lines = share_ratios(results, raw_rate=100_000.0, raw_share=50_000.0)
    assert lines == [
        "**share c512 p1 ÷ tenantq c512 p1** (same round): median 0.45, range 0.40-0.50 over "
        "2 round(s).",
        "Raw ShareConsumer of the same topic (implicit acks): 50,000 msg/s, 0.50 of the raw "
        "consumer-group consumer's.",
    ]


def test_each_share_run_sits_next_to_its_group_twin_and_goes_first_every_other_round() -> None:
    group = [TenantqConfig.parse(text) for text in ("default", "512x1", "2048x2t")]
    share = [ShareConfig.parse(text) for text in ("32x1", "512x1")]
    odd = [config for _, config in round_order(1, group, share)]
    even = [config for _, config in round_order(2, group, share)]
    assert odd == [group[0], share[0], group[1], share[1], group[2]]
    assert even == [share[0], group[0], share[1], group[1], group[2]]
    assert [index for index, _ in round_order(1, group, [])] == [0, 1, 2]
