"""The failed-login limiter: past the per-client or the overall count of wrong tokens within a
minute, token checks are refused with the seconds until the oldest failure leaves the minute;
refusals are not counted as failures; IPv6 clients are counted by /64; each refused client is
reported as "first" once a minute; the memory it keeps stays bounded."""

from __future__ import annotations

from tenantq.web.login_limiter import FailedLogins, Refusal, client_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Events:
    def __init__(self) -> None:
        self.failed: list[tuple[str, str, int]] = []
        self.refused: list[tuple[str, Refusal, bool]] = []

    def token_failed(self, client: str, via: str, failures: int) -> None:
        self.failed.append((client, via, failures))

    def token_refused(self, client: str, refusal: Refusal, *, first: bool) -> None:
        self.refused.append((client, refusal, first))


def limiter(per_client: int = 3, overall: int = 5) -> tuple[FailedLogins, Clock, Events]:
    clock, events = Clock(), Events()
    return (
        FailedLogins(per_client=per_client, overall=overall, events=events, clock=clock),
        clock,
        events,
    )


def test_one_client_is_refused_past_its_limit_until_the_minute_has_passed() -> None:
    logins, clock, events = limiter()
    for second in range(3):
        clock.now = 1000.0 + second
        assert logins.refusal("10.0.0.1") is None
        logins.failed("10.0.0.1", "login")
    assert [failures for *_, failures in events.failed] == [1, 2, 3]
    clock.now = 1010.0
    assert logins.refusal("10.0.0.1") == Refusal("client", 50)
    assert logins.refusal("10.0.0.1") == Refusal("client", 50)
    assert [first for *_, first in events.refused] == [True, False]
    assert logins.refusal("10.0.0.2") is None  # another client is still heard
    clock.now = 1060.0  # the first failure left the minute
    assert logins.refusal("10.0.0.1") is None


def test_every_client_is_refused_past_the_overall_limit() -> None:
    logins, clock, events = limiter(per_client=100, overall=5)
    for number in range(5):
        logins.failed(f"10.0.1.{number}", "bearer")
    refusal = logins.refusal("10.0.2.1")
    assert refusal is not None and refusal.limit == "overall" and refusal.retry_after == 60
    logins.refusal("10.0.2.2")
    # One report as "first" for the overall limit, not one per address.
    assert [first for *_, first in events.refused] == [True, False]
    clock.now += 60
    assert logins.refusal("10.0.2.1") is None


def test_ipv6_clients_are_counted_by_their_64() -> None:
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::2")
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert client_key("testclient") == "testclient"
    logins, _, _ = limiter()
    for host in range(3):
        logins.failed(f"2001:db8:1:2::{host + 1}", "login")
    assert logins.refusal("2001:db8:1:2::99") is not None


def test_memory_stays_bounded_by_the_window() -> None:
    logins, clock, _ = limiter(per_client=2, overall=1_000_000)
    for number in range(5_000):
        logins.failed(f"10.{number // 65536}.{number // 256 % 256}.{number % 256}", "login")
    clock.now += 61
    assert logins.refusal("10.9.9.9") is None
    assert not logins._by_client and not logins._all  # everything old is forgotten
