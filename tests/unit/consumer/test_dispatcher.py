"""Fair dispatch: a hot tenant does not starve cold ones, weights and strict priority order
the queues, and limits hold."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tenantq.consumer.dispatcher import FairDispatcher


@dataclass
class Item:
    queue: str
    tenant_id: str
    n: int = 0


def test_hot_tenant_does_not_starve_cold_ones() -> None:
    dispatcher: FairDispatcher[Item] = FairDispatcher({"default": 1})
    for n in range(1000):
        dispatcher.push(Item("default", "hot", n))
    for tenant in ("a", "b", "c"):
        dispatcher.push(Item("default", tenant))
    first = [dispatcher.pop() for _ in range(8)]
    tenants = [item.tenant_id for item in first if item]
    assert {"a", "b", "c"} <= set(tenants)
    assert tenants.count("hot") <= 5


def test_fifo_within_a_tenant() -> None:
    dispatcher: FairDispatcher[Item] = FairDispatcher({"q": 1})
    for n in range(5):
        dispatcher.push(Item("q", "t", n))
    assert [dispatcher.pop().n for _ in range(5)] == [0, 1, 2, 3, 4]  # type: ignore[union-attr]
    assert dispatcher.pop() is None


def test_weighted_queues_share_by_weight() -> None:
    dispatcher: FairDispatcher[Item] = FairDispatcher({"high": 3, "low": 1})
    for n in range(400):
        dispatcher.push(Item("high", f"t{n % 7}"))
        dispatcher.push(Item("low", f"t{n % 7}"))
    served = Counter(dispatcher.pop().queue for _ in range(400))  # type: ignore[union-attr]
    assert served["high"] == 300 and served["low"] == 100


def test_strict_priority_serves_high_first_but_low_when_high_is_empty() -> None:
    dispatcher: FairDispatcher[Item] = FairDispatcher({"high": 1, "low": 1}, strict=True)
    for _ in range(3):
        dispatcher.push(Item("high", "t"))
        dispatcher.push(Item("low", "t"))
    order = [dispatcher.pop().queue for _ in range(6)]  # type: ignore[union-attr]
    assert order == ["high"] * 3 + ["low"] * 3


def test_tenant_in_flight_limit_and_runnable_predicate() -> None:
    dispatcher: FairDispatcher[Item] = FairDispatcher({"q": 1}, tenant_in_flight_limit=1)
    dispatcher.push(Item("q", "a", 1))
    dispatcher.push(Item("q", "a", 2))
    dispatcher.push(Item("q", "b", 3))
    first = dispatcher.pop()
    assert first is not None
    dispatcher.started(first)
    second = dispatcher.pop()
    assert second is not None and second.tenant_id != first.tenant_id
    dispatcher.started(second)
    assert dispatcher.pop() is None  # both tenants at their limit
    dispatcher.finished(first)
    third = dispatcher.pop(lambda item: item.n != 2)
    assert third is None  # the only runnable tenant's head is refused by the predicate
    assert len(dispatcher) == 1


def test_remove_takes_matching_items() -> None:
    dispatcher: FairDispatcher[Item] = FairDispatcher({"q": 1})
    for n in range(10):
        dispatcher.push(Item("q", f"t{n % 2}", n))
    removed = dispatcher.remove(lambda item: item.n % 2 == 0)
    assert sorted(i.n for i in removed) == [0, 2, 4, 6, 8]
    assert len(dispatcher) == 5


def _filled(seed: int, *, strict: bool, lanes: tuple[str, ...]) -> FairDispatcher[Item]:
    rng = random.Random(seed)
    dispatcher: FairDispatcher[Item] = FairDispatcher(
        {lane: rng.randint(1, 4) for lane in lanes}, strict=strict, tenant_in_flight_limit=3
    )
    for n in range(rng.randint(0, 300)):
        dispatcher.push(Item(rng.choice(lanes), f"t{rng.randint(0, 12)}", n))
    return dispatcher


def _taker(counts: Counter[str], dispatcher: FairDispatcher[Item]) -> Callable[[Item], None]:
    """What the worker does with a chosen item: count it in flight (its tenant's limit)."""

    def taken(chosen: Item) -> None:
        dispatcher.started(chosen)
        counts[chosen.tenant_id] += 1

    return taken


def _under(cap: int, counts: Counter[str]) -> Callable[[Item], bool]:
    """Runnable while its tenant has fewer than ``cap`` taken."""
    return lambda candidate: counts[candidate.tenant_id] < cap


@pytest.mark.parametrize("seed", range(40))
def test_pop_many_gives_what_as_many_pops_give(seed: int) -> None:
    """Same items, same order, same state after (round robin, weights, limits), with a
    ``runnable`` that changes as items are taken: one lane (the fast path) and several."""
    lanes = ("a",) if seed % 2 else ("a", "b", "c")
    strict = seed % 4 == 1
    one = _filled(seed, strict=strict, lanes=lanes)
    other = _filled(seed, strict=strict, lanes=lanes)
    rng = random.Random(seed)
    for _ in range(12):
        count = rng.randint(0, 40)
        cap = rng.randint(2, 30)  # a per-tenant cap, counted as items are taken
        counts_one: Counter[str] = Counter()
        counts_other: Counter[str] = Counter()
        take_one = _taker(counts_one, one)
        expected: list[Item] = []
        while len(expected) < count:
            popped = one.pop(_under(cap, counts_one))
            if popped is None:
                break
            take_one(popped)
            expected.append(popped)
        got = other.pop_many(
            count,
            _under(cap, counts_other),
            _taker(counts_other, other),
        )
        assert [(item.queue, item.n) for item in got] == [(item.queue, item.n) for item in expected]
        assert len(one) == len(other)
        for item in rng.sample(expected, k=len(expected) // 2):
            one.finished(item)
            other.finished(item)
    drained_one = [(item.queue, item.n) for item in iter(one.pop, None)]
    drained_other = [(item.queue, item.n) for item in other.pop_many(10_000)]
    assert drained_one == drained_other
