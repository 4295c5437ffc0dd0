"""HandlerRunner's own resources: what it opens, its stop closes."""

from __future__ import annotations

import gc
import warnings

from tenantq.consumer.runner import HandlerRunner


def test_a_stopped_runner_leaves_no_event_loop_for_the_collector() -> None:
    # A loop left to the collector is closed in its ``__del__``, where its self-pipe may
    # already be gone: an error pytest reports at exit, after every test has passed.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner = HandlerRunner(2, lambda task: None)
        runner.stop(timeout=2)
        runner.stop(timeout=2)  # a second stop is harmless
        del runner
        gc.collect()
    unclosed = [w for w in caught if "unclosed event loop" in str(w.message)]
    assert unclosed == []
