"""Who an audit row names: a bounded, printable name, checked where it comes in."""

from __future__ import annotations

import pytest

from tenantq.dlq.actions import ACTOR, current_actor, validate_actor
from tenantq.errors import ConfigurationError


@pytest.mark.parametrize("actor", ["ops", "web:alice", "uid:1000", "a.b-c_d+e@example.com"])
def test_names_are_actors(actor: str) -> None:
    assert validate_actor(actor) == actor


@pytest.mark.parametrize(
    "actor", ["", "a\nb", "<b>x</b>", "ops; DROP", "a" * 101, "ünïcode", "tab\there", "\x1b[2J"]
)
def test_text_is_not_an_actor(actor: str) -> None:
    with pytest.raises(ConfigurationError, match="not a name") as raised:
        validate_actor(actor)
    assert "\n" not in str(raised.value)


def test_the_default_actor_is_always_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ACTOR.fullmatch(current_actor())
    monkeypatch.setattr("getpass.getuser", lambda: "evil\nname")
    assert current_actor().startswith("uid:")
