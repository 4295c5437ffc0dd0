"""Guarantee: a new KRaft cluster id never begins with '-', which ``kafka-storage format -t``
would read as an option (the stack then failed to start, one time in 64); otherwise it is 16
random bytes in URL-safe base64, as Kafka's own ids."""

from __future__ import annotations

import base64
from collections.abc import Iterator

from tenantq.devstack.kafka import new_cluster_id


def draws(*values: bytes) -> Iterator[bytes]:
    yield from values


def test_an_id_that_would_begin_with_a_dash_is_drawn_again() -> None:
    dashed = b"\xf8" + bytes(15)  # base64url: '-A...'
    plain = bytes(range(16))
    source = draws(dashed, plain)
    assert base64.urlsafe_b64encode(dashed).decode().startswith("-")
    cluster_id = new_cluster_id(lambda: next(source))
    assert cluster_id == base64.urlsafe_b64encode(plain).decode().rstrip("=")


def test_ids_are_22_characters_of_url_safe_base64() -> None:
    for _ in range(500):
        cluster_id = new_cluster_id()
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
        assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16
