"""A placement notification names its deployment and queue (``<deployment>/<queue>``): a
watcher rereads its own deployment's queue and ignores the others' changes; a payload it
cannot read may be anyone's change, so it rereads everything rather than miss one."""

from __future__ import annotations

from tenantq.store.placement import changed_queue


def test_a_change_of_this_deployment_names_its_queue() -> None:
    assert changed_queue("acme.prod/default", "acme.prod") == (True, "default")


def test_another_deployments_change_is_not_ours() -> None:
    # A prefix may be the start of another ("acme" and "acme.prod"): compared whole.
    assert changed_queue("acme.prod/default", "acme")[0] is False
    assert changed_queue("acme/default", "acme.prod")[0] is False


def test_an_unreadable_payload_rereads_everything() -> None:
    assert changed_queue("", "acme") == (True, None)
    assert changed_queue("default", "acme") == (True, None)
    assert changed_queue("acme/", "acme") == (True, None)
