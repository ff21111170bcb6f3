"""plan(observed, now) -> actions for one NodeSet. Pure: no I/O, no clock, no logging.

Rules, each tested in tests/runtime/operator/test_plan.py:
- Members. replicas: `replicas` pods with stable ordinals (a pod keeps its ordinal; scale-out
  fills the lowest free ones). all-matching-nodes: one pod per eligible Kubernetes Node.
- Scale-in picks victims unscheduled first, then not ready, idle before busy, a node we already
  drain before one we don't (so the choice is stable between resyncs), highest ordinal last.
- A pod is deleted only when Slurm was read and its Slurm node is drained and runs no job (or
  never registered). The operator drains with OPERATOR_REASON_PREFIX; a node someone else
  drained counts as drained but is never resumed or re-drained by us.
- Rolling update (template hash changed): at most maxUnavailable members unavailable at once
  (pod missing, terminating, not ready, or drained by us); each replaced pod is drained and
  deleted once idle, or at once with `force`.
- A member's Slurm node whose pod is gone is removed (DOWN, then DELETE) before the pod is
  created again, so the new slurmd registers fresh with the new node config; unless someone else
  drained it, so their drain survives. Slurm nodes of removed pods are removed the same way.
- Our drains on members that are up to date and not leaving are resumed.
- updateStrategy maintenanceReservation: only outdated pods whose node is in that Slurm
  reservation, while it is active and has the MAINT flag, are drained and replaced; the others
  wait (a drain the update left outside the window is resumed).
- A release upgrade holds the rolling update until slurmctld runs the NodeSet's release: while
  Slurm answers at an older release than the NodeSet's slurmVersion (observed.slurm_release), no
  outdated pod is drained or deleted (a drain the update left is resumed). A slurmd newer than
  slurmctld can't register, and the upgrade's order (sunk.manifests.upgrade) moves slurmctld
  first: its pod may wait on slurmdbd's conversion, which may fail and be set back, and an idle
  slurmd replaced meanwhile would have been lost capacity for nothing.
- updateStrategy OnDelete: an outdated pod is never drained nor deleted for the update (one
  someone deletes is created again from the new template); a rolling-update drain left from
  before is resumed; status.outdated counts them.
- A pod that ended (phase Failed or Succeeded, e.g. evicted) is deleted and then replaced.
- A pod whose Slurm node is another slurmd's record is replaced: Slurm says NOT_RESPONDING, the
  record's address is not the pod's, and its SlurmdStartTime is before the pod's slurmd container
  started (that slurmd ran STALE_GRACE and more, Ready). slurmd -Z registers once, at start: when
  it registered with a controller whose state was then replaced (a set-back restores the
  snapshot, whose record holds the old pod's address), slurmctld pings a dead address and the
  node stays DOWN. Slurm can't reach it, so it runs nothing; the pod is deleted, its node removed,
  and the new pod registers afresh.
- Slurm unreadable: only pods are created; nothing is deleted, drained, resumed or removed.
- all-matching-nodes: a pod is created only if a kubelet would admit it: its requests plus those
  of the non-terminated pods already on its Node (observed.node_usage: the glue adds slurmd pods
  pinned there and not bound yet, and pods it created earlier in the resync) fit the Node's
  status.allocatable (a Node that reports none is not checked). Otherwise nothing is created, the PodsFit condition turns False
  (reason InsufficientResources, naming the Nodes and resources) and a Warning Event names the
  Node, once per change of that condition. replicas mode leaves placement, and that check, to
  kube-scheduler (its NodeResourcesFit filter): a pod that fits nowhere stays Pending with the
  scheduler's FailedScheduling Event.
- power (scale to zero): the NodeSet's nodes are CLOUD nodes of slurm.conf and Slurm's power
  saving decides which run. Members are the first minNodes and every one of its CLOUD nodes Slurm
  has not powered down (POWERING_UP for a pending job, or up); a pod whose node Slurm powered down
  (or is powering down: it does so only to idle nodes) is deleted without a drain. CLOUD nodes
  are never removed from Slurm (they are not dynamic). Slurm unreadable: no pod leaves.
- Eviction protection: every live pod whose Slurm node is registered and not drained-and-idle
  has a PodDisruptionBudget (maxUnavailable 0, selecting that pod alone); once its node is
  drained and runs no job the PDB is removed, so `kubectl drain` waits for the syncer's drain
  and the jobs. PDBs of pods that are gone, leaving, or never registered in Slurm are removed.
  Slurm or the PDBs unreadable: PDBs are neither created nor removed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sunk import keys, naming
from sunk.manifests.nodeset_pdb import protection_budget, protection_name
from sunk.manifests.nodeset_pod import (
    headless_service,
    nodeset_pod,
    template_hash,
)
from sunk.nodeset_resource import NodeSetResourceSpec
from sunk.spec.nodeset import UpdateStrategy
from sunk.spec.upgrade import release_index

from ..slurmrest.models import Node as SlurmNode
from .admission import pod_requests, shortfalls
from .matching import eligible
from .model import (
    Action,
    Budget,
    CreatePod,
    CreateService,
    DeletePod,
    Drain,
    Member,
    Observed,
    Pod,
    PodDoesNotFit,
    Protect,
    RemoveSlurmNode,
    Resume,
    Unprotect,
    WriteStatus,
    busy,
    drained_by_others,
    drained_by_us,
    dynamic,
)
from .status import compute_status, unfit_message

SCALE_IN = f"{naming.OPERATOR_REASON_PREFIX} scale-in"
STALE_GRACE = 60
"""Seconds a Ready slurmd runs before a NOT_RESPONDING record from before it counts as stale: a
slurmd registers within seconds of its start (slurmctld answering)."""
UPDATE = f"{naming.OPERATOR_REASON_PREFIX} rolling update"


def max_unavailable(strategy: UpdateStrategy, desired: int) -> int:
    """An int as is; a percentage of the desired pods, rounded down but at least 1 (else a small
    NodeSet could never update)."""
    value = strategy.max_unavailable
    if isinstance(value, int):
        return value
    return max(1, desired * int(value.rstrip("%")) // 100)


def owns(spec: NodeSetResourceSpec, node: SlurmNode) -> bool:
    """This NodeSet's Slurm node: dynamic, first feature the NodeSet name (node_conf puts it
    first; another NodeSet may list it later), and in replicas mode named `<nodeset>-<n>`."""
    if not dynamic(node) or node.features[:1] != (spec.name,):
        return False
    if spec.mode == "replicas":
        return re.fullmatch(rf"{re.escape(spec.name)}-[0-9]+", node.name) is not None
    return True


def rank(pod: Pod, slurm: Mapping[str, SlurmNode] | None) -> tuple[Any, ...]:
    """Sort key: the pod to remove (or replace) first sorts first."""
    node = slurm.get(pod.slurm_node) if slurm is not None else None
    is_busy = True if slurm is None else (node is not None and busy(node))
    ours = node is not None and drained_by_us(node)
    return (not pod.leaving, pod.scheduled, pod.ready, is_busy, not ours, -(pod.ordinal or 0), pod.name)


def powered_down(node: SlurmNode) -> bool:
    """Slurm power saving took the node down, or is taking it (it does so only to idle nodes)."""
    return bool({"POWERED_DOWN", "POWERING_DOWN"} & node.flags)


def _cloud_ordinal(spec: NodeSetResourceSpec, node: SlurmNode) -> int | None:
    """The ordinal of one of this NodeSet's CLOUD nodes (render.cloud_nodes), else None."""
    m = re.fullmatch(rf"{re.escape(spec.name)}-([0-9]+)", node.name)
    if m is None or "CLOUD" not in node.flags or node.features[:1] != (spec.name,):
        return None
    ordinal = int(m.group(1))
    return ordinal if ordinal < spec.max_nodes else None


