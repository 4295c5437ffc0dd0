"""Objects that hold a connection or threads and are used in a ``with`` block."""

from __future__ import annotations

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
