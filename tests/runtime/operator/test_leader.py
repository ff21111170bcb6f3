"""Leader election: one leader at a time, takeover only after a full lease duration of silence,
the leader stops acting when it cannot renew, release hands over at once."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sunk.runtime.operator.leader import LeaderElector, LeaseView, decide

from tests.support.fakes.operator import FakeLeases


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t

    def wall(self) -> datetime:
        # Renewals stamp renewTime from the wall clock; it moves with the monotonic one here.
        return datetime.fromtimestamp(1_790_000_000 + self.t, tz=UTC)


def pair(api: FakeLeases, clock: Clock) -> tuple[LeaderElector, LeaderElector]:
    a = LeaderElector(api, "sunk", "op", "a", duration=15, renew_deadline=10, monotonic=clock, wall=clock.wall)
    b = LeaderElector(api, "sunk", "op", "b", duration=15, renew_deadline=10, monotonic=clock, wall=clock.wall)
    return a, b


@pytest.mark.parametrize(
    ("view", "since", "now", "expected"),
    [
        (None, None, 0, "create"),
        (LeaseView("me", "t", 15, 0, ""), 0, 1, "renew"),
        (LeaseView("", "t", 15, 0, ""), 0, 1, "takeover"),
        (LeaseView("other", "t", 15, 0, ""), 0, 14.9, "follow"),
        (LeaseView("other", "t", 15, 0, ""), 0, 15, "takeover"),
    ],
)
def test_decide(view: LeaseView | None, since: float, now: float, expected: str) -> None:
    assert decide(view, "me", since, now) == expected


def test_one_leader_and_takeover_after_silence() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = pair(api, clock)
    assert a.tick() is True
    assert b.tick() is False
    for _ in range(5):  # a keeps renewing: b never takes over
        clock.t += 5
        assert a.tick() is True
        assert b.tick() is False
    # a dies. b must see the record unchanged for a full duration first.
    clock.t += 10
    assert b.tick() is False
    clock.t += 6
    assert b.tick() is True
    lease = api.leases[("sunk", "op")]["spec"]
    assert lease["holderIdentity"] == "b" and lease["leaseTransitions"] == 1
    # a comes back: it follows, and it no longer believes it leads.
    assert a.tick() is False
    assert a.is_leader() is False


def test_leader_stops_acting_when_it_cannot_renew() -> None:
    api, clock = FakeLeases(), Clock()
    a, _ = pair(api, clock)
    assert a.tick()
    api.fail = True
    clock.t += 5
    assert a.tick() is True  # still within renew_deadline of the last renewal
    clock.t += 6
    assert a.tick() is False
    assert a.is_leader() is False


def test_racing_writers_cannot_both_win() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = pair(api, clock)
    assert a.tick()
    clock.t += 100  # a went silent long ago from b's point of view...
    assert b.tick() is False  # ...but b only just started watching
    clock.t += 16
    # a renews between b's read and b's write: b's test on renewTime fails.
    real_get = api.get_lease

    def get_then_a_renews(namespace: str, name: str) -> dict[str, object] | None:
        seen = real_get(namespace, name)
        api.leases[("sunk", "op")]["spec"]["renewTime"] = "renewed-meanwhile"
        return seen

    api.get_lease = get_then_a_renews  # type: ignore[method-assign]
    assert b.tick() is False
    assert api.leases[("sunk", "op")]["spec"]["holderIdentity"] == "a"


def test_release_hands_over_at_once() -> None:
    api, clock = FakeLeases(), Clock()
    a, b = pair(api, clock)
    assert a.tick()
    a.release()
    assert a.is_leader() is False
    assert b.tick() is True


def test_renew_deadline_must_be_shorter() -> None:
    with pytest.raises(ValueError, match="renew_deadline"):
        LeaderElector(FakeLeases(), "n", "l", "a", duration=10, renew_deadline=10)