def power_members(observed: Observed) -> tuple[dict[str, Member], list[Pod]]:
    """With `power`, Slurm decides: a member per node it has not powered down (POWERING_UP for a
    pending job, or up and running), plus the first `minNodes`. Slurm unreadable: every pod stays
    a member (nothing is scaled in without reading Slurm), and only minNodes are added."""
    spec, slurm = observed.nodeset.spec, observed.slurm
    assert spec.power is not None
    ordinals = set(range(spec.power.min_nodes))
    if slurm is None:
        ordinals |= {p.ordinal for p in observed.pods if p.ordinal is not None and p.ordinal < spec.max_nodes}
    else:
        for node in slurm.values():
            ordinal = _cloud_ordinal(spec, node)
            if ordinal is not None and not powered_down(node):
                ordinals.add(ordinal)
    want = {}
    for ordinal in sorted(ordinals):
        name = naming.slurm_node_name(spec.name, ordinal)
        want[name] = Member(name, ordinal=ordinal)
    victims = [
        p
        for p in observed.pods
        if p.slurm_node not in want or p.ordinal is None or p.slurm_node != naming.slurm_node_name(spec.name, p.ordinal)
    ]
    return want, victims


def members(observed: Observed) -> tuple[dict[str, Member], list[Pod]]:
    """(the desired members by Slurm node name, the pods to scale in), by mode: with power,
    Slurm's demand; all-matching-nodes, one per eligible Node; replicas, numbered members."""
    spec = observed.nodeset.spec
    if spec.power is not None and spec.mode == "replicas":
        return power_members(observed)
    if spec.mode == "all-matching-nodes":
        return _matching_members(observed)
    return _numbered_members(observed)


