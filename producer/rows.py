"""``Rows``: a read-only sequence kept as columns, each row made when it is read.

The producer's batches keep their jobs and their ``JobRef`` as columns of atomic values
rather than a tuple per job, which the cyclic GC would count and scan while the batch waits
(``PreparedJobs``, ``JobRefs``). Both still behave as the list they stand for.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["Rows"]

RowT = TypeVar("RowT")


class Rows(Sequence[RowT]):
    """A read-only sequence whose subclass keeps columns and makes a row when one is read:
    equal to a sequence of its own kind, a list or a tuple of the same rows (as the list it
    stands for would be), unhashable as that list is, and shown as its rows."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, type(self) | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self)!r})"
