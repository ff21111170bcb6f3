"""One scheduling decision: observed pods and Slurm jobs -> actions. Pure: no I/O, no clock, no logs.

A workload is one pod, or the pods of one namespace sharing a group annotation; its marker names its
placeholder job. For each workload with live pods:
  1. a bound pod whose job is no longer running on its node lost its allocation -> Evict;
  2. no active job: pods that waited for a job that ended (cancelled, failed) -> Evict; otherwise
     submit once the group is complete and the request is valid (Reject if not, once per attempt);
  3. pending job -> a PodScheduled=False condition with Slurm's reason;
  4. running job -> bind unbound pods to the Kubernetes Nodes of the allocated Slurm nodes that no
     live member holds yet, if the kubelet would admit them there (fit.shortfalls against the
     Node's allocatable and its pods' requests, counting binds planned earlier in this cycle).
     A pod that would not fit is not bound (a group binds no member while any would not fit):
     PodScheduled=False and a Warning Event with the numbers. The job is kept and the bind retried
     every cycle for GRACE seconds from the job's start (room may free up: a pod terminating, a
     DaemonSet rollout); then, if no member holds a node, the job is replaced by one that excludes
     the nodes that did not fit (Reroute: submitted first, the old job cancelled after).
Then every active job whose workload has no live pod left is cancelled (pod ended, deleted, or an
orphan left by a crash).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from sunk import keys

from ..slurmrest.podref import PodRef
from .fit import NodeView, Shortfall, shortfalls
from .marker import Marker, valid_group_name
from .model import JobView, PodView, Snapshot
from .request import NO_TOPOLOGY, Invalid, JobRequest, Topology, build_request, spec_hash

PENDING_REASON = "SlurmJobPending"
UNSCHEDULABLE = "Unschedulable"
"""kube-scheduler's reason for a pod that cannot be placed; tools (autoscalers, kubectl) know it."""
GANG_REFUSED = "GangRefused"
"""PodScheduled=False reason (and Warning Event) of a gang that can never run as asked: larger than
any block, or refused by Slurm at submit (more GPUs or nodes than the pool holds). It is in no
queue, so nothing behind it waits for it; it is tried again only when its pods change (or, for
Slurm's refusal, after a backoff)."""
GANG_WAITING = "GangWaiting"
"""PodScheduled=False reason (and one Normal Event per change) of a gang whose job Slurm holds
pending: it will fit later; what it waits for is Slurm's reason. It holds lower-priority work back
only as Slurm's own priorities and backfill say."""
DOES_NOT_FIT = "NodeDoesNotFit"
"""PodScheduled=False reason while the Node Slurm chose would not admit the pod."""
GRACE = 60.0
"""Default (SUNK_BIND_GRACE) seconds from the job's start during which a bind that does not fit is retried on the same
allocation before the job is rerouted. Long enough for what frees room by itself (a pod's grace
period is 30 s by default; a DaemonSet pod being replaced), short enough that a node that will not
fit (an exclusive NodeSet's slurmd holds it all, allocatable below Slurm's view) costs a minute."""

PENDING_QUIET = 2.0
"""Seconds a job may be pending before its pods say so (PodScheduled=False, SlurmJobPending):
slurmctld starts batch jobs in its background pass, once a second (never at submission, measured
on 24.11), and one patch per pod of a burst for a state that lasts under a second is only load.
Slurm's submit_time has whole seconds, so a job looks up to 1 s older than it is: 2 s, not 1."""

_ENDED = {
    "PREEMPTED": ("Preempted", "was preempted by a higher-priority Slurm job"),
    "CANCELLED": ("SlurmJobCancelled", "was cancelled"),
    "TIMEOUT": ("SlurmTimeLimit", "reached its time limit"),
    "COMPLETED": ("SlurmJobEnded", "ended"),
    "DEADLINE": ("SlurmTimeLimit", "reached its deadline"),
}


@dataclass(frozen=True)
class Failure:
    """A remembered failed attempt: no new attempt with the same spec hash before retry_at."""

    spec_hash: str
    retry_at: float


@dataclass(frozen=True)
class Submit:
    marker: Marker
    request: JobRequest
    spec_hash: str
    pods: tuple[PodRef, ...]


@dataclass(frozen=True)
class Reject:
    """An invalid request: Event + PodScheduled=False on each pod, remembered until the pods change."""

    marker: Marker
    spec_hash: str
    pods: tuple[PodRef, ...]
    reason: str
    message: str