def _matching_members(observed: Observed) -> tuple[dict[str, Member], list[Pod]]:
    """One member per Node the NodeSet selects; pods on any other Node scale in."""
    spec = observed.nodeset.spec
    want: dict[str, Member] = {}
    for kn in sorted(observed.kube_nodes.values(), key=lambda n: n.name):
        if eligible(spec, kn):
            m = Member(naming.slurm_node_for_kube_node(kn.name), kube_node=kn.name)
            want[m.slurm_node] = m
    return want, [p for p in observed.pods if p.slurm_node not in want]


def _numbered_members(observed: Observed) -> tuple[dict[str, Member], list[Pod]]:
    """`replicas` numbered members: the numbered pods kept (the most expendable scale in first,
    as do pods of no member's name), then the lowest free ordinals."""
    spec = observed.nodeset.spec
    count = spec.desired_replicas or 0
    numbered = [
        p
        for p in observed.pods
        if p.ordinal is not None and p.slurm_node == naming.slurm_node_name(spec.name, p.ordinal)
    ]
    numbered_names = {p.name for p in numbered}
    victims = [p for p in observed.pods if p.name not in numbered_names]
    excess = len(numbered) - count
    if excess > 0:
        ranked = sorted(numbered, key=lambda p: rank(p, observed.slurm))
        victims += ranked[:excess]
        numbered = ranked[excess:]
    want = {p.slurm_node: Member(p.slurm_node, ordinal=p.ordinal) for p in numbered}
    used = {p.ordinal for p in observed.pods if p.ordinal is not None}
    ordinal = 0
    while len(want) < count:
        if ordinal not in used:
            name = naming.slurm_node_name(spec.name, ordinal)
            want[name] = Member(name, ordinal=ordinal)
        ordinal += 1
    return want, victims


def _deletable(node: SlurmNode | None, force: bool) -> bool:
    """Caller checked Slurm was read. A node that never registered has nothing to protect."""
    return node is None or force or (node.drain and not busy(node))


def current_pods(observed: Observed) -> dict[str, Pod]:
    """The pod standing for each Slurm node: a live one before a terminating one."""
    pods: dict[str, Pod] = {}
    for p in sorted(observed.pods, key=lambda p: (p.leaving, p.name)):
        pods.setdefault(p.slurm_node, p)
    return pods


def _build(observed: Observed, m: Member) -> dict[str, Any] | str:
    """The member's pod, or why it can't be built (a ConfigMap missing or malformed)."""
    ns = observed.nodeset
    try:
        return nodeset_pod(
            ns.spec,
            namespace=ns.namespace,
            config_keys=observed.config_keys,
            ordinal=m.ordinal,
            kube_node=m.kube_node,
            owner=ns.owner,
            node_labels=_labels(observed, m.kube_node),
        )
    except ValueError as err:
        return str(err)


