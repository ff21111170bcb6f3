"""nodeagents.not_schedulable: which Nodes kube-scheduler would still filter out for their
lifecycle, the test NodeAgents.schedulable waits on before `sunk local up` applies a render.
(test_node_lifecycle proves the wait against the real kube-controller-manager.)"""

from __future__ import annotations

from typing import Any

from sunk.runtime.local.nodeagents import LIFECYCLE_TAINTS, not_schedulable


def _node(name: str, ready: str | None = "True", taints: tuple[str, ...] = ()) -> dict[str, Any]:
    conditions = (
        [] if ready is None else [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": ready}]
    )
    return {
        "metadata": {"name": name},
        "spec": {"taints": [{"key": k, "effect": "NoSchedule"} for k in taints]},
        "status": {"conditions": conditions},
    }


def test_a_ready_node_without_lifecycle_taints_is_schedulable_whatever_else_it_carries() -> None:
    assert not_schedulable([_node("a", taints=("slurm.sunk.dev/local-compute", "slurm.sunk.dev/shared"))]) == []


def test_each_node_held_back_is_named_with_why() -> None:
    nodes = [
        _node("fresh", taints=(LIFECYCLE_TAINTS[0],)),
        _node("lost", ready="Unknown", taints=(LIFECYCLE_TAINTS[1],)),
        _node("unset", ready=None),
        {"metadata": {"name": "unseen"}},
        _node("fine"),
    ]
    assert not_schedulable(nodes) == [
        "fresh: tainted node.kubernetes.io/not-ready",
        "lost: Ready is Unknown",
        "unset: Ready is unset",
        "unseen: not seen yet",
    ]
