"""Rolling updates held to a Slurm MAINT reservation (updateStrategy.maintenanceReservation): pure
plan rules here, and the operator's real loop against real Slurm in test_maintenance_slurm below."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sunk.runtime.operator.plan import UPDATE, maintenance_nodes
from sunk.runtime.slurmrest import Reservation

from .test_plan import NOW, acts, cpu, node, observe, pod, summary

OLD = "old-template"
T = int(NOW.timestamp())


def held(**kw: Any) -> Any:
    return cpu(replicas=3, updateStrategy={"maintenanceReservation": "maint-cpu", "maxUnavailable": 3}, **kw)


def resv(
    nodes: str = "cpu-[0-1]",
    flags: tuple[str, ...] = ("MAINT", "IGNORE_JOBS"),
    start: int = T - 60,
    end: int | None = T + 3600,
) -> Reservation:
    return Reservation(name="maint-cpu", node_list=nodes, flags=flags, start_time=start, end_time=end)


def with_resv(observed: Any, *reservations: Reservation) -> Any:
    from dataclasses import replace

    return replace(observed, reservations={r.name: r for r in reservations})


def outdated() -> tuple[list[Any], list[Any]]:
    return [pod(i, h=OLD) for i in range(3)], [node(i) for i in range(3)]


def test_no_reservation_no_update() -> None:
    pods, slurm = outdated()
    assert summary(acts(with_resv(observe(pods, slurm, spec=held())))) == []
    assert summary(acts(observe(pods, slurm, spec=held()))) == []  # reservations unread: wait too


def test_inside_an_active_maint_reservation_only_its_nodes_are_updated() -> None:
    pods, slurm = outdated()
    out = acts(with_resv(observe(pods, slurm, spec=held()), resv()))
    assert sorted(summary(out)) == [("Drain", "cpu-0"), ("Drain", "cpu-1")]


def test_a_reservation_not_yet_started_ended_or_without_maint_holds_the_update() -> None:
    pods, slurm = outdated()
    for r in (resv(start=T + 60), resv(start=T - 7200, end=T - 60), resv(flags=("IGNORE_JOBS",))):
        assert summary(acts(with_resv(observe(pods, slurm, spec=held()), r))) == [], r


def test_a_drain_the_update_left_outside_the_window_is_resumed() -> None:
    pods = [pod(i, h=OLD) for i in range(3)]
    slurm = [node(0), node(1), node(2, "IDLE", "DRAIN", reason=UPDATE)]
    out = acts(with_resv(observe(pods, slurm, spec=held()), resv()))
    assert ("Resume", "cpu-2") in summary(out)


def test_maintenance_nodes_reads_the_hostlist_at_now() -> None:
    observed = with_resv(observe([], [], spec=held()), resv("cpu-[0-1],cpu-5"))
    assert maintenance_nodes(observed, "maint-cpu", NOW) == {"cpu-0", "cpu-1", "cpu-5"}
    assert maintenance_nodes(observed, "maint-cpu", NOW + timedelta(hours=2)) == frozenset()
    assert maintenance_nodes(observed, "other", NOW) == frozenset()