def _labels(observed: Observed, kube_node: str | None) -> Mapping[str, str] | None:
    """The labels of the Node a member's pod is pinned to (gpus.fromNodeLabels reads them)."""
    kn = observed.kube_nodes.get(kube_node or "")
    return kn.labels if kn is not None else None


def _ended(observed: Observed) -> list[Action]:
    """0. Pods that ended (evicted, failed) run nothing any more: deleted so they can be replaced.
    Still only with Slurm read, like every deletion."""
    if observed.slurm is None:
        return []
    return [
        DeletePod(p.name, p.slurm_node, "the pod ended; it is replaced")
        for p in observed.pods
        if p.terminal and not p.deleting
    ]


def _stale_registrations(observed: Observed, now: datetime) -> list[Action]:
    """0b. Pods whose Slurm node is an earlier slurmd's record that Slurm can't reach (the rule in
    the module docstring). Only with Slurm read, like every deletion."""
    slurm = observed.slurm
    if slurm is None:
        return []
    out: list[Action] = []
    for p in observed.pods:
        node = slurm.get(p.slurm_node)
        if p.leaving or not p.ready or p.started is None or not p.ip or node is None:
            continue
        if not dynamic(node) or "NOT_RESPONDING" not in node.flags or node.address in ("", p.ip):
            continue
        registered = node.slurmd_start_time
        if (registered is None or registered < p.started) and now.timestamp() - p.started >= STALE_GRACE:
            why = f"Slurm reaches its node at {node.address}, a slurmd before this pod's ({p.ip}); it registers afresh"
            out.append(DeletePod(p.name, p.slurm_node, why))
    return out


@dataclass
class _Creation:
    actions: list[Action]
    unfit: dict[str, tuple[str, str]]
    """Kubernetes Node -> (Slurm node, what does not fit)."""
    build_error: str


def _create_missing(
    observed: Observed, want: Mapping[str, Member], pods: Mapping[str, Pod], desired_hash: str | None
) -> _Creation:
    """1. Members without a pod: a stale Slurm node is cleared first, then the pod is created
    where a kubelet would admit it."""
    spec, slurm = observed.nodeset.spec, observed.slurm
    out = _Creation([], {}, "")
    for m in want.values():
        if m.slurm_node in pods:
            continue
        node = slurm.get(m.slurm_node) if slurm is not None else None
        if node is not None and owns(spec, node) and not drained_by_others(node):
            out.actions.append(RemoveSlurmNode(m.slurm_node, "its pod is gone; the new pod registers it afresh"))
            continue
        if desired_hash is None:
            continue
        manifest = _build(observed, m)
        if isinstance(manifest, str):
            out.build_error = manifest
            continue
        short = _does_not_fit(observed, m, manifest)
        if short:
            out.unfit[m.kube_node or ""] = (m.slurm_node, short)
        else:
            out.actions.append(CreatePod(manifest, m.slurm_node, "missing"))
    return out


def _scale_in(observed: Observed, victims: Sequence[Pod]) -> list[Action]:
    """2. Scale-in: drain, then delete once idle. Never without a Slurm read."""
    slurm = observed.slurm
    if slurm is None:
        return []
    out: list[Action] = []
    for pod in victims:
        if pod.leaving:
            continue
        node = slurm.get(pod.slurm_node)
        if node is not None and powered_down(node) and not busy(node):
            # Slurm powered it down (idle for SuspendTime): no job to drain, the pod goes.
            out.append(DeletePod(pod.name, pod.slurm_node, "Slurm powered its node down (idle)"))
            continue
        if node is not None and not node.drain:
            out.append(Drain(pod.slurm_node, SCALE_IN))
        elif _deletable(node, force=False):
            out.append(DeletePod(pod.name, pod.slurm_node, "scale-in: its Slurm node is drained and idle"))
    return out


def _orphans(observed: Observed, want: Mapping[str, Member], pods: Mapping[str, Pod]) -> list[Action]:
    """5. Slurm nodes whose pod is gone and that the NodeSet no longer wants."""
    slurm, spec = observed.slurm, observed.nodeset.spec
    if slurm is None:
        return []
    return [
        RemoveSlurmNode(name, "its pod was removed")
        for name in sorted(slurm)
        if name not in want and name not in pods and owns(spec, slurm[name])
    ]


