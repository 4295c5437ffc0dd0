"""A KRaft cluster id never starts with '-': kafka-storage's argument parser would take it for
an option (``--cluster-id: expected one argument``) and the stack would not start."""

from __future__ import annotations

import uuid

import pytest

from tenantq.devstack import kafka


def test_a_cluster_id_that_would_start_with_a_dash_is_drawn_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    draws = iter([uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x10" + bytes(15))])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(draws))
    cluster_id = kafka.new_cluster_id()
    assert cluster_id == "EAAAAAAAAAAAAAAAAAAAAA"
    assert len(cluster_id) == 22
