"""Pure plan tests for updateStrategy OnDelete: the operator never replaces an outdated pod itself."""

from __future__ import annotations

from typing import Any

import pytest
from sunk.runtime.operator.model import WriteStatus
from sunk.runtime.operator.plan import UPDATE, plan

from sunk.spec import SpecError, load_spec

from .test_plan import NOW, acts, cpu, node, observe, pod, summary

OLD = "old-template"


def on_delete(**kw: Any) -> Any:
    return cpu(replicas=3, updateStrategy={"type": "OnDelete"}, **kw)


def test_outdated_pods_are_neither_drained_nor_deleted() -> None:
    pods = [pod(i, h=OLD) for i in range(3)]
    assert summary(acts(observe(pods, [node(i) for i in range(3)], spec=on_delete()))) == []
    # The same NodeSet with RollingUpdate starts draining one.
    rolling = acts(observe(pods, [node(i) for i in range(3)], spec=cpu(replicas=3)))
    assert summary(rolling) == [("Drain", "cpu-2")]


def test_a_deleted_outdated_pod_comes_back_from_the_new_template() -> None:
    pods = [pod(0, h=OLD), pod(2, h=OLD)]
    out = acts(observe(pods, [node(0), node(2)], spec=on_delete()))
    assert summary(out) == [("CreatePod", "cpu-1")]


def test_a_rolling_update_drain_left_from_before_is_resumed() -> None:
    pods = [pod(i, h=OLD) for i in range(3)]
    slurm = [node(0), node(1), node(2, "IDLE", "DRAIN", reason=UPDATE)]
    assert summary(acts(observe(pods, slurm, spec=on_delete()))) == [("Resume", "cpu-2")]


def test_status_counts_outdated_pods_and_stays_ready() -> None:
    pods = [pod(0, h=OLD), pod(1), pod(2, h=OLD)]
    (status,) = [
        a for a in plan(observe(pods, [node(i) for i in range(3)], spec=on_delete()), NOW) if isinstance(a, WriteStatus)
    ]
    assert status.status["outdated"] == 2 and status.status["updated"] == 1
    ready = next(c for c in status.status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["reason"] == "OutdatedOnDelete", ready


@pytest.mark.parametrize("field", [{"maxUnavailable": 2}, {"force": True}, {"maintenanceReservation": "maint-cpu"}])
def test_on_delete_refuses_rolling_update_settings(field: dict[str, Any]) -> None:
    data = {
        "name": "research",
        "tenant": "acme",
        "nodesets": [{"name": "cpu", "cpus": 4, "memoryMib": 4096, "updateStrategy": {"type": "OnDelete", **field}}],
        "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
    }
    with pytest.raises(SpecError) as info:
        load_spec(data)
    (problem,) = info.value.problems
    key = next(iter(field))
    assert problem.startswith(f"nodesets[0].updateStrategy.{key}: only with type RollingUpdate"), problem
