"""runtime/fence/lease.Fence on an in-memory Lease store with the API server's optimistic
concurrency (a write with a stale resourceVersion is a 409) and fake clocks: two controller pods'
fences, a takeover, a failback, a lost API server. The real API server: test_fence_controlplane."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sunk.runtime.fence.lease import Fence, Marks

from sunk.fence import Refuse, Release, Renew, Stop, Take, Timing, Wait


class Store:
    def __init__(self) -> None:
        self.obj: dict[str, Any] | None = None
        self.version = 0
        self.down = False

    def api(self) -> Api:
        return Api(self)


class Api:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.refused = False

    def _check(self) -> None:
        if self.store.down or self.refused:
            raise ConnectionError("away")

    def read(self) -> dict[str, Any] | None:
        self._check()
        return copy.deepcopy(self.store.obj)

    def create(self, body: Mapping[str, Any]) -> bool:
        self._check()
        if self.store.obj is not None:
            return False
        return self._put(body)

    def replace(self, body: Mapping[str, Any]) -> bool:
        self._check()
        assert self.store.obj is not None
        if body["metadata"]["resourceVersion"] != self.store.obj["metadata"]["resourceVersion"]:
            return False
        return self._put(body)

    def _put(self, body: Mapping[str, Any]) -> bool:
        self.store.version += 1
        self.store.obj = copy.deepcopy(dict(body))
        self.store.obj["metadata"]["resourceVersion"] = str(self.store.version)
        return True


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Pod:
    def __init__(self, tmp: Path, name: str, store: Store, clock: Clock) -> None:
        (tmp / name).mkdir()
        self.marks = Marks(tmp / name / "primary", tmp / name / "fence-stop")
        self.api = store.api()
        self.clock = clock
        self.fence = Fence(self.api, "ns", "acme-controller-fence", f"{name}_uid", self.marks, Timing(),
                           clock, lambda: datetime.fromtimestamp(clock.t, UTC))  # fmt: skip

    def take_control(self, at: int) -> None:
        self.marks.mark.write_text("")
        import os

        os.utime(self.marks.mark, ns=(at * 10**9, at * 10**9))

    def stand_by(self) -> None:
        self.marks.mark.unlink(missing_ok=True)

    def stopped(self) -> str | None:
        f = self.marks.stop_file
        return f.read_text().strip() if f.exists() else None


@pytest.fixture
def world(tmp_path: Path) -> tuple[Store, Clock, Pod, Pod]:
    store, clock = Store(), Clock()
    return store, clock, Pod(tmp_path, "c0", store, clock), Pod(tmp_path, "c1", store, clock)


def run(clock: Clock, seconds: float, *pods: Pod) -> list[list[str]]:
    """Tick every pod each 2 s for `seconds`: the actions, per tick."""
    out = []
    end = clock.t + seconds
    while clock.t < end:
        out.append([type(p.fence.tick()).__name__ for p in pods])
        clock.t += 2
    return out


def holder(store: Store) -> str:
    assert store.obj is not None
    return str(store.obj["spec"]["holderIdentity"])


def test_the_primary_takes_the_lease_and_renews_it_and_the_standby_leaves_it(world: Any) -> None:
    store, clock, c0, c1 = world
    c0.take_control(1)
    assert c0.fence.tick() == Take() and c1.fence.tick() == Wait("slurmctld stands by")
    assert holder(store) == "c0_uid" and store.obj["spec"]["leaseDurationSeconds"] == 15
    ticks = run(clock, 60, c0, c1)
    assert all(t == ["Renew", "Wait"] for t in ticks[1:]), ticks
    assert c0.stopped() is None and store.obj["spec"]["leaseTransitions"] == 0


def test_a_backup_takes_over_once_the_dead_primarys_lease_stayed_unrenewed(world: Any) -> None:
    store, clock, c0, c1 = world
    c0.take_control(1)
    run(clock, 10, c0, c1)
    # c0's Node dies: its fence ticks no more. c1's slurmctld takes control 8 s later.
    clock.t += 8
    c1.take_control(2)
    ticks = run(clock, 20, c1)
    assert ticks[0] == ["Wait"] and "Take" in [t[0] for t in ticks], ticks
    assert holder(store) == "c1_uid" and store.obj["spec"]["leaseTransitions"] == 1
    assert c1.stopped() is None


def test_an_orphan_primary_that_keeps_renewing_gets_the_new_pod_refused(world: Any) -> None:
    """The local cluster's case: the force-deleted pod's token still works, so its fence renews;
    the new pod of the same name (another uid) is refused after the grace."""
    store, clock, c0, c1 = world
    c0.take_control(1)
    run(clock, 4, c0)
    c1.take_control(2)
    ticks = run(clock, 20, c0, c1)
    assert ticks[-1] == ["Renew", "Refuse"] and holder(store) == "c0_uid"
    assert c1.stopped().startswith("the Lease is held by c0_uid")
    assert c0.stopped() is None


def test_a_primary_whose_api_access_ends_stops_before_another_may_take(world: Any) -> None:
    store, clock, c0, c1 = world
    c0.take_control(1)
    run(clock, 6, c0, c1)
    c0.api.refused = True  # its token revoked with its pod
    last = clock.t - 2
    actions = []
    while c0.stopped() is None:
        actions.append(c0.fence.tick())
        clock.t += 1
    assert isinstance(actions[-1], Stop) and clock.t - 1 - last >= 10
    c1.take_control(3)
    while c1.fence.tick() != Take():
        clock.t += 1
    assert clock.t - last >= 15 and holder(store) == "c1_uid"


def test_failback_the_backup_releases_and_the_returning_primary_takes_at_once(world: Any) -> None:
    store, clock, c0, c1 = world
    c1.take_control(1)
    run(clock, 6, c1)
    assert holder(store) == "c1_uid"
    c1.stand_by()  # PrimaryOffProg: it gives control back
    c0.take_control(2)
    assert c1.fence.tick() == Release() and holder(store) == ""
    assert c0.fence.tick() == Take() and holder(store) == "c0_uid"
    assert c0.stopped() is None and c1.stopped() is None


def test_a_stop_is_written_once_per_takeover_and_a_new_takeover_starts_over(world: Any) -> None:
    _store, clock, c0, c1 = world
    c0.take_control(1)
    run(clock, 4, c0)
    c1.take_control(2)
    run(clock, 20, c0, c1)
    c1.marks.stop_file.unlink()  # the watcher's slurmctld stopped; PrimaryOnProg clears it next time
    assert isinstance(c1.fence.tick(), Refuse) and not c1.marks.stop_file.exists()
    c1.take_control(3)  # a restarted slurmctld takes control again: a new grace
    assert isinstance(c1.fence.tick(), Wait)


def test_two_fences_racing_for_a_free_lease_one_wins(world: Any) -> None:
    store, clock, c0, c1 = world
    c0.take_control(1)
    c1.take_control(1)
    stale = c1.api.read()  # c1 read before c0 wrote
    assert c0.fence.tick() == Take()
    c1.api.read = lambda: stale
    assert c1.fence.tick() == Take()  # it tried, and the create lost
    assert holder(store) == "c0_uid" and c1.fence._renewed_at is None
    del c1.api.read
    clock.t += 2
    assert c0.fence.tick() == Renew() and isinstance(c1.fence.tick(), Wait)


def test_a_stopped_slurmctlds_fence_takes_no_lease_until_it_takes_control_again(world: Any) -> None:
    """After a stop, the mark stays until the container restarts: a Lease freed meanwhile is not
    taken for the slurmctld being stopped."""
    store, clock, c0, c1 = world
    c0.take_control(1)
    run(clock, 4, c0)
    c1.take_control(2)
    run(clock, 20, c0, c1)
    assert c1.stopped() is not None
    c0.stand_by()
    assert c0.fence.tick() == Release() and holder(store) == ""
    assert c1.fence.tick() == Wait("slurmctld is being stopped") and holder(store) == ""
    c1.take_control(3)
    assert c1.fence.tick() == Take() and holder(store) == "c1_uid"
