"""plan(): one table of situations per rule, built from literal pods and jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from sunk.runtime.scheduler.fit import NodeView
from sunk.runtime.scheduler.marker import Marker
from sunk.runtime.scheduler.model import JobView, PodResources, PodView, Snapshot
from sunk.runtime.scheduler.plan import (
    DOES_NOT_FIT,
    GRACE,
    PENDING_QUIET,
    Action,
    Bind,
    Cancel,
    Condition,
    Evict,
    Failure,
    Reject,
    Reroute,
    Submit,
    Unfit,
    plan,
)
from sunk.runtime.scheduler.request import JobRequest

from sunk import keys

NODES = {"cpu-0": "k8s-a", "cpu-1": "k8s-b", "cpu-2": "k8s-c"}


def pod(name: str, *, uid: str = "", node: str = "", created: float = 100.0, **kw: Any) -> PodView:
    annotations = dict(kw.pop("annotations", {}))
    return PodView(
        namespace=kw.pop("namespace", "ml"),
        name=name,
        uid=uid or f"uid-{name}",
        created=created,
        node_name=node,
        annotations=annotations,
        resources=kw.pop("resources", PodResources(cpu_millis=1500, memory_bytes=2**30, gpus=0)),
        requests=kw.pop("requests", {"cpu": 1500, "memory": 2**30}),
        **kw,
    )


def bound(name: str, job_id: int, slurm_node: str, *, start: str = "2000", **kw: Any) -> PodView:
    annotations = {keys.JOB_ID: str(job_id), keys.SLURM_NODE: slurm_node, keys.JOB_START: start}
    annotations.update(kw.pop("annotations", {}))
    return pod(name, node=NODES[slurm_node], annotations=annotations, **kw)


def job(job_id: int, marker: Marker, state: str = "PENDING", nodes: tuple[str, ...] = (), **kw: Any) -> JobView:
    kw.setdefault("submit_time", 150.0)
    kw.setdefault("start_time", 2000.0 if state == "RUNNING" else 0.0)
    return JobView(job_id, marker, state, nodes=nodes, **kw)


ROOMY = {"cpu": 8000, "memory": 32 * 2**30, "nvidia.com/gpu": 8, "pods": 110}
"""Allocatable of every Node unless a test says otherwise: room for anything the tests bind."""


def snap(pods: list[PodView], jobs: Sequence[JobView] = (), **kw: Any) -> Snapshot:
    nodes = kw.pop("nodes", {n: NodeView(n, ROOMY) for n in NODES.values()})
    return Snapshot(pods=pods, jobs=list(jobs), node_of=kw.pop("node_of", NODES), nodes=nodes, **kw)


def run(
    pods: list[PodView], jobs: Sequence[JobView] = (), failures: dict[str, Failure] | None = None, **kw: Any
) -> list[Action]:
    return plan(snap(pods, jobs, **kw), failures or {}, now=500.0)


# --- submit ------------------------------------------------------------------------------------


def test_a_pending_pod_gets_one_placeholder_job_shaped_like_its_requests() -> None:
    p = pod("web", resources=PodResources(cpu_millis=1500, memory_bytes=3 * 2**30 + 1, gpus=2))
    [action] = run([p])
    assert isinstance(action, Submit)
    assert action.marker == Marker("pod", "ml", "web", "uid-web")
    assert action.request == JobRequest(nodes=1, cpus_per_task=2, memory_mib=3073, gpus=2)
    assert action.pods == (p.ref,)


def test_namespace_annotations_are_defaults_and_the_pod_overrides_them() -> None:
    p = pod("web", annotations={keys.QOS: "high", keys.TIME_LIMIT: "1:30:00"})
    defaults = {"ml": {keys.PARTITION: "gpu", keys.QOS: "low", keys.ACCOUNT: "research"}}
    [action] = run([p], namespace_defaults=defaults)
    assert isinstance(action, Submit)
    r = action.request
    assert (r.partition, r.qos, r.account, r.time_limit) == ("gpu", "high", "research", 90)


def test_an_invalid_annotation_is_rejected_once_and_not_retried() -> None:
    p = pod("web", annotations={keys.TIME_LIMIT: "soon"})
    [action] = run([p])
    assert isinstance(action, Reject)
    assert action.reason == "Unschedulable" and "'soon' is not a Slurm time" in action.message
    # The glue remembers the attempt by spec hash: nothing more to do.
    assert run([p], failures={p.marker.text: Failure(action.spec_hash, float("inf"))}) == []
    # After a restart the memory is gone, but the pod's condition says it was reported.
    reported = pod("web", annotations={keys.TIME_LIMIT: "soon"}, scheduled=("False", "Unschedulable", action.message))
    assert run([reported]) == []


def test_changing_the_pod_makes_a_new_attempt() -> None:
    p = pod("web", annotations={keys.PARTITION: "nope"})
    [first] = run([p])
    assert isinstance(first, Submit)
    fixed = pod("web", annotations={keys.PARTITION: "batch"})
    [action] = run([fixed], failures={p.marker.text: Failure(first.spec_hash, float("inf"))})
    assert isinstance(action, Submit) and action.request.partition == "batch"


def test_a_slurm_rejection_is_retried_only_after_its_backoff() -> None:
    p = pod("web")
    [first] = run([p])
    assert isinstance(first, Submit)
    failures = {p.marker.text: Failure(first.spec_hash, retry_at=600.0)}
    assert plan(snap([p]), failures, now=599.0) == []
    assert [type(a) for a in plan(snap([p]), failures, now=600.0)] == [Submit]


# --- pending and running jobs --------------------------------------------------------------------


def test_a_pending_job_shows_slurms_reason_on_the_pod_once() -> None:
    p = pod("web")
    j = job(7, p.marker, "PENDING", reason="Resources")
    assert run([p], [j]) == [Condition(p.ref, "SlurmJobPending", "Slurm job 7 is pending (Resources)")]
    same = pod("web", scheduled=("False", "SlurmJobPending", "Slurm job 7 is pending (Resources)"))
    assert run([same], [j]) == []


def test_a_job_pending_for_less_than_a_second_is_not_reported_yet() -> None:
    """Bind latency: most placeholder jobs start within a scheduling pass; a burst's pods are not
    each patched for that moment."""
    p = pod("web")
    fresh = job(7, p.marker, "PENDING", reason="None", submit_time=499.5)
    assert plan(snap([p], [fresh]), {}, now=500.0) == []
    assert plan(snap([p], [fresh]), {}, now=500.0 + PENDING_QUIET) == [
        Condition(p.ref, "SlurmJobPending", "Slurm job 7 is pending")
    ]


def test_a_running_job_binds_the_pod_to_the_node_hosting_its_slurm_node() -> None:
    p = pod("web")
    assert run([p], [job(7, p.marker, "RUNNING", ("cpu-1",))]) == [Bind(p.ref, "k8s-b", 7, "cpu-1", "2000")]


def test_no_binding_while_no_slurmd_pod_maps_the_slurm_node() -> None:
    p = pod("web")
    [action] = run([p], [job(7, p.marker, "RUNNING", ("cpu-9",))])
    assert isinstance(action, Condition) and action.reason == "NoKubernetesNode"


def test_a_bound_pod_holding_its_running_job_needs_nothing() -> None:
    p = bound("web", 7, "cpu-1")
    j = job(7, Marker("pod", "ml", "web", "uid-web"), "RUNNING", ("cpu-1",))
    assert run([p], [j]) == []


def test_a_pod_bound_by_hand_is_left_alone() -> None:
    p = pod("web", node="k8s-a")
    assert run([p]) == []


# --- the job lives as long as the pod -----------------------------------------------------------


def test_preempted_cancelled_failed_or_vanished_jobs_evict_their_bound_pod() -> None:
    m = Marker("pod", "ml", "web", "uid-web")
    for state, reason in [
        ("PREEMPTED", "Preempted"),
        ("CANCELLED", "SlurmJobCancelled"),
        ("NODE_FAIL", "SlurmJobFailed"),
        ("TIMEOUT", "SlurmTimeLimit"),
    ]:
        [action] = run([bound("web", 7, "cpu-1")], [job(7, m, state, ("cpu-1",))])
        assert isinstance(action, Evict) and action.reason == reason, state
        assert "Slurm job 7" in action.message
    [gone] = run([bound("web", 7, "cpu-1")], [])
    assert isinstance(gone, Evict) and gone.reason == "SlurmJobGone"


def test_a_requeued_job_no_longer_holds_the_pod() -> None:
    m = Marker("pod", "ml", "web", "uid-web")
    [pending] = run([bound("web", 7, "cpu-1")], [job(7, m, "PENDING")])
    assert isinstance(pending, Evict) and pending.reason == "SlurmJobRequeued"
    # Requeued and already running again (elsewhere, later): the start time tells.
    [again] = run([bound("web", 7, "cpu-1")], [job(7, m, "RUNNING", ("cpu-1",), start_time=2500.0)])
    assert isinstance(again, Evict) and again.reason == "SlurmJobRequeued"


def test_a_job_granted_on_a_named_node_binds_without_a_start_and_keeps_its_pod_once_read() -> None:
    # Granted on a node the scheduler named (runtime/scheduler/room.py): its start time is the
    # scheduler's, not Slurm's, so the binding records none; once Slurm's own copy is read (any
    # start), the pod still holds, as only a requeue would change the start of a batch job.
    m = Marker("pod", "ml", "web", "uid-web")
    named = job(7, m, "RUNNING", ("cpu-1",), start_time=1999.6, start_exact=False)
    [action] = run([pod("web")], [named])
    assert isinstance(action, Bind) and action.job_start == "" and action.slurm_node == "cpu-1"
    read = job(7, m, "RUNNING", ("cpu-1",), start_time=2000.0)
    assert run([bound("web", 7, "cpu-1", start="")], [read]) == []
    [exact] = run([pod("web")], [read])
    assert isinstance(exact, Bind) and exact.job_start == "2000"


def test_a_job_cancelled_before_it_started_evicts_its_waiting_pod() -> None:
    p = pod("web")
    [action] = run([p], [job(7, p.marker, "CANCELLED")])
    assert isinstance(action, Evict) and action.message.endswith("before it started")


def test_jobs_of_ended_deleted_or_unknown_pods_are_cancelled() -> None:
    m = Marker("pod", "ml", "web", "uid-web")
    running = job(7, m, "RUNNING", ("cpu-1",))
    assert run([], [running]) == [Cancel(7, m, "pod gone")]
    assert run([bound("web", 7, "cpu-1", phase="Succeeded")], [running]) == [Cancel(7, m, "pod web Succeeded")]
    assert run([pod("web", uid="uid-web", deleting=True)], [running]) == [Cancel(7, m, "pod web deleted")]
    # An ended job needs no cancel.
    assert run([], [job(7, m, "COMPLETED")]) == []


def test_a_deleted_pod_still_on_its_node_keeps_its_job_until_it_stops() -> None:
    """Its containers run through the grace period: Slurm keeps its GPUs allocated until the pod
    is gone or has ended, never handing them to another job meanwhile."""
    m = Marker("pod", "ml", "web", "uid-web")
    running = job(7, m, "RUNNING", ("cpu-1",))
    for phase in ("Pending", "Running"):
        assert run([bound("web", 7, "cpu-1", uid="uid-web", deleting=True, phase=phase)], [running]) == []
    assert run([bound("web", 7, "cpu-1", uid="uid-web", deleting=True, phase="Failed")], [running]) == [
        Cancel(7, m, "pod web deleted")
    ]
    assert run([], [running]) == [Cancel(7, m, "pod gone")]


def test_a_pod_recreated_under_the_same_name_gets_a_new_job_and_the_old_one_ends() -> None:
    old = Marker("pod", "ml", "web", "uid-old")
    new = pod("web", uid="uid-new")
    actions = run([new], [job(7, old, "RUNNING", ("cpu-1",))])
    assert [type(a) for a in actions] == [Submit, Cancel]
    assert actions[1] == Cancel(7, old, "pod gone")


def test_a_duplicate_job_is_cancelled_and_the_oldest_kept() -> None:
    p = pod("web")
    actions = run([p], [job(9, p.marker, "PENDING"), job(7, p.marker, "RUNNING", ("cpu-0",))])
    assert Cancel(9, p.marker, "duplicate placeholder job") in actions
    assert Bind(p.ref, "k8s-a", 7, "cpu-0", "2000") in actions


# --- groups ------------------------------------------------------------------------------------


def member(name: str, size: int = 3, **kw: Any) -> PodView:
    annotations = {keys.GROUP: "train", keys.GROUP_SIZE: str(size), **kw.pop("annotations", {})}
    return pod(name, annotations=annotations, **kw)


def test_a_group_waits_for_all_its_pods() -> None:
    pods = [member("w-0"), member("w-1")]
    actions = run(pods)
    assert [type(a) for a in actions] == [Condition, Condition]
    assert isinstance(actions[0], Condition)
    assert actions[0].message == "waiting for the group: 2 of 3 pods pending"


def test_a_complete_group_is_one_job_with_one_node_per_pod_and_the_largest_shape() -> None:
    big = PodResources(cpu_millis=3000, memory_bytes=2**30, gpus=1)
    pods = [member("w-0"), member("w-1", resources=big), member("w-2")]
    [action] = run(pods)
    assert isinstance(action, Submit)
    assert action.marker == Marker("group", "ml", "train")
    assert action.request == JobRequest(nodes=3, cpus_per_task=3, memory_mib=1024, gpus=1)
    assert len(action.pods) == 3


def test_a_running_group_binds_each_pod_to_its_own_allocated_node() -> None:
    pods = [member("w-0"), member("w-1"), member("w-2")]
    j = job(7, pods[0].marker, "RUNNING", ("cpu-0", "cpu-1", "cpu-2"))
    assert run(pods, [j]) == [
        Bind(pods[0].ref, "k8s-a", 7, "cpu-0", "2000"),
        Bind(pods[1].ref, "k8s-b", 7, "cpu-1", "2000"),
        Bind(pods[2].ref, "k8s-c", 7, "cpu-2", "2000"),
    ]


def test_after_a_crash_only_the_unbound_members_are_bound_to_the_free_nodes() -> None:
    g = {keys.GROUP: "train", keys.GROUP_SIZE: "3"}
    pods = [bound("w-0", 7, "cpu-1", annotations=g), member("w-1"), member("w-2")]
    j = job(7, pods[1].marker, "RUNNING", ("cpu-0", "cpu-1", "cpu-2"))
    assert run(pods, [j]) == [
        Bind(pods[1].ref, "k8s-a", 7, "cpu-0", "2000"),
        Bind(pods[2].ref, "k8s-c", 7, "cpu-2", "2000"),
    ]


def test_a_preempted_group_evicts_its_members_but_not_later_replacements() -> None:
    g = {keys.GROUP: "train", keys.GROUP_SIZE: "2"}
    m = Marker("group", "ml", "train")
    pods = [bound("w-0", 7, "cpu-0", annotations=g), member("w-1", size=2, created=900.0)]
    actions = run(pods, [job(7, m, "PREEMPTED", ("cpu-0", "cpu-1"))])
    assert [type(a) for a in actions] == [Evict, Condition]
    assert isinstance(actions[0], Evict)
    assert actions[0].pod.name == "w-0"


def test_group_annotations_must_be_usable() -> None:
    no_size = [pod("w-0", annotations={keys.GROUP: "train"})]
    [a] = run(no_size)
    assert isinstance(a, Reject) and "group-size" in a.message
    mixed = [member("w-0", size=2), member("w-1", size=2, annotations={keys.QOS: "high"})]
    [b] = run(mixed)
    assert isinstance(b, Reject) and "GroupMismatch" in b.message
    bad_name = [pod("w-0", annotations={keys.GROUP: "Not_A_Label", keys.GROUP_SIZE: "1"})]
    [c] = run(bad_name)
    assert isinstance(c, Reject)


def test_the_failed_job_a_rejected_submit_leaves_behind_evicts_nobody() -> None:
    p = pod("web")
    failed = job(7, p.marker, "FAILED", reason="BadConstraints")
    [first] = run([p])
    assert isinstance(first, Submit)
    assert run([p], [failed], failures={p.marker.text: Failure(first.spec_hash, retry_at=600.0)}) == []
    # After a restart the memory is gone; the pod's condition still says it was rejected: retry.
    marked = pod("web", scheduled=("False", "Unschedulable", "Slurm rejected ..."))
    assert [type(a) for a in run([marked], [failed])] == [Submit]


# --- binding only where the kubelet admits ------------------------------------------------------

GI = 2**30


def node(name: str, cpu: int = 8000, used_cpu: int = 0, pods: int = 0, **alloc: int) -> NodeView:
    return NodeView(name, {"cpu": cpu, "memory": 32 * GI, "pods": 110, **alloc}, {"cpu": used_cpu}, pods)


def nodes(**views: NodeView) -> dict[str, NodeView]:
    out = {n: NodeView(n, ROOMY) for n in NODES.values()}
    return out | {v.name: v for v in views.values()}


def test_a_pod_the_node_would_not_admit_is_not_bound_and_told_why_with_numbers() -> None:
    p = pod("web", requests={"cpu": 2000, "memory": GI})
    full = node("k8s-b", used_cpu=7000, pods=3)
    [action] = run([p], [job(7, p.marker, "RUNNING", ("cpu-1",))], nodes=nodes(b=full))
    assert isinstance(action, Unfit) and action.pod == p.ref
    assert action.message == (
        "Slurm job 7 placed this pod on cpu-1, but Kubernetes Node k8s-b would not admit it "
        "(cpu: requested 2000m, 7000m of 8000m allocatable in use (1000m free)); not bound, "
        "retrying until 60 s after the job started, then resubmitting it without cpu-1"
    )
    # Reported once: the condition already says it.
    told = pod("web", requests={"cpu": 2000, "memory": GI}, scheduled=("False", DOES_NOT_FIT, action.message))
    assert run([told], [job(7, p.marker, "RUNNING", ("cpu-1",))], nodes=nodes(b=full)) == []


@pytest.mark.parametrize(
    ("requests", "view"),
    [
        ({"nvidia.com/gpu": 1}, node("k8s-b", **{"nvidia.com/gpu": 0})),
        ({"cpu": 100}, node("k8s-b", pods=110)),
        ({"memory": 33 * GI}, node("k8s-b")),
    ],
)
def test_every_resource_counts(requests: dict[str, int], view: NodeView) -> None:
    p = pod("web", requests=requests)
    [action] = run([p], [job(7, p.marker, "RUNNING", ("cpu-1",))], nodes=nodes(b=view))
    assert isinstance(action, Unfit)


def test_pods_bound_earlier_in_the_same_cycle_count_against_the_node() -> None:
    # Two single-pod jobs on one Node with room for one of them.
    a, b = pod("a", requests={"cpu": 3000}), pod("b", requests={"cpu": 3000})
    jobs = [job(7, a.marker, "RUNNING", ("cpu-1",)), job(8, b.marker, "RUNNING", ("cpu-1",))]
    actions = run([a, b], jobs, nodes=nodes(b=node("k8s-b", cpu=6000, used_cpu=500)))
    assert [type(x) for x in actions] == [Bind, Unfit]
    assert isinstance(actions[1], Unfit)
    assert "3500m of 6000m allocatable in use" in actions[1].message


def test_an_unreadable_node_binds_nothing_there() -> None:
    p = pod("web")
    unread = {n: v for n, v in nodes().items() if n != "k8s-b"}
    [action] = run([p], [job(7, p.marker, "RUNNING", ("cpu-1",))], nodes=unread)
    assert isinstance(action, Condition) and action.reason == "NodeUnreadable"


def test_after_the_grace_the_job_is_replaced_by_one_excluding_the_node() -> None:
    p = pod("web", requests={"cpu": 2000, "memory": GI}, resources=PodResources(2000, GI, 0))
    j = job(7, p.marker, "RUNNING", ("cpu-1",), excluded=("cpu-2",))
    full = nodes(b=node("k8s-b", used_cpu=7000))
    assert [type(a) for a in plan(snap([p], [j], nodes=full), {}, now=2000.0 + GRACE - 1)] == [Unfit]
    unfit, reroute = plan(snap([p], [j], nodes=full), {}, now=2000.0 + GRACE)
    assert isinstance(unfit, Unfit) and unfit.message.endswith("not bound, resubmitting the job without cpu-1")
    assert isinstance(reroute, Reroute) and (reroute.old_job_id, reroute.pods) == (7, (p.ref,))
    # Earlier exclusions (on the Slurm job) stay excluded.
    assert reroute.request == JobRequest(nodes=1, cpus_per_task=2, memory_mib=1024, exclude=("cpu-1", "cpu-2"))
    # Slurm refused that job: the old allocation is kept and the reroute waits for its backoff.
    failures = {p.marker.text: Failure(reroute.spec_hash, 2100.0)}
    assert [type(a) for a in plan(snap([p], [j], nodes=full), failures, now=2090.0)] == [Unfit]
    assert [type(a) for a in plan(snap([p], [j], nodes=full), failures, now=2100.0)] == [Unfit, Reroute]


def test_a_group_binds_no_member_while_one_would_not_fit() -> None:
    pods = [member("w-0"), member("w-1")]
    j = job(7, pods[0].marker, "RUNNING", ("cpu-0", "cpu-1"))
    actions = run(pods, [j], nodes=nodes(b=node("k8s-b", cpu=1000)))
    assert [type(a) for a in actions] == [Condition, Unfit]
    assert isinstance(actions[0], Condition)
    assert actions[0].pod == pods[0].ref and "group member(s) w-1 would not fit" in actions[0].message
    # A group with a member holding a node is not rerouted (that would evict the member).
    held = [bound("w-0", 7, "cpu-0", annotations={keys.GROUP: "train", keys.GROUP_SIZE: "2"}), member("w-1")]
    late = plan(snap(held, [j], nodes=nodes(b=node("k8s-b", cpu=1000))), {}, now=99999.0)
    assert [type(a) for a in late] == [Unfit]


def test_a_pinned_pod_is_bound_with_a_warning() -> None:
    p = pod("web", pinned=("main",))
    [action] = run([p], [job(7, p.marker, "RUNNING", ("cpu-1",))])
    assert isinstance(action, Bind) and "static CPU manager" in action.warning and "main" in action.warning


def test_each_pod_is_bound_with_the_gpu_indices_slurm_gave_the_job_on_its_node() -> None:
    pods = [member("w-0", size=2), member("w-1", size=2)]
    j = job(7, pods[0].marker, "RUNNING", ("cpu-0", "cpu-1"), gpu_indices={"cpu-0": (2, 3), "cpu-1": (0,)})
    assert [(a.slurm_node, a.gpu_indices) for a in run(pods, [j]) if isinstance(a, Bind)] == [
        ("cpu-0", "2,3"),
        ("cpu-1", "0"),
    ]


def test_a_node_of_an_exclusive_nodeset_is_never_bound_and_the_job_rerouted_at_once() -> None:
    p = pod("web", resources=PodResources(1500, GI, 0))
    j = job(7, p.marker, "RUNNING", ("cpu-1",))  # started 2000; run() plans at 500, well within the grace
    unfit, reroute = run([p], [j], exclusive=frozenset({"cpu-1"}))  # the Node itself has room (ROOMY)
    assert isinstance(unfit, Unfit) and "its NodeSet is exclusive" in unfit.message
    assert unfit.message.endswith("not bound, resubmitting the job without cpu-1")
    assert isinstance(reroute, Reroute) and reroute.request.exclude == ("cpu-1",)


# --- groups allocated at their first member (LeaderWorkerSet's LeaderReady) --------------------


def leader_first(name: str, size: int = 3, **kw: Any) -> PodView:
    return member(name, size, annotations={keys.GROUP_START: "first-member"}, **kw)


def test_a_group_that_starts_at_its_first_member_asks_for_every_node_at_once() -> None:
    [action] = run([leader_first("lws-0")])
    assert isinstance(action, Submit)
    assert action.request.nodes == 3  # the whole gang, though only the leader exists yet
    assert [p.name for p in action.pods] == ["lws-0"]


def test_its_members_are_bound_as_they_come_to_the_nodes_left() -> None:
    marker = Marker("group", "ml", "train")
    running = job(7, marker, "RUNNING", nodes=("cpu-0", "cpu-1", "cpu-2"))
    leader = bound(
        "lws-0", 7, "cpu-0", annotations={keys.GROUP: "train", keys.GROUP_SIZE: "3", keys.GROUP_START: "first-member"}
    )
    actions = run([leader, leader_first("lws-0-1"), leader_first("lws-0-2")], [running])
    binds = sorted((a.pod.name, a.slurm_node) for a in actions if isinstance(a, Bind))
    assert binds == [("lws-0-1", "cpu-1"), ("lws-0-2", "cpu-2")]


def test_a_group_whose_members_disagree_on_starting_early_waits_for_all() -> None:
    actions = run([leader_first("lws-0"), member("lws-0-1")])
    assert all(isinstance(a, Condition) and a.reason == "WaitingForGroup" for a in actions), actions
