"""The lease book: a lease the heartbeat finds lost is counted once as an expiry and its
handler is asked to stop; one whose result is on its way to the database was completed, not
lost; a result refused as stale after a reported loss is not counted as a second expiry."""

from __future__ import annotations

import uuid

from fakes import work_item

from tenantq.consumer.leases import LeaseBook


class Rig:
    def __init__(self) -> None:
        self.expired: list[str] = []
        self.canceled: list[tuple[uuid.UUID, str]] = []
        self.leases = LeaseBook(
            expired=self.expired.append,
            cancel=lambda job_id, reason: self.canceled.append((job_id, reason)),
        )


def test_a_lost_lease_counts_once_and_stops_its_handler() -> None:
    rig = Rig()
    item = work_item()
    rig.leases.hold([item])
    assert rig.leases.held_ids() == [item.job_id]
    rig.leases.lost(item.job_id)
    rig.leases.lost(item.job_id)  # the next beat finds it lost again
    assert rig.expired == ["default"]
    assert rig.canceled == [(item.job_id, "lease_lost")] * 2
    # Its stale result is refused later: the loss was reported already.
    assert rig.leases.release([item.job_id]) == {item.job_id}
    assert rig.leases.held_ids() == []


def test_a_lease_whose_result_is_being_written_is_not_lost() -> None:
    rig = Rig()
    item = work_item()
    rig.leases.hold([item])
    rig.leases.completing([item.job_id])
    rig.leases.lost(item.job_id)
    assert rig.expired == [] and rig.canceled == []
    assert rig.leases.release([item.job_id]) == set()


def test_a_lease_not_held_here_counts_nothing() -> None:
    rig = Rig()
    job_id = uuid.uuid4()
    rig.leases.lost(job_id)
    assert rig.expired == []
