"""Topic names come from one place and round-trip to their tier; a wait rides the first retry
tier whose delay covers it, or the last."""

from __future__ import annotations

import pytest

from tenantq.topics import (
    QueueTopics,
    consumer_group,
    dlq_topic,
    main_topic,
    retry_topic,
    tier_for_wait,
)


def test_names() -> None:
    assert main_topic("tq", "emails") == "tq.emails"
    assert retry_topic("tq", "emails", 2) == "tq.emails.retry.2"
    assert dlq_topic("tq", "emails") == "tq.emails.dlq"
    assert consumer_group("tq", "emails") == "tq.emails.workers"


def test_queue_topics_tiers() -> None:
    topics = QueueTopics.of("tq", "q", 3)
    assert topics.all == (
        "tq.q",
        "tq.q.lane",
        "tq.q.retry.0",
        "tq.q.retry.1",
        "tq.q.retry.2",
        "tq.q.dlq",
    )
    assert topics.consumed == ("tq.q", "tq.q.lane", "tq.q.retry.0", "tq.q.retry.1", "tq.q.retry.2")
    assert topics.tier_of("tq.q.retry.1") == 1
    assert topics.tier_of("tq.q") is None


def test_negative_tier_refused() -> None:
    with pytest.raises(ValueError):
        retry_topic("tq", "q", -1)


def test_tier_choice_covers_the_wait_and_hops_past_the_last() -> None:
    delays = (5.0, 30.0, 300.0)
    assert [tier_for_wait(wait, delays) for wait in (0.1, 5, 5.1, 30, 299, 301, 1e9)] == [
        0,
        0,
        1,
        1,
        2,
        2,
        2,
    ]
