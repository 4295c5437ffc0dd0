"""Topic names come from one place and round-trip to their tier."""

from __future__ import annotations

import pytest
from tenantq.topics import QueueTopics, consumer_group, dlq_topic, main_topic, retry_topic


def test_names() -> None:
    assert main_topic("tq", "emails") == "tq.emails"
    assert retry_topic("tq", "emails", 2) == "tq.emails.retry.2"
    assert dlq_topic("tq", "emails") == "tq.emails.dlq"
    assert consumer_group("tq", "emails") == "tq.emails.workers"


def test_queue_topics_tiers() -> None:
    topics = QueueTopics.of("tq", "q", 3)
    assert topics.all == ("tq.q", "tq.q.retry.0", "tq.q.retry.1", "tq.q.retry.2", "tq.q.dlq")
    assert topics.tier_of("tq.q.retry.1") == 1
    assert topics.tier_of("tq.q") is None


def test_negative_tier_refused() -> None:
    with pytest.raises(ValueError):
        retry_topic("tq", "q", -1)
