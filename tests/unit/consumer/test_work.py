"""A work item's dead letter: the message as it was read, its source, and why it died."""

from __future__ import annotations

from fakes import work_item

from tenantq import headers
from tenantq.consumer.outcomes import Verdict
from tenantq.states import JobState, Outcome
from tenantq.topics import QueueTopics

TOPICS = QueueTopics.of("p", "default", 2)


def test_a_dead_letter_carries_the_message_its_source_and_the_verdicts_reason() -> None:
    item = work_item(offset=7)
    letter = item.dead_letter_record(
        TOPICS, Verdict.dead("PoisonJob", "crashed 3 times"), attempts=2, worker="w-1"
    )
    assert (letter.topic, letter.key, letter.value) == (TOPICS.dlq, item.key, item.value)
    found = dict(letter.headers)
    assert found[headers.ERROR_CLASS] == b"PoisonJob"
    assert found[headers.ERROR_MESSAGE] == b"crashed 3 times"
    assert found[headers.ATTEMPTS] == b"2"
    assert found[headers.WORKER] == b"w-1"
    assert (found[headers.SOURCE_TOPIC], found[headers.SOURCE_OFFSET]) == (b"p.default", b"7")


def test_a_dead_verdict_without_a_class_is_dead_lettered_as_dead() -> None:
    verdict = Verdict(Outcome.DEAD, JobState.DEAD, None, None)
    letter = work_item().dead_letter_record(TOPICS, verdict, attempts=0, worker="w-1")
    found = dict(letter.headers)
    assert (found[headers.ERROR_CLASS], found[headers.ERROR_MESSAGE]) == (b"Dead", b"")
