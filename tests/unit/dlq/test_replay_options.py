"""A replay's options are checked when made, so the CLI, the console and code refuse the same
values with the same one-line error, before anything is read or written."""

from __future__ import annotations

import math

import pytest

from tenantq.dlq.replay import ReplayOptions
from tenantq.errors import ConfigurationError


@pytest.mark.parametrize("rate", [0.0, -1.0, math.nan, math.inf])
def test_a_rate_no_replay_can_keep_to_is_refused(rate: float) -> None:
    with pytest.raises(ConfigurationError, match="publishes per second"):
        ReplayOptions(rate=rate)


def test_a_negative_canary_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="canary must be zero or more"):
        ReplayOptions(canary=-1)


def test_the_defaults_replay_everything_at_once_to_the_main_topic() -> None:
    options = ReplayOptions()
    assert (options.dry_run, options.rate, options.canary, options.to) == (False, None, 0, "main")
    assert ReplayOptions(rate=0.5, canary=3).rate == 0.5