def _unfit_events(observed: Observed, unfit: Mapping[str, tuple[str, str]]) -> list[Action]:
    """A Warning per Node a pod does not fit, once per change of the PodsFit condition (no
    Event per resync), for the Nodes it did not name yet."""
    conditions = observed.nodeset.status.get("conditions") or []
    previous: Mapping[str, Any] = next((c for c in conditions if c.get("type") == keys.PODS_FIT), {})
    if not unfit or previous.get("message") == unfit_message(unfit):
        return []
    said = str(previous.get("message") or "")
    return [
        PodDoesNotFit(kube, slurm_node, f"the slurmd pod does not fit ({short}); not created")
        for kube, (slurm_node, short) in sorted(unfit.items())
        if f"{kube} ({short})" not in said
    ]


def plan(observed: Observed, now: datetime) -> list[Action]:
    """The NodeSet's actions, step by step (the rules are in the module docstring)."""
    ns, slurm = observed.nodeset, observed.slurm
    want, victims = members(observed)
    pods = current_pods(observed)
    desired_hash = None if observed.missing_config else template_hash(ns.spec, observed.config_keys)
    actions = _ended(observed) + _stale_registrations(observed, now)
    if not observed.service_exists:
        actions.append(CreateService(headless_service(ns.spec, namespace=ns.namespace, owner=ns.owner)))
    created = _create_missing(observed, want, pods, desired_hash)
    actions += created.actions
    actions += _scale_in(observed, victims)
    if desired_hash is not None and slurm is not None:  # 3. rolling update, 4. resume our drains
        actions += _update(observed, want, pods, desired_hash, now)
    actions += _orphans(observed, want, pods)
    protected = len(observed.budgets or ())
    if slurm is not None and observed.budgets is not None:  # 6. eviction protection
        shield, protected = _protection(observed, observed.budgets, slurm)
        actions += shield
    actions += _unfit_events(observed, created.unfit)
    status = compute_status(observed, want, pods, desired_hash, created.build_error, now, created.unfit, protected)
    if status != dict(ns.status):
        actions.append(WriteStatus(status))
    return actions


def _protection(
    observed: Observed, budgets: Sequence[Budget], slurm: Mapping[str, SlurmNode]
) -> tuple[list[Action], int]:
    """(PDBs to create and remove, how many pods are protected once they are applied)."""
    ns = observed.nodeset
    have = {b.name: b for b in budgets}
    out: list[Action] = []
    wanted: set[str] = set()
    for p in sorted(observed.pods, key=lambda p: p.name):
        node = slurm.get(p.slurm_node)
        if p.leaving or node is None or not p.uid or (node.drain and not busy(node)):
            continue
        name = protection_name(p.name)
        wanted.add(name)
        if name not in have:
            budget = protection_budget(
                ns.spec, namespace=ns.namespace, pod_name=p.name, pod_uid=p.uid, slurm_node=p.slurm_node
            )
            out.append(Protect(budget, p.slurm_node))
    for name in sorted(set(have) - wanted):
        b = have[name]
        node = slurm.get(b.slurm_node)
        why = (
            "its Slurm node is drained and idle: evictions allowed"
            if node is not None and node.drain and not busy(node)
            else "its pod is gone or leaving, or its Slurm node is not registered"
        )
        out.append(Unprotect(name, b.slurm_node, why))
    return out, len(wanted)


def _does_not_fit(observed: Observed, m: Member, manifest: Mapping[str, Any]) -> str:
    """What a kubelet would refuse the pod for on its pinned Node ('' if it fits or is unchecked)."""
    kn = observed.kube_nodes.get(m.kube_node or "")
    if kn is None or kn.allocatable is None:
        return ""
    used = observed.node_usage.get(kn.name, {})
    return "; ".join(str(s) for s in shortfalls(kn.allocatable, used, pod_requests(manifest)))


def maintenance_nodes(observed: Observed, name: str, now: datetime) -> frozenset[str]:
    """The nodes of reservation `name` if it is read, has the MAINT flag and is active at `now`;
    else none (the update waits)."""
    resv = (observed.reservations or {}).get(name)
    if resv is None or "MAINT" not in resv.flags or not resv.active(now.timestamp()):
        return frozenset()
    return resv.nodes


