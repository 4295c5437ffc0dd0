"""The rules of a tenant's limits (``tenantq_tenants``, ``tenantq tenants set``, the settings'
``tenant_defaults``): their bounds, what a scope may name, and why a claim refuses a job.

One place for all of them: the table's CHECK constraints, the settings' validation, the CLI,
the console and the API derive theirs from here, so an absurd value gets the same answer at
every door.
"""

from __future__ import annotations

import enum
import math

#: '*' in a limit's queue or job type: any. Neither a queue name nor a job type can be '*'.
ANY = "*"

#: The largest cap of attempts running at once (fleet-wide).
MOST_RUNNING = 1_000_000
#: The largest start rate, per second.
MOST_RATE = 1_000_000.0
#: The largest burst of starts above the rate.
MOST_BURST = 1_000_000
#: The largest weight (a queue's weight has the same bound).
MOST_WEIGHT = 1_000

#: The patterns the table's CHECKs repeat (POSIX regular expressions, anchored): a tenant id
#: (``tenantq.tenant_ids``), a queue name (``Settings.queues``), a job type
#: (``tenantq.app.JOB_TYPE_PATTERN``). A unit test keeps them in step with the originals.
TENANT_ID_CHECK = "^[A-Za-z0-9._:-]{1,128}$"
QUEUE_NAME_CHECK = "^[A-Za-z0-9_-]{1,64}$"
JOB_TYPE_CHECK = "^[A-Za-z0-9_.:-]{1,128}$"


class ThrottleReason(enum.StrEnum):
    """Why the claim left a job waiting (a metric label, a log field, a column value)."""

    #: The tenant (or the row's queue or job type) runs its ``max_running`` already.
    MAX_RUNNING = "max_running"
    #: Starting it now would go past the ``rate`` and its ``burst``.
    RATE = "rate"
    #: The tenant is ahead of its share by weight of a queue other tenants wait for.
    WEIGHT = "weight"


class LimitError(ValueError):
    """A limit outside its bounds, said in a sentence an operator can act on."""


def check_max_running(value: object) -> int:
    """``value`` as a cap of attempts running at once, 1 to ``MOST_RUNNING``."""
    return _whole_within(value, "max running", MOST_RUNNING)


def check_rate(value: object) -> float:
    """``value`` as starts per second, above 0 and at most ``MOST_RATE``."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise LimitError(f"rate must be a number of starts per second, got {_shown(value)}")
    try:
        rate = float(value)
    except ValueError:
        raise LimitError(
            f"rate must be a number of starts per second, got {_shown(value)}"
        ) from None
    if not math.isfinite(rate) or not 0 < rate <= MOST_RATE:
        raise LimitError(f"rate must be above 0 and at most {MOST_RATE:,.0f}, got {_shown(value)}")
    return rate


def check_burst(value: object) -> int:
    """``value`` as a burst of starts, 1 to ``MOST_BURST``."""
    return _whole_within(value, "burst", MOST_BURST)


def check_weight(value: object) -> int:
    """``value`` as a weight, 1 to ``MOST_WEIGHT``."""
    return _whole_within(value, "weight", MOST_WEIGHT)


def _whole_within(value: object, name: str, most: int) -> int:
    number = _whole(value, name)
    if not 1 <= number <= most:
        raise LimitError(f"{name} must be 1 to {most:,}, got {number}")
    return number


def _whole(value: object, name: str) -> int:
    if isinstance(value, bool):
        raise LimitError(f"{name} must be a whole number, got {_shown(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit() and len(value) <= 20:
        return int(value)
    raise LimitError(f"{name} must be a whole number, got {_shown(value)}")


def _shown(value: object) -> str:
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:39] + "…"
