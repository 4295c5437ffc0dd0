"""What the poll thread takes from the queues other threads hand things over in."""

from __future__ import annotations

import queue
from typing import TypeVar

Item = TypeVar("Item")


def take_all(source: queue.SimpleQueue[Item]) -> list[Item]:
    """Everything ``source`` holds now, oldest first, without waiting."""
    taken = []
    while True:
        try:
            taken.append(source.get_nowait())
        except queue.Empty:
            return taken
