"""A rolling update held to a Slurm MAINT reservation, on REAL slurmctld + slurmrestd with the
operator's real loop (the World of test_real_slurm: kmock, a simulated kubelet starting one real
slurmd per pod): nothing is replaced before the reservation exists; once an admin creates a MAINT
reservation over two of the three nodes, exactly those two are replaced, the third stays outdated
and is counted in status.outdated."""

from __future__ import annotations

import pytest

from sunk import keys
from tests.support.waiting import wait_for

from .test_real_slurm import World, slurm, world  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

HELD = {"replicas": 3, "updateStrategy": {"maintenanceReservation": "maint-cpu", "maxUnavailable": 2}}


def _hashes(w: World) -> dict[str, str]:
    return {h: p["metadata"]["annotations"][keys.CONFIG_HASH] for h, p in w.pods().items()}


@pytest.mark.parametrize("world", [HELD], indirect=True)
def test_an_update_waits_for_the_maint_reservation_and_replaces_only_its_nodes(world: World) -> None:  # noqa: F811
    world.steady(["cpu-0", "cpu-1", "cpu-2"])
    before = {h: p["metadata"]["uid"] for h, p in world.pods().items()}
    world.patch_spec(configHash="v2")
    resyncs = world.operator.metrics.resyncs._value.get()
    wait_for("six more resyncs", lambda: world.operator.metrics.resyncs._value.get() >= resyncs + 6)
    # No reservation: the update waits, nothing drained or replaced.
    assert {h: p["metadata"]["uid"] for h, p in world.pods().items()} == before
    assert not any(n.drain for n in world.slurm_nodes().values())
    wait_for("status.outdated 3", lambda: world.status().get("outdated") == 3)

    made = world.slurm.run(
        "scontrol", "create", "reservation", "ReservationName=maint-cpu", "Flags=MAINT,IGNORE_JOBS",
        "Nodes=cpu-[0-1]", "StartTime=now", "Duration=30", "Users=root",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    try:
        wait_for(
            "cpu-0 and cpu-1 on v2",
            lambda: (
                {h for h, v in _hashes(world).items() if v == "v2"} == {"cpu-0", "cpu-1"}
                and world.ready_pods() >= {"cpu-0", "cpu-1"}
            ),
            timeout=120,
        )
        resyncs = world.operator.metrics.resyncs._value.get()
        wait_for("six more resyncs", lambda: world.operator.metrics.resyncs._value.get() >= resyncs + 6)
        hashes = _hashes(world)
        assert hashes["cpu-2"] != "v2" and world.pods()["cpu-2"]["metadata"]["uid"] == before["cpu-2"]
        assert sorted(world.kubelet.deleted) == ["cpu-0", "cpu-1"]
        wait_for("status.outdated 1", lambda: world.status().get("outdated") == 1)
    finally:
        world.slurm.run("scontrol", "delete", "reservation=maint-cpu")
