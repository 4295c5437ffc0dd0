"""The cyclic garbage collector in a worker's long-lived processes (the group member and its
handler process).

Every job allocates a few dozen container objects (the message, its envelope and work item,
the claim row, the lease, the task and its context, the result), and at Python's default
threshold the young generation is collected after every 700 net allocations: about 1,000
collections per 60,000 jobs, 7% of the member's CPU in ``throughput_bench`` (c128). Almost all
of those objects are freed by reference counting before a collection could matter, so a young
generation of 20,000 costs 1.4% instead, with pauses of a few milliseconds at most.
"""

from __future__ import annotations

import gc

#: Net allocations between two collections of the young generation (Python's default: 700).
YOUNG_GENERATION_THRESHOLD = 20_000
#: Young collections per middle one, and middle per full one (Python's default: 10 and 10).
OLDER_GENERATION_THRESHOLD = 20


def settle_collector() -> None:
    """Once the process has built what it keeps for its life (modules, the app, the worker):
    move that out of the collector's sight (``gc.freeze``: a full collection then walks only
    what was made since, and under a flood holds the poll loop for milliseconds, not a tenth
    of a second) and collect the young generation less often."""
    gc.freeze()
    gc.set_threshold(
        YOUNG_GENERATION_THRESHOLD, OLDER_GENERATION_THRESHOLD, OLDER_GENERATION_THRESHOLD
    )
