"""Closing: objects that hold a connection or threads and are used in a ``with`` block, calls
that may hang run with a bound, and closing steps run in order."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Self


class ClosedOnExit:
    """Closed when the ``with`` block that entered it ends, however it ends."""

    def close(self) -> None:
        """Let go of what the object holds; a subclass says what."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def finished_within(call: Callable[[], object], seconds: float, name: str) -> bool:
    """Run ``call`` in a daemon thread called ``name`` and wait at most ``seconds`` for it;
    False when it had not finished by then (it carries on while the process lives). For
    client calls that can hang on a broker that is away (``close``, a synchronous commit)."""
    thread = threading.Thread(target=call, name=name, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive()


def close_in_order(steps: Iterable[Callable[[], object]], log: logging.Logger, what: str) -> None:
    """Run each closing step, logging and passing over one that fails: a step that fails
    must not keep the later ones (leaving a group, a registration) from running."""
    for step in steps:
        try:
            step()
        except Exception:
            log.exception("error while stopping the %s", what)
