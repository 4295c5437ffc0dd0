"""The placement cache: a TTL, serving the last good table when the database cannot be read,
and skipping a bad row."""

from __future__ import annotations

import threading

from fakes import FakeClock, FakePlacementTable

from tenantq.partitioner.placement import HASHED, Placement
from tenantq.partitioner.placement_book import PlacementBook
from tenantq.store.placement import PlacementRecord


def test_book_caches_for_the_ttl_then_reloads() -> None:
    clock, table = FakeClock(1000.0), FakePlacementTable()
    table.rows["acme"] = PlacementRecord("default", "acme", "spread", 4, ())
    book = PlacementBook(table, ttl_seconds=5.0, clock=clock)
    assert book.placement("default", "acme") == Placement.spread(4)
    assert book.placement("default", "globex") is HASHED
    table.rows["acme"] = PlacementRecord("default", "acme", "pinned", None, (3,))
    clock.now += 4.9
    assert book.placement("default", "acme") == Placement.spread(4)
    assert table.loads == 1
    clock.now += 0.2
    assert book.placement("default", "acme") == Placement.pinned([3])
    assert table.loads == 2


def test_book_in_background_answers_at_once_past_the_ttl_and_rereads_aside() -> None:
    clock, table = FakeClock(1000.0), FakePlacementTable()
    table.rows["acme"] = PlacementRecord("default", "acme", "spread", 4, ())
    book = PlacementBook(table, ttl_seconds=1.0, clock=clock, refresh_in_background=True)
    assert book.placement("default", "acme") == Placement.spread(4)  # first load: waited for
    reading, release = threading.Event(), threading.Event()

    def slow(queue: str) -> list[PlacementRecord]:
        reading.set()
        release.wait(10)
        return table(queue)

    book._loader = slow
    table.rows["acme"] = PlacementRecord("default", "acme", "pinned", None, (3,))
    clock.now += 2
    assert book.placement("default", "acme") == Placement.spread(4)  # the old table, now
    assert reading.wait(10), "no background reread"
    assert book.placement("default", "acme") == Placement.spread(4)  # while it reads
    release.set()
    for _ in range(500):
        if book.placement("default", "acme") == Placement.pinned([3]):
            break
        threading.Event().wait(0.01)
    assert book.placement("default", "acme") == Placement.pinned([3])
    assert table.loads == 2  # one reread, however many lookups came meanwhile


def test_book_keeps_serving_when_the_table_cannot_be_read() -> None:
    clock, table = FakeClock(1000.0), FakePlacementTable()
    table.rows["acme"] = PlacementRecord("default", "acme", "pinned", None, (1, 2))
    book = PlacementBook(table, ttl_seconds=1.0, clock=clock)
    assert book.placement("default", "acme") == Placement.pinned([1, 2])
    table.failing = True
    clock.now += 2
    assert book.placement("default", "acme") == Placement.pinned([1, 2])
    fresh = PlacementBook(table, ttl_seconds=1.0, clock=clock)
    assert fresh.placement("default", "acme") is HASHED


def test_book_skips_a_bad_row_and_keeps_the_others() -> None:
    table = FakePlacementTable()
    table.rows["bad"] = PlacementRecord("default", "bad", "spread", 1, ())
    table.rows["good"] = PlacementRecord("default", "good", "spread", 3, ())
    book = PlacementBook(table, ttl_seconds=1.0, clock=FakeClock(1000.0))
    assert book.placement("default", "bad") is HASHED
    assert book.placement("default", "good") == Placement.spread(3)


def test_book_without_a_loader_is_hashed() -> None:
    assert PlacementBook(None, ttl_seconds=1.0).placement("default", "acme") is HASHED