@dataclass(frozen=True)
class Bind:
    pod: PodRef
    node: str
    job_id: int
    slurm_node: str
    job_start: str
    warning: str = ""
    """A Warning Event to write with the binding (CPU pinning Slurm does not know about)."""
    gpu_indices: str = ""
    """The GPUs Slurm gave the job on this node ("0,1"), written onto the pod with the Binding."""


@dataclass(frozen=True)
class Unfit:
    """The Node Slurm chose would not admit the pod: not bound; PodScheduled=False + Warning Event."""

    pod: PodRef
    message: str


@dataclass(frozen=True)
class Reroute:
    """Replace a running job whose nodes did not fit with one excluding them. The new job is
    submitted before the old one is cancelled, so the workload never lacks an active job (a crash
    in between leaves two; the duplicate rule keeps the older, and the reroute happens again)."""

    marker: Marker
    old_job_id: int
    request: JobRequest
    spec_hash: str
    pods: tuple[PodRef, ...]


@dataclass(frozen=True)
class Evict:
    pod: PodRef
    reason: str
    message: str


@dataclass(frozen=True)
class Cancel:
    job_id: int
    marker: Marker
    reason: str


@dataclass(frozen=True)
class Condition:
    """PodScheduled=False with a reason, no Event (waiting is not news) unless `event` is set."""

    pod: PodRef
    reason: str
    message: str
    event: bool = False
    """Also a Normal Event with the reason and message (a gang's wait: users look for it there)."""


Action = Submit | Reject | Bind | Evict | Cancel | Condition | Unfit | Reroute


def _ended(job: JobView | None, job_id: int | None) -> tuple[str, str]:
    if job is None:
        return "SlurmJobGone", f"Slurm job {job_id} is gone"
    if job.active:
        word = "was suspended" if job.state == "SUSPENDED" else "was requeued"
        return "SlurmJobRequeued", f"Slurm job {job.job_id} {word} and no longer holds this pod's node"
    reason, what = _ENDED.get(job.state, ("SlurmJobFailed", f"ended in state {job.state}"))
    return reason, f"Slurm job {job.job_id} {what}" + (f" ({job.reason})" if job.reason not in ("", "None") else "")


def _condition(pod: PodView, reason: str, message: str, *, event: bool = False) -> list[Action]:
    if pod.scheduled == ("False", reason, message):
        return []
    return [Condition(pod.ref, reason, message, event)]


def refused_reason(marker: Marker) -> str:
    """The PodScheduled reason when Slurm refuses a workload's job at submit."""
    return GANG_REFUSED if marker.kind == "group" else UNSCHEDULABLE


def event_reason(reason: str) -> str:
    """The Warning Event's reason for a refusal: a gang's own, else kube-scheduler's word."""
    return GANG_REFUSED if reason == GANG_REFUSED else "FailedScheduling"


def _group_size(members: Sequence[PodView]) -> int | Invalid:
    values = {p.annotations.get(keys.GROUP_SIZE, "").strip() for p in members}
    group = members[0].group or ""
    if not valid_group_name(group):
        return Invalid("InvalidAnnotation", f"{keys.GROUP}: {group!r} is not a DNS label")
    if len(values) != 1:
        return Invalid("GroupMismatch", f"members of group {group} disagree on {keys.GROUP_SIZE}: {sorted(values)}")
    value = values.pop()
    if not value.isdigit() or not 1 <= int(value) <= 100_000:
        return Invalid("InvalidAnnotation", f"{keys.GROUP_SIZE}: a group needs a size from 1 to 100000, got {value!r}")
    return int(value)


def _first_member_starts(members: Sequence[PodView]) -> bool:
    """Whether the group is allocated whole at its first member (keys.GROUP_START)."""
    return all(p.annotations.get(keys.GROUP_START, "").strip() == "first-member" for p in members)


def _submit_or_reject(
    marker: Marker,
    members: Sequence[PodView],
    defaults: Mapping[str, str],
    failures: Mapping[str, Failure],
    now: float,
    topology: Topology,
) -> list[Action]:
    outcome: JobRequest | Invalid
    size = _group_size(members) if marker.kind == "group" else len(members)
    if isinstance(size, Invalid):
        outcome = size
    elif len(members) < size and not _first_member_starts(members):
        msg = f"waiting for the group: {len(members)} of {size} pods pending"
        return [a for p in members for a in _condition(p, "WaitingForGroup", msg)]
    else:
        # The oldest pods form the group; any extra waits for a free slot. A group that starts
        # at its first member asks for all its nodes now; the members still to come take the rest.
        members = sorted(members, key=lambda p: (p.created, p.name))[:size]
        outcome = build_request(members, defaults, nodes=size, topology=topology)
    digest = spec_hash(outcome, members)
    failure = failures.get(marker.text)
    if failure is not None and failure.spec_hash == digest and now < failure.retry_at:
        return []
    refs = tuple(p.ref for p in members)
    if isinstance(outcome, Invalid):
        gang = outcome.reason == GANG_REFUSED
        reason = GANG_REFUSED if gang else UNSCHEDULABLE
        message = outcome.message if gang else f"{outcome.reason}: {outcome.message}"
        if all(p.scheduled == ("False", reason, message) for p in members):
            return []  # reported before a restart; the condition remembers it
        return [Reject(marker, digest, refs, reason, message)]
    return [Submit(marker, outcome, digest, refs)]


