"""The raw readers' rate (``bench_topics.reading_rate``): counted from the first message read
to the last one wanted, errors not counted, 0.0 when the messages wanted never all come, and
the client closed in every case."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "loadtest"))

from bench_topics import reading_rate  # noqa: E402


class Record:
    def __init__(self, failed: bool = False) -> None:
        self.failed = failed

    def error(self) -> str | None:
        return "broken" if self.failed else None


class Reader:
    """A client whose reads return the given batches, then empty ones."""

    def __init__(self, *batches: list[Record]) -> None:
        self.batches = list(batches)
        self.closed = False

    def read(self) -> list[Record]:
        return self.batches.pop(0) if self.batches else []

    def close(self) -> None:
        self.closed = True


def test_all_messages_read_give_a_positive_rate_and_close_the_client() -> None:
    reader = Reader([], [Record(), Record()], [Record()])
    assert reading_rate(reader.read, reader.close, 3, 5.0) > 0
    assert reader.closed


def test_errors_do_not_count_and_too_few_messages_are_no_rate() -> None:
    reader = Reader([Record(), Record(failed=True)], [Record(failed=True)])
    assert reading_rate(reader.read, reader.close, 2, 0.2) == 0.0
    assert reader.closed


def test_a_failing_read_still_closes_the_client() -> None:
    reader = Reader()

    def read() -> list[Record]:
        raise RuntimeError("broker gone")

    with pytest.raises(RuntimeError):
        reading_rate(read, reader.close, 1, 1.0)
    assert reader.closed
