"""Ports: the preferred one when free, else one below the kernel's ephemeral range."""

from __future__ import annotations

import socket

from tenantq.devstack.processes import ephemeral_port_range, pick_port


def test_a_taken_port_is_replaced_by_one_below_the_ephemeral_range() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        low, _ = ephemeral_port_range()
        chosen = pick_port(taken)
        assert chosen != taken
        assert chosen < max(low, 21_000)
        again = pick_port(chosen, taken={chosen})
        assert again not in (chosen, taken)


def test_a_free_preferred_port_is_kept() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    assert pick_port(free) == free