def _workload(
    marker: Marker,
    pods: Sequence[PodView],
    jobs: Sequence[JobView],
    snap: Snapshot,
    failures: Mapping[str, Failure],
    now: float,
    nodes: dict[str, NodeView],
    grace: float,
    topology: Topology = NO_TOPOLOGY,
) -> list[Action]:
    """One workload's actions, in four phases: the pods already bound (kept while their job holds
    them, else evicted); then, for the pods not bound yet, with no active job, evict those whose
    job ended and submit (or reject) one; with a job not running yet, say why they wait; with a
    running job, place them on its nodes (`nodes` is this cycle's view of the Nodes, updated with
    every Bind planned across workloads) and report, or reroute, those that do not fit."""
    live = sorted((p for p in pods if p.live), key=lambda p: p.name)
    active = sorted((j for j in jobs if j.active), key=lambda j: j.job_id)
    # Two active jobs for one marker only if a submit reply was lost: keep the oldest.
    actions: list[Action] = [Cancel(j.job_id, marker, "duplicate placeholder job") for j in active[1:]]
    job = active[0] if active else None
    unbound, holding = _bound(live, job, {j.job_id: j for j in jobs}, actions)
    if not unbound:
        return actions
    if job is None:
        return actions + _without_job(marker, unbound, jobs, snap, failures, now, topology)
    if not job.running:
        return actions + _waiting(marker, job, unbound, now, topology)
    return actions + _place(marker, job, unbound, holding, snap, failures, now, nodes, grace, topology)


def _bound(
    live: Sequence[PodView], job: JobView | None, by_id: Mapping[int, JobView], actions: list[Action]
) -> tuple[list[PodView], set[str]]:
    """The pods not bound yet, and the Slurm nodes of `job` that pods bound by us hold; a pod we
    bound that its job no longer holds is evicted (into `actions`). A pod bound by hand is left
    alone."""
    unbound: list[PodView] = []
    holding: set[str] = set()
    for pod in live:
        if not pod.node_name:
            unbound.append(pod)
        elif pod.bound_job is not None:
            holds = (
                job is not None
                and job.running
                and pod.bound_job == job.job_id
                and pod.bound_slurm_node in job.nodes
                and pod.bound_start in ("", str(int(job.start_time)))
            )
            if holds:
                holding.add(pod.bound_slurm_node)
            else:
                actions.append(Evict(pod.ref, *_ended(by_id.get(pod.bound_job), pod.bound_job)))
    return unbound, holding


def _without_job(
    marker: Marker,
    unbound: list[PodView],
    jobs: Sequence[JobView],
    snap: Snapshot,
    failures: Mapping[str, Failure],
    now: float,
    topology: Topology,
) -> list[Action]:
    """No active job: the pods that waited for one that ended are evicted; the rest get a job
    submitted (or the reason none can be)."""
    actions: list[Action] = []
    ended = max((j for j in jobs if not j.active), key=lambda j: j.job_id, default=None)
    # A submit Slurm refused can leave a FAILED job behind (BadConstraints): that is the
    # rejection already reported (remembered, or visible on the pods), not a reason to evict.
    rejected = marker.text in failures or any(
        p.scheduled and p.scheduled[1] in (UNSCHEDULABLE, GANG_REFUSED) for p in unbound
    )
    if ended is not None and not rejected:
        # Pods that were already waiting when that job was submitted were waiting for it.
        waited = [p for p in unbound if marker.kind == "pod" or p.created <= ended.submit_time]
        reason, message = _ended(ended, ended.job_id)
        actions += [Evict(p.ref, reason, message + " before it started") for p in waited]
        unbound = [p for p in unbound if p not in waited]
    if unbound:
        defaults = snap.namespace_defaults.get(marker.namespace, {})
        actions += _submit_or_reject(marker, unbound, defaults, failures, now, topology)
    return actions


