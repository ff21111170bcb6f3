"""plan(): one test per rule. Observations are built from raw API objects through the same
parsers the real client uses."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sunk.runtime.slurmrest import Node, PodRef, read_pod_ref, write_pod_ref
from sunk.runtime.syncer.kube import parse_node, parse_pod
from sunk.runtime.syncer.model import (
    Observed,
    node_condition,
    node_drain_annotation,
)
from sunk.runtime.syncer.plan import (
    AnnotateNode,
    AnnotatePod,
    Drain,
    Resume,
    SetNodeCondition,
    SetPodCondition,
    SetPodRef,
    plan,
)

from sunk import keys
from tests.support.fakes.syncer import node_object, pod_object

NS = "tenant"
NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def slurm(name: str, *state: str, reason: str = "", pod: str | None = None, uid: str | None = None) -> Node:
    extra = write_pod_ref("", PodRef(NS, pod, uid or f"uid-{NS}-{pod}")) if pod else ""
    return Node(name=name, state=state or ("IDLE",), reason=reason, extra=extra)


def pod(name: str, node: str = "k1", **kw: Any) -> dict[str, Any]:
    return pod_object(NS, name, nodeset="cpu", node_name=node, **kw)


def observe(
    nodes: list[Node], kube: list[dict[str, Any]] | None = None, pods: list[dict[str, Any]] | None = None
) -> Observed:
    parsed = [parse_pod(p, NS) for p in pods or []]
    return Observed(
        slurm_nodes={n.name: n for n in nodes},
        kube_nodes={o["metadata"]["name"]: parse_node(o) for o in (kube if kube is not None else [node_object("k1")])},
        pods=[p for p in parsed if p is not None],
        namespace=NS,
    )


def slurm_actions(obs: Observed) -> list[Any]:
    return [a for a in plan(obs, NOW) if isinstance(a, Drain | Resume | SetPodRef)]


def deleting(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return obj


# --- Kubernetes -> Slurm ------------------------------------------------------------------------


def test_cordoned_node_drains_with_our_prefix() -> None:
    obs = observe([slurm("cpu-0", pod="cpu-0")], [node_object("k1", unschedulable=True)], [pod("cpu-0")])
    assert slurm_actions(obs) == [Drain("cpu-0", "sunk: Node k1 cordoned")]


def test_cordon_reason_annotation_is_carried() -> None:
    kube = [node_object("k1", unschedulable=True, annotations={keys.CORDON_REASON: "  swap DIMM\n 3 "})]
    obs = observe([slurm("cpu-0", pod="cpu-0")], kube, [pod("cpu-0")])
    assert slurm_actions(obs) == [Drain("cpu-0", "sunk: Node k1 cordoned: swap DIMM 3")]


def test_not_ready_node_drains_with_condition_text() -> None:
    kube = [node_object("k1", ready="False", ready_reason="KubeletNotReady", ready_message="PLEG is not healthy")]
    obs = observe([slurm("cpu-0", pod="cpu-0")], kube, [pod("cpu-0")])
    assert slurm_actions(obs) == [Drain("cpu-0", "sunk: Node k1 NotReady (KubeletNotReady: PLEG is not healthy)")]


def test_ready_unknown_counts_as_not_ready_but_missing_condition_does_not() -> None:
    unknown = [node_object("k1", ready="Unknown", ready_reason="NodeStatusUnknown", ready_message="")]
    assert slurm_actions(observe([slurm("cpu-0", pod="cpu-0")], unknown, [pod("cpu-0")])) == [
        Drain("cpu-0", "sunk: Node k1 NotReady (NodeStatusUnknown)")
    ]
    no_info = [node_object("k1", ready=None)]
    assert slurm_actions(observe([slurm("cpu-0", pod="cpu-0")], no_info, [pod("cpu-0")])) == []


def test_long_kubernetes_text_is_shortened() -> None:
    kube = [node_object("k1", ready="False", ready_reason="R", ready_message="x" * 500)]
    (action,) = slurm_actions(observe([slurm("cpu-0", pod="cpu-0")], kube, [pod("cpu-0")]))
    assert isinstance(action, Drain) and len(action.reason) <= 206 and action.reason.endswith("...")


def test_terminating_pod_drains() -> None:
    obs = observe([slurm("cpu-0", pod="cpu-0")], pods=[deleting(pod("cpu-0"))])
    assert slurm_actions(obs) == [Drain("cpu-0", f"sunk: slurmd pod {NS}/cpu-0 terminating")]


def test_deleted_pod_drains_by_the_recorded_mapping() -> None:
    obs = observe([slurm("cpu-0", pod="cpu-0")], pods=[])
    assert slurm_actions(obs) == [Drain("cpu-0", f"sunk: slurmd pod {NS}/cpu-0 deleted")]


def test_pod_on_a_deleted_node_drains() -> None:
    obs = observe([slurm("cpu-0", pod="cpu-0")], kube=[], pods=[pod("cpu-0", node="gone")])
    assert slurm_actions(obs) == [Drain("cpu-0", "sunk: Node gone deleted")]


def test_cause_gone_resumes_our_drain() -> None:
    obs = observe([slurm("cpu-0", "IDLE", "DRAIN", reason="sunk: Node k1 cordoned", pod="cpu-0")], pods=[pod("cpu-0")])
    assert slurm_actions(obs) == [Resume("cpu-0")]


def test_admin_drain_is_never_resumed() -> None:
    obs = observe([slurm("cpu-0", "IDLE", "DRAIN", reason="bad DIMM", pod="cpu-0")], pods=[pod("cpu-0")])
    assert slurm_actions(obs) == []


def test_operator_drain_is_never_resumed_by_the_syncer() -> None:
    # The operator drains before scale-in or a rolling update; resuming would invite new jobs.
    reason = "sunk:operator scale-in"
    obs = observe([slurm("cpu-0", "IDLE", "DRAIN", reason=reason, pod="cpu-0")], pods=[pod("cpu-0")])
    assert slurm_actions(obs) == []


def test_operator_drain_is_not_reworded_while_a_syncer_cause_exists() -> None:
    kube = [node_object("k1", unschedulable=True)]
    reason = "sunk:operator rolling update"
    obs = observe([slurm("cpu-0", "IDLE", "DRAIN", reason=reason, pod="cpu-0")], kube, [pod("cpu-0")])
    assert slurm_actions(obs) == []


def test_operator_drain_is_not_reported_as_a_drain_that_began_in_slurm() -> None:
    obs = observe(
        [slurm("cpu-0", "IDLE", "DRAIN", reason="sunk:operator scale-in", pod="cpu-0")],
        [node_object("k1")],
        [pod("cpu-0")],
    )
    assert not [a for a in kube_actions(obs) if isinstance(a, AnnotateNode | SetNodeCondition)]


def test_admin_drain_is_not_overwritten_while_our_cause_exists() -> None:
    kube = [node_object("k1", unschedulable=True)]
    obs = observe([slurm("cpu-0", "IDLE", "DRAIN", reason="bad DIMM", pod="cpu-0")], kube, [pod("cpu-0")])
    assert slurm_actions(obs) == []


def test_cleared_drain_is_reapplied_while_the_cause_persists() -> None:
    # Someone resumed the node by hand; the Node is still cordoned.
    obs = observe([slurm("cpu-0", "IDLE", pod="cpu-0")], [node_object("k1", unschedulable=True)], [pod("cpu-0")])
    assert slurm_actions(obs) == [Drain("cpu-0", "sunk: Node k1 cordoned")]


def test_our_drain_follows_a_changed_cause_and_holds_when_unchanged() -> None:
    drained = slurm("cpu-0", "IDLE", "DRAIN", reason="sunk: Node k1 cordoned", pod="cpu-0")
    kube = [node_object("k1", unschedulable=True, ready="False", ready_reason="NodeStatusUnknown", ready_message="")]
    assert slurm_actions(observe([drained], kube, [pod("cpu-0")])) == [
        Drain("cpu-0", "sunk: Node k1 NotReady (NodeStatusUnknown)")
    ]
    assert slurm_actions(observe([drained], [node_object("k1", unschedulable=True)], [pod("cpu-0")])) == []


def test_drain_of_an_allocated_node_is_still_a_drain() -> None:
    obs = observe([slurm("cpu-0", "ALLOCATED", pod="cpu-0")], [node_object("k1", unschedulable=True)], [pod("cpu-0")])
    assert slurm_actions(obs) == [Drain("cpu-0", "sunk: Node k1 cordoned")]


def test_unmanaged_slurm_nodes_are_left_alone() -> None:
    # No pod and no recorded mapping: a node sunk does not manage, even with our prefix.
    obs = observe([slurm("static-1", "IDLE", "DRAIN", reason="sunk: old"), slurm("static-2")], pods=[])
    assert plan(obs, NOW) == []


def test_mapping_of_another_namespace_is_not_ours() -> None:
    node = Node(name="cpu-0", state=("IDLE",), extra=write_pod_ref("", PodRef("other", "cpu-0", "u")))
    assert plan(observe([node], pods=[]), NOW) == []


def test_pods_of_other_namespaces_or_without_the_nodeset_label_are_ignored() -> None:
    stray = pod_object("other", "cpu-0", nodeset="cpu", node_name="k1")
    unlabeled = pod("cpu-1")
    del unlabeled["metadata"]["labels"]
    assert parse_pod(stray, NS) is None and parse_pod(unlabeled, NS) is None


# --- the mapping ------------------------------------------------------------------------------


def test_mapping_is_recorded_and_keeps_other_extra_keys() -> None:
    node = Node(name="cpu-0", state=("IDLE",), extra='{"rack":"r7"}')
    (action,) = slurm_actions(observe([node], pods=[pod("cpu-0", uid="u-1")]))
    assert isinstance(action, SetPodRef) and action.node == "cpu-0"
    assert read_pod_ref(action.extra) == PodRef(NS, "cpu-0", "u-1")
    assert '"rack":"r7"' in action.extra


def test_mapping_follows_a_replacement_pod_and_does_not_drain() -> None:
    old = deleting(pod("cpu-0", uid="u-old", created="2024-01-01T00:00:00Z"))
    new = pod("cpu-0-b", hostname="cpu-0", uid="u-new", created="2024-06-01T00:00:00Z")
    node = slurm("cpu-0", pod="cpu-0", uid="u-old")
    (action,) = slurm_actions(observe([node], pods=[old, new]))
    assert isinstance(action, SetPodRef) and read_pod_ref(action.extra) == PodRef(NS, "cpu-0-b", "u-new")


def test_hostname_maps_pod_to_slurm_node() -> None:
    obs = observe(
        [slurm("gpu-7", pod="pod-x")], [node_object("k1", unschedulable=True)], [pod("pod-x", hostname="gpu-7")]
    )
    assert slurm_actions(obs) == [Drain("gpu-7", "sunk: Node k1 cordoned")]


def test_pod_not_yet_registered_in_slurm_needs_no_slurm_write() -> None:
    assert slurm_actions(observe([], pods=[pod("cpu-0")])) == []


# --- Slurm -> Kubernetes ----------------------------------------------------------------------


def kube_actions(obs: Observed) -> list[Any]:
    return [a for a in plan(obs, NOW) if not isinstance(a, Drain | Resume | SetPodRef)]


def test_pod_gets_state_annotations_and_condition() -> None:
    obs = observe([slurm("cpu-0", "MIXED", pod="cpu-0")], pods=[pod("cpu-0")])
    annotate, condition = kube_actions(obs)
    # Only what differs is written: the absent reason annotation needs no removal.
    assert annotate == AnnotatePod(NS, "cpu-0", {keys.SLURM_STATE: "mixed", keys.SLURM_STATE_DETAIL: "MIXED"})
    assert isinstance(condition, SetPodCondition)
    assert (condition.condition.type, condition.condition.status, condition.condition.reason) == (
        keys.SLURM_NODE_READY,
        "True",
        "Mixed",
    )
    assert condition.condition.last_transition_time == "2025-01-02T03:04:05Z"
    assert condition.index is None and condition.count == 1  # appended after the pod's Ready


def test_drained_and_down_pods_show_reason_and_false_condition() -> None:
    obs = observe(
        [
            slurm("cpu-0", "IDLE", "DRAIN", reason="bad DIMM", pod="cpu-0"),
            slurm("cpu-1", "DOWN", "NOT_RESPONDING", reason="Not responding", pod="cpu-1"),
        ],
        pods=[pod("cpu-0"), pod("cpu-1")],
    )
    by_pod = {(type(a).__name__, a.name): a for a in kube_actions(obs)}
    assert by_pod["AnnotatePod", "cpu-0"].annotations == {
        keys.SLURM_STATE: "drain",
        keys.SLURM_STATE_DETAIL: "IDLE+DRAIN",
        keys.SLURM_REASON: "bad DIMM",
    }
    assert by_pod["AnnotatePod", "cpu-1"].annotations[keys.SLURM_STATE] == "down"
    for name, reason in (("cpu-0", "Drain"), ("cpu-1", "Down")):
        cond = by_pod["SetPodCondition", name].condition
        assert (cond.status, cond.reason) == ("False", reason)


def test_pod_without_a_slurm_node_is_missing() -> None:
    (annotate, _) = kube_actions(observe([], pods=[pod("cpu-0")]))
    assert annotate.annotations[keys.SLURM_STATE] == "missing"


def test_terminating_pods_are_not_annotated() -> None:
    assert kube_actions(observe([slurm("cpu-0", pod="cpu-0")], pods=[deleting(pod("cpu-0"))])) == []


def test_condition_keeps_transition_time_when_only_the_message_changes() -> None:
    p = pod("cpu-0")
    p["metadata"]["annotations"] = {
        keys.SLURM_STATE: "drain",
        keys.SLURM_STATE_DETAIL: "IDLE+DRAIN",
        keys.SLURM_REASON: "new",
    }
    p["status"]["conditions"].append(
        {
            "type": keys.SLURM_NODE_READY,
            "status": "False",
            "reason": "Drain",
            "message": "old",
            "lastTransitionTime": "T0",
        }
    )
    obs = observe([slurm("cpu-0", "IDLE", "DRAIN", reason="new", pod="cpu-0")], pods=[p])
    (cond,) = [a for a in kube_actions(obs) if isinstance(a, AnnotatePod | SetPodCondition)]
    assert isinstance(cond, SetPodCondition)
    assert cond.index == 1 and cond.count == 2
    assert (cond.condition.message, cond.condition.last_transition_time) == ("new", "T0")


def test_node_annotated_for_a_drain_that_began_in_slurm() -> None:
    obs = observe(
        [
            slurm("cpu-0", "IDLE", "DRAIN", reason="bad DIMM", pod="cpu-0"),
            slurm("cpu-1", "ALLOCATED", "DRAIN", reason="maint", pod="cpu-1"),
            slurm("cpu-2", "IDLE", "DRAIN", reason="sunk: Node k1 cordoned", pod="cpu-2"),
        ],
        [node_object("k1")],
        [pod("cpu-0"), pod("cpu-1"), pod("cpu-2")],
    )
    node_actions = [a for a in kube_actions(obs) if isinstance(a, AnnotateNode | SetNodeCondition)]
    assert node_actions[0] == AnnotateNode("k1", {node_drain_annotation(NS): "cpu-0: bad DIMM; cpu-1: maint"})
    cond = node_actions[1]
    assert isinstance(cond, SetNodeCondition)
    assert (cond.condition.type, cond.condition.status, cond.condition.reason) == (
        node_condition(NS),
        "True",
        "DrainedInSlurm",
    )


def test_node_annotation_removed_and_condition_false_when_the_drain_ends() -> None:
    kn = node_object("k1", annotations={node_drain_annotation(NS): "cpu-0: bad DIMM"})
    kn["status"]["conditions"].append(
        {"type": node_condition(NS), "status": "True", "reason": "DrainedInSlurm", "message": "cpu-0: bad DIMM"}
    )
    obs = observe([slurm("cpu-0", pod="cpu-0")], [kn], [pod("cpu-0")])
    node_actions = [a for a in kube_actions(obs) if isinstance(a, AnnotateNode | SetNodeCondition)]
    assert node_actions[0] == AnnotateNode("k1", {node_drain_annotation(NS): None})
    cond = node_actions[1]
    assert isinstance(cond, SetNodeCondition) and cond.condition.status == "False" and cond.index == 1


def test_nodes_never_drained_in_slurm_get_no_condition() -> None:
    obs = observe([slurm("cpu-0", pod="cpu-0")], [node_object("k1"), node_object("k2")], [pod("cpu-0")])
    assert [a for a in kube_actions(obs) if isinstance(a, AnnotateNode | SetNodeCondition)] == []


def test_the_node_annotation_and_condition_all_tenants_shared_before_are_removed() -> None:
    from sunk.runtime.syncer.plan import RemoveNodeCondition

    from sunk import keys

    kn = node_object("k1", annotations={keys.LEGACY_NODE_DRAIN: "cpu-0: old"})
    kn["status"]["conditions"].append({"type": keys.LEGACY_NODE_CONDITION, "status": "True", "reason": "x"})
    obs = observe([slurm("cpu-0", pod="cpu-0")], [kn], [pod("cpu-0")])
    actions = kube_actions(obs)
    assert AnnotateNode("k1", {keys.LEGACY_NODE_DRAIN: None}) in actions
    assert RemoveNodeCondition("k1", keys.LEGACY_NODE_CONDITION, 1) in actions