def _update(
    observed: Observed, want: Mapping[str, Member], pods: Mapping[str, Pod], desired_hash: str, now: datetime
) -> list[Action]:
    """A rolling update, in phases: the outdated members that wait (OnDelete, or outside the
    maintenance reservation) have the update's drain lifted; the others are drained and deleted,
    as many at once as maxUnavailable leaves room for; up-to-date members we drained resume."""
    spec = observed.nodeset.spec
    slurm = observed.slurm or {}
    live = [pods[n] for n in want if n in pods and not pods[n].leaving]
    budget = _update_budget(spec.update_strategy, want, pods, slurm)
    outdated = [p for p in live if p.template_hash != desired_hash]
    held, outdated, why_held = _held(observed, outdated, now)
    out: list[Action] = []
    for pod in held:  # never replaced now; a drain the update left is lifted
        node = slurm.get(pod.slurm_node)
        if node is not None and node.drain and node.reason == UPDATE:
            out.append(Resume(pod.slurm_node, why_held))
    out += _roll(outdated, budget, slurm, spec.update_strategy.force, desired_hash)
    for pod in live:
        node = slurm.get(pod.slurm_node)
        if pod.template_hash == desired_hash and node is not None and drained_by_us(node):
            out.append(Resume(pod.slurm_node, "member is up to date and stays"))
    return out


def _update_budget(
    strategy: UpdateStrategy, want: Mapping[str, Member], pods: Mapping[str, Pod], slurm: Mapping[str, SlurmNode]
) -> int:
    """How many more members the update may take down: maxUnavailable less those already down
    (missing, leaving, not ready, or drained by us)."""

    def unavailable(name: str) -> bool:
        pod, node = pods.get(name), slurm.get(name)
        if pod is None or pod.leaving or not pod.ready:
            return True
        return node is not None and drained_by_us(node)

    return max_unavailable(strategy, len(want)) - sum(unavailable(n) for n in want)


def _held(observed: Observed, outdated: list[Pod], now: datetime) -> tuple[list[Pod], list[Pod], str]:
    """(the outdated pods that wait, those replaced now, why they wait)."""
    spec = observed.nodeset.spec
    strategy = spec.update_strategy
    if behind(observed.slurm_release, spec.slurm_version):
        return (
            outdated,
            [],
            f"slurmctld answers at {observed.slurm_release}: slurmd pods of {spec.slurm_version} wait for it",
        )
    if strategy.type == "OnDelete":
        return outdated, [], "updateStrategy OnDelete: replaced only when deleted"
    if strategy.maintenance_reservation is not None:
        window = maintenance_nodes(observed, strategy.maintenance_reservation, now)
        return (
            [p for p in outdated if p.slurm_node not in window],
            [p for p in outdated if p.slurm_node in window],
            "outside the maintenance reservation: the update waits for it",
        )
    return [], outdated, ""


def behind(answered: str | None, release: str) -> bool:
    """Slurm answered at a release older than `release` (unknown: not behind)."""
    if answered is None:
        return False
    try:
        return release_index(answered) < release_index(release)
    except ValueError:
        return False


def _roll(
    outdated: list[Pod], budget: int, slurm: Mapping[str, SlurmNode], force: bool, desired_hash: str
) -> list[Action]:
    """Drain the outdated members, most expendable first, within the budget (one already down
    costs none), and delete each once Slurm shows it drained and idle (at once with force)."""
    out: list[Action] = []
    for pod in sorted(outdated, key=lambda p: rank(p, slurm)):
        node = slurm.get(pod.slurm_node)
        counted = not pod.ready or (node is not None and drained_by_us(node))
        if not counted:
            if budget <= 0:
                continue
            budget -= 1
        if node is not None and not node.drain:
            out.append(Drain(pod.slurm_node, UPDATE))
            if not force:
                continue  # delete once Slurm shows it drained and idle, on a later resync
        if _deletable(node, force):
            out.append(DeletePod(pod.name, pod.slurm_node, f"rolling update to template {desired_hash}"))
    return out


def slurm_names(pods: Iterable[Pod]) -> Sequence[str]:
    return sorted({p.slurm_node for p in pods})