def _waiting(marker: Marker, job: JobView, unbound: list[PodView], now: float, topology: Topology) -> list[Action]:
    """The job is not running yet: after a quiet while, the pods say why they wait (a gang, what
    for: all its nodes at once, in one block or leaf switch where the topology has them)."""
    if job.state == "PENDING" and now - job.submit_time < PENDING_QUIET:
        return []
    what = "suspended" if job.state == "SUSPENDED" else "pending"
    why = f" ({job.reason})" if job.reason not in ("", "None") else ""
    msg = f"Slurm job {job.job_id} is {what}{why}"
    if marker.kind != "group":
        return [a for p in unbound for a in _condition(p, PENDING_REASON, msg)]
    where = {"block": " in one block", "tree": " under one leaf switch"}.get(topology.kind, "")
    count = len(job.nodes) or _declared(unbound)
    msg += f": the gang waits for {count} nodes free at once{where}"
    return [a for p in unbound for a in _condition(p, GANG_WAITING, msg, event=True)]


def _declared(members: Sequence[PodView]) -> int:
    size = members[0].annotations.get(keys.GROUP_SIZE, "") if members else ""
    return int(size) if size.isdigit() else len(members)


_Unfit = tuple[PodView, str, str, list[Shortfall]]
"""A pod, the Slurm node its job was given, that node's Kubernetes Node, and what it lacks there
(nothing for an exclusive NodeSet's node)."""


def _place(
    marker: Marker,
    job: JobView,
    unbound: list[PodView],
    holding: set[str],
    snap: Snapshot,
    failures: Mapping[str, Failure],
    now: float,
    nodes: dict[str, NodeView],
    grace: float,
    topology: Topology,
) -> list[Action]:
    """The job runs: bind each unbound pod to a free node of it where its Node admits it (a
    group all or nothing), report the rest, and reroute the job once they cannot fit."""
    free = [n for n in job.nodes if n not in holding]
    actions, binds, unfit, planned = _fit(job, unbound, free, snap, nodes)
    if unfit and marker.kind == "group":
        # All or nothing on the Kubernetes side too: members that would fit wait for the others.
        who = ", ".join(sorted(p.name for p, *_ in unfit))
        msg = f"Slurm job {job.job_id}: not bound while group member(s) {who} would not fit their Node"
        actions += [a for b in binds for a in _condition(_by_ref(unbound, b.pod), DOES_NOT_FIT, msg)]
        binds = []
    for b in binds:
        nodes[b.node] = planned[b.node]
    actions += binds
    # Exclusive nodes never make room: no grace for them.
    lasting = all(not short for *_, short in unfit)
    rerouting = bool(unfit) and not holding and (lasting or now >= job.start_time + grace)
    actions += _unfit_reports(job, unfit, rerouting, grace)
    if rerouting:
        actions += _reroute(marker, job, unbound, {n for _, n, _, _ in unfit}, snap, failures, now, topology)
    for pod in unbound[len(free) :]:
        msg = f"group job {job.job_id} has no free node: {len(job.nodes)} nodes, all held"
        actions += _condition(pod, "GroupFull", msg)
    return actions


def _fit(
    job: JobView, unbound: list[PodView], free: list[str], snap: Snapshot, nodes: dict[str, NodeView]
) -> tuple[list[Action], list[Bind], list[_Unfit], dict[str, NodeView]]:
    """Each unbound pod against the next free Slurm node's Kubernetes Node: (the conditions of
    pods with no readable Node, the binds that fit, the pods that do not, the Nodes as they would
    be after those binds)."""
    actions: list[Action] = []
    binds: list[Bind] = []
    unfit: list[_Unfit] = []
    planned = dict(nodes)
    # Members of different shapes: some ask for GPUs themselves, others not (a Namespace default
    # asks for every member alike, and then every member sees the GPUs).
    mixed = len({_own_gpus(p) for p in unbound}) > 1
    for pod, slurm_node in zip(unbound, free, strict=False):
        node = snap.node_of.get(slurm_node)
        view = planned.get(node) if node is not None else None
        if node is None:
            msg = f"Slurm job {job.job_id} runs on {slurm_node}, which no slurmd pod maps to a Kubernetes Node"
            actions += _condition(pod, "NoKubernetesNode", msg)
        elif slurm_node in snap.exclusive:
            unfit.append((pod, slurm_node, node, []))  # Slurm's node, whatever the Node has spare
        elif view is None:
            msg = f"Slurm job {job.job_id} runs on {slurm_node}; Kubernetes Node {node} could not be read"
            actions += _condition(pod, "NodeUnreadable", msg)
        elif short := shortfalls(view, pod.requests):
            unfit.append((pod, slurm_node, node, short))
        else:
            planned[node] = view.plus(pod.requests)  # the next pod bound there this cycle sees it
            start = str(int(job.start_time)) if job.start_exact else ""
            # A CPU-only member of a gang of GPU workers sits on a node whose GPUs the job holds: it
            # is told of none (its containers have NVIDIA_VISIBLE_DEVICES=void from the webhook).
            told = not mixed or _own_gpus(pod)
            gpus = ",".join(str(i) for i in job.gpu_indices.get(slurm_node, ())) if told else ""
            binds.append(Bind(pod.ref, node, job.job_id, slurm_node, start, _pinning(pod, slurm_node), gpus))
    return actions, binds, unfit, planned


