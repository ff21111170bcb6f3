"""Pure plan tests: one or more per rule of runtime/operator/plan.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from sunk.runtime.operator.model import (
    CreatePod,
    CreateService,
    DeletePod,
    Drain,
    KubeNode,
    NodeSetObject,
    Observed,
    Pod,
    RemoveSlurmNode,
    Resume,
    Taint,
    WriteStatus,
)
from sunk.runtime.operator.plan import SCALE_IN, STALE_GRACE, UPDATE, max_unavailable, members, plan
from sunk.runtime.slurmrest import Node as SlurmNode

from sunk.manifests.config import config_maps
from sunk.manifests.nodeset_pod import template_hash
from sunk.naming import OPERATOR_REASON_PREFIX
from sunk.spec.nodeset import UpdateStrategy
from sunk.stackfile import load_stack
from tests.support.fakes.operator import slurm_node
from tests.support.nodeset_objects import resource_spec
from tests.support.stacks import FIXTURE_STACKS

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
CLUSTER = load_stack("acme-dev", FIXTURE_STACKS).spec
KEYS = {cm["metadata"]["name"]: frozenset(cm["data"]) for cm in config_maps(CLUSTER)}
"""The keys of every per-file ConfigMap of the cluster, as the operator reads them."""
NS = "acme-research"


def cpu(**kw: Any) -> Any:
    return resource_spec(CLUSTER, "cpu", **kw)


HASH = template_hash(cpu(), KEYS)


def pod(n: int, *, ready: bool = True, scheduled: bool = True, deleting: bool = False, h: str = HASH) -> Pod:
    return Pod(
        name=f"research-cpu-{n}",
        slurm_node=f"cpu-{n}",
        ordinal=n,
        node_name="k1" if scheduled else None,
        ready=ready,
        deleting=deleting,
        template_hash=h,
    )


def node(n: int, *state: str, reason: str = "") -> SlurmNode:
    return slurm_node(f"cpu-{n}", *state, features=["cpu", "x86"], reason=reason)


def observe(
    pods: Sequence[Pod],
    slurm: Iterable[SlurmNode] | None,
    *,
    spec: Any = None,
    keys: Mapping[str, frozenset[str]] = KEYS,
    kube_nodes: Iterable[KubeNode] = (KubeNode("k1"),),
    status: dict[str, Any] | None = None,
    service: bool = True,
) -> Observed:
    obj = NodeSetObject("research-cpu", NS, "uid-1", 3, spec or cpu(replicas=len(pods)), status or {})
    return Observed(
        obj,
        list(pods),
        {n.name: n for n in kube_nodes},
        {n.name: n for n in slurm} if slurm is not None else None,
        keys,
        service,
    )


def acts(observed: Observed) -> list[Any]:
    return [a for a in plan(observed, NOW) if not isinstance(a, WriteStatus)]


def summary(actions: Iterable[Any]) -> list[tuple[str, str]]:
    return [(type(a).__name__, getattr(a, "slurm_node", "")) for a in actions]


def steady(n: int) -> tuple[list[Pod], list[SlurmNode]]:
    return [pod(i) for i in range(n)], [node(i) for i in range(n)]


# --- members and scale-out --------------------------------------------------------------------


def test_scale_out_creates_lowest_free_ordinals() -> None:
    pods = [pod(0), pod(2)]
    out = acts(observe(pods, [node(0), node(2)], spec=cpu(replicas=4)))
    assert summary(out) == [("CreatePod", "cpu-1"), ("CreatePod", "cpu-3")]
    created = out[0].pod
    assert created["spec"]["hostname"] == "cpu-1"
    assert created["metadata"]["namespace"] == NS
    assert created["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


def test_steady_state_does_nothing_and_status_is_stable() -> None:
    pods, slurm = steady(3)
    first = plan(observe(pods, slurm), NOW)
    assert [type(a) for a in first] == [WriteStatus]
    assert isinstance(first[0], WriteStatus)
    status = dict(first[0].status)
    later = datetime(2026, 11, 1, 13, 0, tzinfo=UTC)
    assert plan(observe(pods, slurm, status=status), later) == []


def test_terminating_member_is_recreated_only_once_gone() -> None:
    pods = [pod(0), pod(1, deleting=True)]
    assert acts(observe(pods, [node(0)], spec=cpu(replicas=2))) == []
    assert summary(acts(observe([pod(0)], [node(0)], spec=cpu(replicas=2)))) == [("CreatePod", "cpu-1")]


def test_ended_pod_is_deleted_then_replaced() -> None:
    evicted = Pod("research-cpu-1", "cpu-1", 1, None, "k1", False, False, HASH, terminal=True)
    slurm = [node(0), node(1, "IDLE", "NOT_RESPONDING")]
    out = acts(observe([pod(0), evicted], slurm, spec=cpu(replicas=2)))
    assert summary(out) == [("DeletePod", "cpu-1")]
    assert acts(observe([pod(0), evicted], None, spec=cpu(replicas=2))) == []  # never without Slurm
    assert Pod.from_object({"metadata": {"name": "p"}, "status": {"phase": "Failed"}}).terminal


def test_missing_service_is_created() -> None:
    pods, slurm = steady(1)
    out = acts(observe(pods, slurm, service=False))
    assert isinstance(out[0], CreateService)
    assert out[0].service["metadata"]["name"] == "research-cpu"


# --- scale-in order ---------------------------------------------------------------------------


def victims(pods: Sequence[Pod], slurm: Iterable[SlurmNode], replicas: int) -> list[str]:
    _, leaving = members(observe(pods, slurm, spec=cpu(replicas=replicas)))
    return [p.slurm_node for p in leaving]


def test_scale_in_prefers_unscheduled_then_not_ready() -> None:
    pods = [pod(0, scheduled=False, ready=False), pod(1, ready=False), pod(2), pod(3)]
    slurm = [node(1), node(2), node(3)]
    assert victims(pods, slurm, 3) == ["cpu-0"]
    assert victims(pods, slurm, 2) == ["cpu-0", "cpu-1"]


def test_scale_in_prefers_idle_over_busy_then_highest_ordinal() -> None:
    pods = [pod(0), pod(1), pod(2), pod(3)]
    slurm = [node(0), node(1, "ALLOCATED"), node(2, "MIXED"), node(3, "IDLE", "COMPLETING")]
    assert victims(pods, slurm, 3) == ["cpu-0"]
    assert victims(pods, slurm, 2) == ["cpu-0", "cpu-3"]
    assert victims(pods, slurm, 1) == ["cpu-0", "cpu-3", "cpu-2"]
    idle = [node(i) for i in range(4)]
    assert victims(pods, idle, 2) == ["cpu-3", "cpu-2"]


def test_scale_in_choice_is_sticky_to_nodes_we_drain() -> None:
    pods = [pod(0), pod(1), pod(2)]
    slurm = [node(0, "ALLOCATED"), node(1, "ALLOCATED", "DRAIN", reason=SCALE_IN), node(2, "ALLOCATED")]
    assert victims(pods, slurm, 2) == ["cpu-1"]


def test_scale_in_drains_then_waits_for_jobs_then_deletes() -> None:
    pods = [pod(0), pod(1), pod(2)]
    spec = cpu(replicas=1)
    out = acts(observe(pods, [node(0), node(1, "ALLOCATED"), node(2, "ALLOCATED")], spec=spec))
    assert summary(out) == [("Drain", "cpu-0"), ("Drain", "cpu-2")]
    assert {a.reason for a in out} == {SCALE_IN}
    assert SCALE_IN.startswith(OPERATOR_REASON_PREFIX)
    drained = [
        node(0, "IDLE", "DRAIN", reason=SCALE_IN),
        node(1, "ALLOCATED"),
        node(2, "ALLOCATED", "DRAIN", reason=SCALE_IN),
    ]
    out = acts(observe(pods, drained, spec=spec))
    assert summary(out) == [("DeletePod", "cpu-0")]  # cpu-2 keeps running its job
    done = [node(1, "ALLOCATED"), node(2, "IDLE", "DRAIN", reason=SCALE_IN)]
    assert summary(acts(observe([pod(1), pod(2)], done, spec=spec))) == [("DeletePod", "cpu-2")]


def test_scale_in_prefers_an_idle_node_over_one_still_draining() -> None:
    # The job on cpu-0 ended while cpu-1 (drained by us) still runs one: swap the victim.
    pods = [pod(0), pod(1)]
    slurm = [node(0), node(1, "ALLOCATED", "DRAIN", reason=SCALE_IN)]
    assert summary(acts(observe(pods, slurm, spec=cpu(replicas=1)))) == [("Drain", "cpu-0"), ("Resume", "cpu-1")]


def test_unregistered_victim_is_deleted_without_drain() -> None:
    out = acts(observe([pod(0), pod(1, ready=False)], [node(0)], spec=cpu(replicas=1)))
    assert summary(out) == [("DeletePod", "cpu-1")]


def test_victim_drained_by_someone_else_is_deleted_without_rewording() -> None:
    slurm = [node(0), node(1, "IDLE", "DRAIN", reason="bad DIMM")]
    out = acts(observe([pod(0), pod(1)], slurm, spec=cpu(replicas=1)))
    assert summary(out) == [("DeletePod", "cpu-1")]


# --- fail closed ------------------------------------------------------------------------------


def test_slurm_unreadable_deletes_drains_and_resumes_nothing() -> None:
    pods = [pod(0), pod(1), pod(2, h="old")]
    out = acts(observe(pods, None, spec=cpu(replicas=4)))
    assert summary(out) == [("CreatePod", "cpu-3")]
    out = acts(observe(pods, None, spec=cpu(replicas=1)))
    assert out == []
    status = plan(observe(pods, None, spec=cpu(replicas=1)), NOW)[-1]
    assert isinstance(status, WriteStatus)
    cond = {c["type"]: c for c in status.status["conditions"]}
    assert cond["SlurmReachable"]["status"] == "False"


def test_config_missing_creates_nothing() -> None:
    keys = {k: v for k, v in KEYS.items() if k not in {"research-slurm-conf", "research-gres-cpu-conf"}}
    out = plan(observe([], [], spec=cpu(replicas=2), keys=keys), NOW)
    assert [type(a) for a in out] == [WriteStatus]
    assert isinstance(out[0], WriteStatus)
    cond = {c["type"]: c for c in out[0].status["conditions"]}
    assert cond["ConfigFound"]["reason"] == "ConfigMapMissing"
    assert cond["ConfigFound"]["message"] == (
        "ConfigMap research-gres-cpu-conf, research-slurm-conf not found: no pod is created"
    )
    # Only the ConfigMaps this NodeSet mounts count: another NodeSet's gres file may be missing.
    others = {k: v for k, v in KEYS.items() if k != "research-gres-gpu-conf"}
    out = plan(observe([], [], spec=cpu(replicas=1), keys=others), NOW)
    assert [type(a) for a in out] == [CreatePod, WriteStatus]


def test_a_config_map_with_several_keys_is_an_invalid_template() -> None:
    keys = {**KEYS, "research-slurm-conf": frozenset({"slurm.conf", "stray"})}
    out = plan(observe([], [], spec=cpu(replicas=1), keys=keys), NOW)
    assert [type(a) for a in out] == [WriteStatus]
    assert isinstance(out[0], WriteStatus)
    cond = {c["type"]: c for c in out[0].status["conditions"]}
    assert cond["ConfigFound"]["status"] == "True"
    assert cond["TemplateValid"]["status"] == "False"
    assert "research-slurm-conf (for slurm.conf) must hold exactly one key" in cond["TemplateValid"]["message"]


def test_invalid_template_is_a_condition_not_a_crash() -> None:
    # A volume clash no longer gets this far (the NodeSet model refuses it: SpecValid=False in
    # reconcile); a ConfigMap of the wrong shape is only seen here.
    keys = {**KEYS, "research-slurm-conf": frozenset({"slurm.conf", "stray.conf"})}
    out = plan(observe([], [], spec=cpu(replicas=1), keys=keys), NOW)
    assert [type(a) for a in out] == [WriteStatus]
    assert isinstance(out[0], WriteStatus)
    cond = {c["type"]: c for c in out[0].status["conditions"]}
    assert cond["TemplateValid"]["status"] == "False"
    assert "research-slurm-conf" in cond["TemplateValid"]["message"]
    assert "must hold exactly one key" in cond["TemplateValid"]["message"]


# --- foreign drains ---------------------------------------------------------------------------


def test_foreign_drains_are_never_resumed_or_redrained() -> None:
    pods, _ = steady(3)
    slurm = [
        node(0, "IDLE", "DRAIN", reason="admin: fan"),
        node(1, "IDLE", "DRAIN", reason="sunk: Node k1 cordoned"),
        node(2),
    ]
    assert acts(observe(pods, slurm)) == []


def test_our_drain_on_a_member_that_stays_is_resumed() -> None:
    pods, _ = steady(2)
    slurm = [node(0), node(1, "IDLE", "DRAIN", reason=SCALE_IN)]
    out = acts(observe(pods, slurm))
    assert summary(out) == [("Resume", "cpu-1")]


def test_member_without_pod_foreign_drain_survives() -> None:
    slurm = [node(0), node(1, "DOWN", "DRAIN", reason="admin: fan")]
    out = acts(observe([pod(0)], slurm, spec=cpu(replicas=2)))
    assert summary(out) == [("CreatePod", "cpu-1")]


# --- Slurm node cleanup -----------------------------------------------------------------------


def test_member_without_pod_has_its_stale_slurm_node_removed_first() -> None:
    slurm = [node(0), node(1, "IDLE", "DRAIN", reason=UPDATE)]
    out = acts(observe([pod(0)], slurm, spec=cpu(replicas=2)))
    assert summary(out) == [("RemoveSlurmNode", "cpu-1")]
    assert summary(acts(observe([pod(0)], [node(0)], spec=cpu(replicas=2)))) == [("CreatePod", "cpu-1")]


def test_slurm_nodes_of_removed_pods_are_removed_but_only_ours() -> None:
    slurm = [
        node(0),
        node(5, "IDLE", "DRAIN", reason=SCALE_IN),
        node(6, "DOWN"),
        slurm_node("cpu-7", "IDLE", "STATIC", features=["cpu"]),
        slurm_node("cpu-8", features=["gpu", "cpu"]),
        slurm_node("cpu-special", features=["cpu"]),
        slurm_node("gpu-0", features=["gpu"]),
    ]
    out = acts(observe([pod(0)], slurm, spec=cpu(replicas=1)))
    assert summary(out) == [("RemoveSlurmNode", "cpu-5"), ("RemoveSlurmNode", "cpu-6")]


def test_node_of_a_terminating_pod_is_not_removed() -> None:
    slurm = [node(0), node(1, "IDLE", "DRAIN", reason=SCALE_IN)]
    assert acts(observe([pod(0), pod(1, deleting=True)], slurm, spec=cpu(replicas=1))) == []


def _stale_case(
    *,
    address: str = "10.233.0.14",
    registered: int | None = None,
    state: tuple[str, ...] = ("DOWN", "NOT_RESPONDING"),
    ran: float = STALE_GRACE,
    ready: bool = True,
    ip: str = "10.233.0.45",
) -> list[tuple[str, str]]:
    """cpu-1's pod (at `ip`, slurmd started `ran` seconds before NOW) and its Slurm record (at
    `address`, SlurmdStartTime `registered` seconds relative to that start; None: never)."""
    started = int(NOW.timestamp() - ran)
    p1 = dataclasses.replace(pod(1, ready=ready), ip=ip, started=started)
    record = node(1, *state).model_copy(
        update={"address": address, "slurmd_start_time": None if registered is None else started + registered}
    )
    return summary(acts(observe([pod(0), p1], [node(0), record], spec=cpu(replicas=2))))


def test_a_slurm_record_left_by_an_earlier_slurmd_that_slurm_cant_reach_replaces_the_pod() -> None:
    # The set-back race: the new slurmd registered with the controller that was going away; the
    # restored snapshot holds the old pod's address and SlurmdStartTime, and slurmd won't register again.
    assert _stale_case(registered=-600) == [("DeletePod", "cpu-1")]
    assert _stale_case(registered=None) == [("DeletePod", "cpu-1")]
    assert _stale_case(registered=-600, state=("IDLE", "NOT_RESPONDING")) == [("DeletePod", "cpu-1")]
    # Then the existing rule clears the record before the new pod is created.
    assert summary(acts(observe([pod(0)], [node(0), node(1, "DOWN", "NOT_RESPONDING")], spec=cpu(replicas=2)))) == [
        ("RemoveSlurmNode", "cpu-1")
    ]


@pytest.mark.parametrize(
    "case",
    [
        {"registered": 0},  # this slurmd's own record: Slurm lost it for another reason
        {"registered": 5},
        {"registered": -600, "state": ("DOWN",)},  # not NOT_RESPONDING: an admin's DOWN, say
        {"registered": -600, "address": "10.233.0.45"},  # Slurm has the pod's address
        {"registered": -600, "ran": STALE_GRACE - 1},  # a slurmd just started: it registers within seconds
        {"registered": -600, "ready": False},
        {"registered": -600, "ip": ""},
    ],
)
def test_a_record_that_is_this_slurmds_or_may_still_be_replaced_leaves_the_pod_alone(case: dict[str, Any]) -> None:
    assert _stale_case(**case) == []


def test_a_stale_record_is_never_acted_on_without_reading_slurm() -> None:
    p1 = dataclasses.replace(pod(1), ip="10.233.0.45", started=int(NOW.timestamp()) - 600)
    assert summary(acts(observe([pod(0), p1], None, spec=cpu(replicas=2)))) == []


def test_a_pod_reads_its_address_from_the_kubelets_status() -> None:
    obj = {"metadata": {"name": "research-cpu-1"}, "spec": {"hostname": "cpu-1"},
           "status": {"phase": "Running", "podIP": "10.233.0.45"}}  # fmt: skip
    assert Pod.from_object(obj).ip == "10.233.0.45"
    assert Pod.from_object({"metadata": {"name": "p"}, "spec": {}, "status": {}}).ip == ""


# --- rolling update ---------------------------------------------------------------------------


def test_update_drains_at_most_max_unavailable() -> None:
    pods = [pod(i, h="old") for i in range(4)]
    out = acts(observe(pods, [node(i) for i in range(4)], spec=cpu(replicas=4)))
    assert summary(out) == [("Drain", "cpu-3")]
    assert out[0].reason == UPDATE
    wide = cpu(replicas=4, updateStrategy={"maxUnavailable": "50%"})
    out = acts(observe(pods, [node(i) for i in range(4)], spec=wide))
    assert summary(out) == [("Drain", "cpu-3"), ("Drain", "cpu-2")]


def test_update_counts_pods_already_unavailable() -> None:
    pods = [pod(0, h="old"), pod(1, h="old"), pod(2, ready=False)]
    assert acts(observe(pods, [node(0), node(1), node(2)], spec=cpu(replicas=3))) == []
    # A not-ready outdated pod costs nothing more to replace: it is already unavailable.
    pods = [pod(0, h="old"), pod(1, h="old", ready=False), pod(2)]
    out = acts(observe(pods, [node(0), node(2)], spec=cpu(replicas=3)))
    assert summary(out) == [("DeletePod", "cpu-1")]


def test_update_waits_for_jobs_then_deletes() -> None:
    pods = [pod(0, h="old"), pod(1, h="old")]
    busy = [node(0, "ALLOCATED", "DRAIN", reason=UPDATE), node(1)]
    assert acts(observe(pods, busy, spec=cpu(replicas=2))) == []
    idle = [node(0, "IDLE", "DRAIN", reason=UPDATE), node(1)]
    assert summary(acts(observe(pods, idle, spec=cpu(replicas=2)))) == [("DeletePod", "cpu-0")]


def test_update_with_force_deletes_busy_pods_at_once() -> None:
    spec = cpu(replicas=2, updateStrategy={"force": True})
    h = template_hash(spec, KEYS)
    pods = [Pod("research-cpu-0", "cpu-0", 0, None, "k1", True, False, "old"), pod(1, h=h)]
    out = acts(observe(pods, [node(0, "ALLOCATED"), node(1)], spec=spec))
    assert summary(out) == [("Drain", "cpu-0"), ("DeletePod", "cpu-0")]


def test_update_of_a_foreign_drained_pod_keeps_the_drain() -> None:
    pods = [pod(0, h="old"), pod(1)]
    slurm = [node(0, "IDLE", "DRAIN", reason="admin: fan"), node(1)]
    out = acts(observe(pods, slurm, spec=cpu(replicas=2)))
    assert summary(out) == [("DeletePod", "cpu-0")]
    # Its pod gone, the node keeps the admin's drain: recreated without removing the Slurm node.
    assert summary(acts(observe([pod(1)], slurm, spec=cpu(replicas=2)))) == [("CreatePod", "cpu-0")]


def test_updated_member_with_our_drain_is_resumed() -> None:
    pods = [pod(0), pod(1, h="old")]
    slurm = [node(0, "IDLE", "DRAIN", reason=UPDATE), node(1)]
    out = acts(observe(pods, slurm, spec=cpu(replicas=2)))
    # cpu-0 is done (resumed); cpu-1 waits: cpu-0 still counts as unavailable this resync.
    assert summary(out) == [("Resume", "cpu-0")]


@pytest.mark.parametrize(
    ("value", "desired", "expected"),
    [(1, 10, 1), (3, 10, 3), ("10%", 10, 1), ("25%", 10, 2), ("50%", 3, 1), ("1%", 5, 1), ("100%", 7, 7)],
)
def test_max_unavailable(value: int | str, desired: int, expected: int) -> None:
    assert max_unavailable(UpdateStrategy(max_unavailable=value), desired) == expected


# --- all-matching-nodes -----------------------------------------------------------------------


def gpu_all(**kw: Any) -> Any:
    return resource_spec(CLUSTER, "gpu", mode="all-matching-nodes", replicas=None, **kw)


AMD64 = {"kubernetes.io/arch": "amd64"}
"""Every kubelet labels its Node with its architecture; the pods select it."""
H100 = {"node.kubernetes.io/instance-type": "H100x8", **AMD64}
GPU_TAINT = (Taint("nvidia.com/gpu", "", "NoSchedule"),)


def test_all_matching_one_pod_per_eligible_node() -> None:
    nodes = [
        KubeNode("g1", H100, GPU_TAINT),
        KubeNode("g2", H100, GPU_TAINT, unschedulable=True),  # cordoned: keeps its pod
        KubeNode("g3", H100, (Taint("dedicated", "other", "NoSchedule"),)),  # untolerated taint
        KubeNode("c1", {"node.kubernetes.io/instance-type": "CPU-64", **AMD64}),
        KubeNode("g4.example.com", H100, (Taint("soft", "", "PreferNoSchedule"),)),
    ]
    obs = Observed(NodeSetObject("research-gpu", NS, "u", 1, gpu_all()), [], {n.name: n for n in nodes}, {}, KEYS)
    out = [a for a in plan(obs, NOW) if isinstance(a, CreatePod)]
    assert [a.pod["metadata"]["annotations"]["slurm.sunk.dev/kube-node"] for a in out] == ["g1", "g2", "g4.example.com"]
    assert out[0].slurm_node == "g1"
    status = next(a for a in plan(obs, NOW) if isinstance(a, WriteStatus)).status
    assert (status["desired"], status["feasible"]) == (3, 2)


def test_all_matching_pod_of_a_node_that_left_is_drained_then_deleted() -> None:
    spec = gpu_all()
    obj = NodeSetObject("research-gpu", NS, "u", 1, spec)
    h = template_hash(spec, KEYS)
    pods = [
        Pod("research-gpu-g1", "g1", None, "g1", "g1", True, False, h),
        Pod("research-gpu-g2", "g2", None, "g2", "g2", True, False, h),
    ]
    nodes = {"g1": KubeNode("g1", H100, GPU_TAINT), "g2": KubeNode("g2", AMD64, GPU_TAINT)}
    slurm = {n: slurm_node(n, features=["gpu"]) for n in ("g1", "g2")}
    out = [a for a in plan(Observed(obj, pods, nodes, slurm, KEYS), NOW) if not isinstance(a, WriteStatus)]
    assert summary(out) == [("Drain", "g2")]
    slurm["g2"] = slurm_node("g2", "IDLE", "DRAIN", features=["gpu"], reason=SCALE_IN)
    out = [a for a in plan(Observed(obj, pods, nodes, slurm, KEYS), NOW) if not isinstance(a, WriteStatus)]
    assert summary(out) == [("DeletePod", "g2")]
    assert isinstance(out[0], DeletePod) and out[0].name == "research-gpu-g2"


def test_mode_switch_replaces_ordinal_pods() -> None:
    spec = gpu_all(nodeSelector={})
    obj = NodeSetObject("research-gpu", NS, "u", 1, spec.model_copy(update={"tolerations": []}))
    old = Pod("research-gpu-0", "gpu-0", 0, None, "g1", True, False, "x")
    slurm = {"gpu-0": slurm_node("gpu-0", features=["gpu"])}
    out = plan(Observed(obj, [old], {"g1": KubeNode("g1", AMD64)}, slurm, KEYS), NOW)
    assert summary(a for a in out if not isinstance(a, WriteStatus)) == [("CreatePod", "g1"), ("Drain", "gpu-0")]


# --- status -----------------------------------------------------------------------------------


def test_status_counts_slurm_states_once_each() -> None:
    pods = [pod(i) for i in range(6)]
    slurm = [
        node(0),
        node(1, "ALLOCATED"),
        node(2, "MIXED", "DRAIN", reason=UPDATE),
        node(3, "IDLE", "DRAIN", reason="admin"),
        node(4, "DOWN", "DRAIN", reason="x"),
        node(5, "IDLE", "NOT_RESPONDING"),
    ]
    status = next(a for a in plan(observe(pods, slurm), NOW) if isinstance(a, WriteStatus)).status
    counts = {k: status[k] for k in ("idle", "allocated", "draining", "drained", "down")}
    assert counts == {"idle": 2, "allocated": 1, "draining": 1, "drained": 1, "down": 1}
    assert (status["desired"], status["ready"], status["updated"], status["observedGeneration"]) == (6, 6, 6, 3)


def test_condition_transition_time_moves_only_on_change() -> None:
    pods, slurm = steady(2)
    first = next(a for a in plan(observe(pods, slurm), NOW) if isinstance(a, WriteStatus)).status
    later = datetime(2026, 11, 2, tzinfo=UTC)
    second = next(a for a in plan(observe(pods, None, status=dict(first)), later) if isinstance(a, WriteStatus)).status
    times = {c["type"]: c["lastTransitionTime"] for c in second["conditions"]}
    assert times["Ready"] == "2026-11-01T12:00:00Z"
    assert times["SlurmReachable"] == "2026-11-02T00:00:00Z"


def test_actions_carry_event_text() -> None:
    for action in (
        Drain("cpu-1", SCALE_IN),
        Resume("cpu-1", "x"),
        RemoveSlurmNode("cpu-1", "y"),
        DeletePod("p", "cpu-1", "z"),
    ):
        reason, message = action.event()
        assert reason and "cpu-1" in message


def test_status_reports_replicas_and_selector_for_the_scale_subresource() -> None:
    """The scale subresource: `kubectl scale`, an HPA or KEDA read status.replicas (pods that exist and are not
    leaving) and status.selector (the label selector of the NodeSet's pods)."""
    pods, nodes = steady(2)
    status = next(
        a.status for a in plan(observe([*pods, pod(2, deleting=True)], nodes), NOW) if isinstance(a, WriteStatus)
    )
    assert status["replicas"] == 2
    assert status["selector"] == "slurm.sunk.dev/cluster=research,slurm.sunk.dev/nodeset=cpu"


def test_gpus_from_node_labels_build_each_pod_from_its_node() -> None:
    """The plan hands each pinned Node's labels to the pod builder: GPU feature discovery's labels
    become that pod's GRES; a MIG Node without autodetect nvml gets no pod and TemplateValid=False
    naming the field."""
    spec = gpu_all(gpus={"type": "h100", "count": 8, "fromNodeLabels": True})
    gfd = {**H100, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}
    nodes = [KubeNode("g1", gfd, GPU_TAINT), KubeNode("g2", H100, GPU_TAINT)]
    obs = Observed(NodeSetObject("research-gpu", NS, "u", 1, spec), [], {n.name: n for n in nodes}, {}, KEYS)
    made = {a.slurm_node: a.pod for a in plan(obs, NOW) if isinstance(a, CreatePod)}
    confs = {n: p["spec"]["containers"][0]["command"][-1] for n, p in made.items()}
    assert "Gres=gpu:h100_80gb_hbm3:8" in confs["g1"].split()
    assert "Gres=gpu:h100:8" in confs["g2"].split()  # no labels: the spec's
    mig = {**H100, "nvidia.com/mig.strategy": "single", "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb",
           "nvidia.com/gpu.count": "56"}  # fmt: skip
    obs = Observed(
        NodeSetObject("research-gpu", NS, "u", 1, spec), [], {"m1": KubeNode("m1", mig, GPU_TAINT)}, {}, KEYS
    )
    out = plan(obs, NOW)
    assert not [a for a in out if isinstance(a, CreatePod)]
    (status,) = [a for a in out if isinstance(a, WriteStatus)]
    cond = {c["type"]: c for c in status.status["conditions"]}
    assert cond["TemplateValid"]["status"] == "False"
    assert "gpus.autodetect: the Node's GPUs are MIG instances" in cond["TemplateValid"]["message"]
