"""sunk.fence.plan: every state of the Lease against every state of this pod's slurmctld."""

from __future__ import annotations

import pytest

from sunk.fence import (
    GRACE,
    LEASE_DURATION,
    RENEW_DEADLINE,
    RENEW_EVERY,
    Lease,
    Refuse,
    Release,
    Renew,
    Stop,
    Take,
    Timing,
    Unreadable,
    Wait,
    plan,
)

ME = "acme-controller-0_1111"
OTHER = "acme-controller-1_2222"
T = Timing(duration=15, renew_deadline=10, grace=15)
NOW = 1000.0


def test_the_constants_leave_a_stopped_holder_time_before_anyone_takes_over() -> None:
    assert RENEW_DEADLINE < LEASE_DURATION
    assert RENEW_DEADLINE >= 3 * RENEW_EVERY  # a few slow answers stop nothing
    # A backup takes over SlurmctldTimeout (8 s) after the primary's last answer; the Lease it
    # must wait for was renewed up to RENEW_EVERY before that, so it is free within the grace.
    assert LEASE_DURATION + RENEW_EVERY - 8 <= GRACE
    Timing()


@pytest.mark.parametrize(("timing", "field"), [
    (dict(duration=10, renew_deadline=10), "renew_deadline"),
    (dict(renew_deadline=0), "renew_deadline"),
    (dict(grace=0), "grace"),
])  # fmt: skip
def test_timing_refuses_a_deadline_the_lease_would_outlive(timing: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Timing(**timing)


STANDBY = [
    (None, Wait("slurmctld stands by")),
    (Unreadable("refused"), Wait("slurmctld stands by")),
    (Lease(OTHER, NOW - 1), Wait("slurmctld stands by")),
    (Lease("", NOW - 100), Wait("slurmctld stands by")),
    (Lease(ME, NOW - 1), Release()),
]


@pytest.mark.parametrize(("lease", "action"), STANDBY)
@pytest.mark.parametrize("renewed_at", [None, NOW - 1, NOW - 100])
def test_a_standby_only_ever_releases_its_own_lease(
    lease: Lease | None, action: object, renewed_at: float | None
) -> None:
    assert plan(lease, ME, NOW, T, primary_since=None, renewed_at=renewed_at) == action


TAKING = [
    # (lease, seconds since this pod's slurmctld took control, action)
    (None, 0, Take()),
    (None, 100, Take()),
    (Lease("", NOW), 0, Take()),
    (Lease(ME, NOW), 0, Take()),  # its own record, from before a restart of the fence
    (Lease(OTHER, NOW - 15), 0, Take()),  # unchanged for a whole duration: the holder is gone
    (Lease(OTHER, NOW - 40), 40, Take()),
    (Lease(OTHER, NOW - 14.9), 0, Wait(f"the Lease is held by {OTHER}, renewed 15 s ago")),
    (Lease(OTHER, NOW - 2), 14.9, Wait(f"the Lease is held by {OTHER}, renewed 2 s ago")),
    (Lease(OTHER, NOW - 2), 15, Refuse(f"the Lease is held by {OTHER}, renewed 2 s ago, after 15 s in control")),
    (Lease(OTHER, NOW), 300, Refuse(f"the Lease is held by {OTHER}, renewed 0 s ago, after 300 s in control")),
    (Unreadable("HTTP 401"), 0, Wait("the Lease can't be read (HTTP 401)")),
    (Unreadable("HTTP 401"), 15, Refuse("the Lease can't be read (HTTP 401), after 15 s in control")),
]


@pytest.mark.parametrize(("lease", "waited", "action"), TAKING)
def test_a_new_primary_takes_a_free_or_stale_lease_and_is_refused_one_held_past_its_grace(
    lease: Lease | Unreadable | None, waited: float, action: object
) -> None:
    assert plan(lease, ME, NOW, T, primary_since=NOW - waited, renewed_at=None) == action


HOLDING = [
    # (lease, seconds since this pod last renewed, action)
    (Lease(ME, NOW - 2), 2, Renew()),
    (Lease(ME, NOW - 9.9), 9.9, Renew()),
    (Lease(ME, NOW - 10), 10, Stop("the Lease was not renewed for 10 s (deadline 10 s)")),
    (Unreadable("timed out"), 4, Wait("the Lease can't be read (timed out)")),
    (Unreadable("HTTP 401"), 10, Stop("the Lease was not renewed for 10 s (deadline 10 s)")),
    (None, 2, Take()),  # deleted under its holder: made again (a create loses to anyone else's)
    (None, 11, Stop("the Lease was not renewed for 11 s (deadline 10 s)")),
    (Lease(OTHER, NOW), 2, Stop(f"the Lease is held by {OTHER}")),
    (Lease("", NOW), 2, Stop("the Lease is held by nobody")),
]


@pytest.mark.parametrize(("lease", "since", "action"), HOLDING)
@pytest.mark.parametrize("in_control", [0, 5, 1000])
def test_a_holder_renews_until_its_deadline_and_stops_when_another_holds_the_lease(
    lease: Lease | Unreadable | None, since: float, action: object, in_control: float
) -> None:
    """Once it has renewed, the grace no longer counts: only the deadline and the holder do."""
    got = plan(lease, ME, NOW, T, primary_since=NOW - in_control, renewed_at=NOW - since)
    assert got == action


def test_two_fences_never_both_take_a_lease_held_and_renewed() -> None:
    """Whatever the two pods' clocks, a Lease its holder renews each period is never taken."""
    for period in (0.5, 1, 2, 5, 9.9):
        holder = plan(Lease(ME, NOW - period), ME, NOW, T, primary_since=NOW - 100, renewed_at=NOW - period)
        other = plan(Lease(ME, NOW - period), OTHER, NOW, T, primary_since=NOW - 1, renewed_at=None)
        assert holder == Renew() and isinstance(other, Wait)


def test_a_holder_stops_before_another_may_take_its_lease() -> None:
    """The holder's last renewal at 0: it stops at the deadline, at least duration - deadline
    before another fence (whose first read came after that renewal) may take."""
    stopped_at = next(t / 10 for t in range(0, 300) if isinstance(
        plan(Lease(ME, 0), ME, t / 10, T, primary_since=-50, renewed_at=0), Stop))  # fmt: skip
    taken_at = next(t / 10 for t in range(0, 300) if isinstance(
        plan(Lease(ME, 0.1), OTHER, t / 10, T, primary_since=0, renewed_at=None), Take))  # fmt: skip
    assert stopped_at == T.renew_deadline and taken_at - stopped_at >= T.duration - T.renew_deadline