def _own_gpus(pod: PodView) -> bool:
    return bool(pod.resources.gpus) or pod.annotations.get(keys.GPUS, "").strip() not in ("", "0")


def _unfit_reports(job: JobView, unfit: list[_Unfit], rerouting: bool, grace: float) -> list[Action]:
    """An Unfit per pod its Node would not admit, saying what it lacks and what happens next
    (none where the pod already says exactly that)."""
    actions: list[Action] = []
    for pod, slurm_node, node, short in unfit:
        what = "; ".join(str(s) for s in short) or "its NodeSet is exclusive: slurmd holds the node for Slurm jobs"
        then = (
            f"resubmitting the job without {slurm_node}"
            if rerouting
            else f"retrying until {grace:.0f} s after the job started, then resubmitting it without {slurm_node}"
        )
        msg = (
            f"Slurm job {job.job_id} placed this pod on {slurm_node}, but Kubernetes Node {node} would not "
            f"admit it ({what}); not bound, {then}"
        )
        if pod.scheduled != ("False", DOES_NOT_FIT, msg):
            actions.append(Unfit(pod.ref, msg))
    return actions


def _by_ref(pods: Sequence[PodView], ref: PodRef) -> PodView:
    return next(p for p in pods if p.ref == ref)


def _pinning(pod: PodView, slurm_node: str) -> str:
    if not pod.pinned:
        return ""
    return (
        f"container(s) {', '.join(pod.pinned)} are Guaranteed QoS with whole CPUs: a kubelet with the "
        f"static CPU manager policy pins them to exclusive cores it picks, and Slurm's CPU accounting of "
        f"{slurm_node} does not know which, so Slurm jobs there may be bound to the same cores. "
        "Request fewer CPUs than the limit (Burstable) to stay in the shared pool"
    )


def _reroute(
    marker: Marker,
    job: JobView,
    unbound: Sequence[PodView],
    misfits: set[str],
    snap: Snapshot,
    failures: Mapping[str, Failure],
    now: float,
    topology: Topology,
) -> list[Action]:
    members = sorted(unbound, key=lambda p: (p.created, p.name))[: len(job.nodes)]
    request = build_request(
        members, snap.namespace_defaults.get(marker.namespace, {}), nodes=len(job.nodes), topology=topology
    )
    if isinstance(request, Invalid):
        return []  # it was valid when submitted; the pods changed since and will be re-planned
    request = replace(request, exclude=tuple(sorted(set(job.excluded) | misfits)))
    digest = spec_hash(request, members)
    failure = failures.get(marker.text)
    if failure is not None and failure.spec_hash == digest and now < failure.retry_at:
        return []  # Slurm refused this reroute (e.g. nothing left outside the exclusions); backing off
    return [Reroute(marker, job.job_id, request, digest, tuple(p.ref for p in members))]


def plan(
    snap: Snapshot,
    failures: Mapping[str, Failure],
    now: float,
    *,
    grace: float = GRACE,
    topology: Topology = NO_TOPOLOGY,
) -> list[Action]:
    pods: dict[str, list[PodView]] = defaultdict(list)
    for pod in snap.pods:
        pods[pod.marker.text].append(pod)
    jobs: dict[str, list[JobView]] = defaultdict(list)
    for job in snap.jobs:
        jobs[job.marker.text].append(job)

    actions: list[Action] = []
    nodes = dict(snap.nodes)
    for key in sorted(pods):
        members = pods[key]
        actions += _workload(members[0].marker, members, jobs.get(key, []), snap, failures, now, nodes, grace, topology)

    for key in sorted(jobs):
        if any(p.live or p.stopping for p in pods.get(key, [])):
            continue  # a deleted pod still on its Node keeps the job until it stops (PodView.stopping)
        gone = pods.get(key)
        reason = "pod gone" if not gone else f"pod {gone[0].name} {'deleted' if gone[0].deleting else gone[0].phase}"
        actions += [Cancel(j.job_id, j.marker, reason) for j in jobs[key] if j.active]
    return actions
