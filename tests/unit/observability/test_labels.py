"""Tenant labels stay bounded whatever the input, and invalid strings never become labels."""

from __future__ import annotations

import threading

import pytest
from fakes import is_tenant_id

from tenantq.observability import labels
from tenantq.observability.labels import OTHER, TenantLabeler, is_tenant_label


def test_tenant_labeler_keeps_first_n_and_folds_the_rest() -> None:
    labeler = TenantLabeler(top_n=3)
    assert [labeler.label(t) for t in ("a", "b", "a", "c", "d", "e", "b")] == [
        "a",
        "b",
        "a",
        "c",
        OTHER,
        OTHER,
        "b",
    ]
    assert labeler.labelled() == {"a", "b", "c"}


def test_values_past_the_bound_stay_other_and_are_remembered_within_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(labels, "OTHERS_REMEMBERED", 5)
    labeler = TenantLabeler(top_n=2)
    seen = [labeler.label(f"t{index % 9}") for index in range(90)]
    assert seen[:2] == ["t0", "t1"]
    assert [label for label in seen if label not in ("t0", "t1")] == [OTHER] * 70
    assert labeler.labelled() == {"t0", "t1"}
    assert len(labeler._others) <= 5
    assert labeler.label("has space") == OTHER  # never remembered: invalid
    assert "has space" not in labeler._others


def test_tenant_labeler_preload_wins_over_arrival_order() -> None:
    labeler = TenantLabeler(top_n=2)
    labeler.preload(["big", "bigger", "third"])
    assert labeler.label("small") == OTHER
    assert labeler.label("bigger") == "bigger"
    assert labeler.labelled() == {"big", "bigger"}


def test_tenant_labeler_zero_labels_everything_other() -> None:
    labeler = TenantLabeler(top_n=0)
    assert labeler.label("acme") == OTHER
    with pytest.raises(ValueError):
        TenantLabeler(top_n=-1)


@pytest.mark.parametrize(
    "bad", ["", "x" * 129, "has space", "tenant#3", "évil", "a\nb", None, 42, b"bytes"]
)
def test_invalid_tenant_never_becomes_a_label(bad: object) -> None:
    labeler = TenantLabeler(top_n=100)
    assert labeler.label(bad) == OTHER
    assert labeler.labelled() == frozenset()


@pytest.mark.parametrize(
    "value", ["acme", "a", "x" * 128, "org:42.eu-1_b", "", "x" * 129, "a b", "t#1", "ü", "a/b"]
)
def test_tenant_label_rule_matches_the_tenant_id_rule(value: str) -> None:
    assert is_tenant_label(value) is is_tenant_id(value)


def test_labeler_bound_holds_under_concurrency() -> None:
    labeler = TenantLabeler(top_n=10)
    barrier = threading.Barrier(8)

    def hammer(offset: int) -> None:
        barrier.wait()
        for index in range(500):
            labeler.label(f"tenant-{(index * 7 + offset) % 300}")

    threads = [threading.Thread(target=hammer, args=(offset,)) for offset in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(labeler.labelled()) == 10
