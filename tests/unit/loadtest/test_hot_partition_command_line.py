"""``loadtest/hot_partition.py``'s options reach the run: each one the command line names lands
in the run's knobs, options or shape, ``--single-producer`` among them; and without options
the run has the defaults the isolation targets are measured with."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

import hot_partition  # noqa: E402
from hot_partition import WORKERS, Knobs, Options, Scenario, Shape  # noqa: E402


def options_of(arguments: list[str], monkeypatch: pytest.MonkeyPatch) -> Options:
    """The options ``hot_partition.py ARGUMENTS`` would run its scenarios with."""
    handed: list[Options] = []

    def run_all(chosen: Sequence[Scenario], options: Options) -> None:
        handed.append(options)
        raise KeyboardInterrupt  # the tool's own way out, before anything runs

    monkeypatch.setattr(hot_partition, "run_all", run_all)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        assert hot_partition.main(arguments) == 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    (options,) = handed
    return options


def test_every_option_reaches_the_runs_options(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Every knob twice its default, through the option named after it.
    knobs = Knobs(**{name: 2 * value for name, value in vars(Knobs()).items()})
    arguments = [f"--{name.replace('_', '-')}={value}" for name, value in vars(knobs).items()]
    arguments += ["--seed", "9", "--capacity", "900", "--saturation-jobs", "123"]
    arguments += ["--drain-timeout", "45", "--keep", "--handler-starts", "--until-released"]
    arguments += ["--single-producer", "--report-dir", str(tmp_path)]
    arguments += ["--workers", "3", "--concurrency", "16", "--partitions", "6"]
    options = options_of(arguments, monkeypatch)
    assert options.knobs == knobs
    assert (options.seed, options.capacity, options.saturation_jobs) == (9, 900.0, 123)
    assert options.drain_timeout == 45.0
    assert options.keep and options.handler_starts and options.until_released
    assert options.single_producer
    assert (options.report_dir, options.shape) == (tmp_path, Shape(3, 16, 6))


def test_without_options_a_run_has_the_measured_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    options = options_of(["--report-dir", str(tmp_path)], monkeypatch)
    assert options == Options(report_dir=tmp_path, shape=Shape(WORKERS))
