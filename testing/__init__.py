"""``tenantq.testing``: test your handlers without Kafka or Postgres.

``JobHarness`` runs a job type's handler as a worker runs it (the producer's payload checks,
the worker's payload decoding, handler runner, timeout and outcome classification) and
reports how the attempt ended; ``RecordingProducer`` stands in for ``tenantq.Producer`` and
records the jobs the code under test enqueues::

    from tenantq.testing import JobHarness

    def test_send_email() -> None:
        with JobHarness(app) as harness:
            attempt = harness.run(send_email, tenant="acme", payload=SendEmail(to="a@x"))
            assert attempt.succeeded
            assert [job.job_type for job in attempt.enqueued] == ["audit"]

            run = harness.run_to_end(send_email, tenant="acme", payload=SendEmail(to="bounce"))
            assert run.dead and "max attempts" in run.last.error_message
"""

from tenantq.testing.harness import JobHarness
from tenantq.testing.recording_producer import EnqueuedJob, RecordingProducer
from tenantq.testing.results import Attempt, JobRun

__all__ = ["Attempt", "EnqueuedJob", "JobHarness", "JobRun", "RecordingProducer"]
