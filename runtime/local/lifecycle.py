"""Node lifecycle for the local cluster, as Kubernetes v1.32's control plane has it.

- Admission (`default_tolerations`, the API server's DefaultTolerationSeconds plugin): a pod created
  without a toleration of `node.kubernetes.io/not-ready` or `node.kubernetes.io/unreachable`
  NoExecute gets one, operator Exists, tolerationSeconds 300 (the flags
  --default-not-ready-toleration-seconds and --default-unreachable-toleration-seconds).
- `plan`, pure, what kube-controller-manager's node lifecycle, taint-eviction and pod GC
  controllers decide from the Nodes, their Leases and the pods at a time `now`, with what they
  remember between passes (`Memory`: zone states, rate limiters, Nodes gone missing):
  - node health: a Node whose kubelet last renewed its Lease (or posted its Ready condition) more
    than the node-monitor grace period ago (--node-monitor-grace-period, 50 s in v1.32, 40 s before)
    gets its Ready, MemoryPressure, DiskPressure and PIDPressure conditions Unknown
    (NodeStatusUnknown, "Kubelet stopped posting node status."), and its pods Ready=False. A Node
    that registered but never posted Ready has the startup grace instead (--node-startup-grace-period,
    60 s), counted from its creation or Lease; then its conditions are added Unknown
    (NodeStatusNeverUpdated). Until then it is neither tainted nor are its pods marked;
  - taints by condition: Ready=Unknown gives `node.kubernetes.io/unreachable` NoSchedule at once
    (TaintNodesByCondition), Ready=False `node.kubernetes.io/not-ready`; Ready=True removes them;
  - the NoExecute taint of the same key, rate limited per zone (the topology.kubernetes.io region
    and zone labels; a Node labelled node.kubernetes.io/exclude-disruption does not count): each zone
    has a token bucket of burst 1, Nodes waiting in the order they went not Ready. A zone is Normal,
    PartialDisruption (at least 3 and --unhealthy-zone-threshold, 55 %, of its Nodes not Ready) or
    FullDisruption (none Ready). Normal and FullDisruption taint at --node-eviction-rate (0.1 Nodes
    a second), PartialDisruption at --secondary-node-eviction-rate (0.01) in a zone of more than
    --large-cluster-size-threshold (50) Nodes, else not at all. When every zone is fully down the
    controllers assume the fault is theirs: the NoExecute taints come off every Node and no more
    are added until a Node is Ready again (the limiters then come back drained, as SwapLimiter
    does). A Node turning from not-ready to unreachable (or back) swaps its taint at once;
  - taint-based eviction: a pod on a Node with a NoExecute taint it does not tolerate is deleted at
    once (gracefully: on a lost Node it stays Terminating, as no kubelet confirms it); one whose
    tolerations of those taints all carry tolerationSeconds is deleted once the smallest has passed
    since the taint came (or since the pod was created, if later); one tolerating forever stays.
    Each deletion first marks the pod DisruptionTarget (DeletionByTaintManager);
  - pod GC (`pod_gc`, and the out-of-service pass in `_pod`): a terminating pod on a Node that is
    not Ready and carries `node.kubernetes.io/out-of-service` (the non-graceful node shutdown); the
    pods bound to a Node that has been gone for the quarantine (40 s); a terminating pod that was
    never bound; and terminated pods over --terminated-pod-gc-threshold (12500), the kubelet's
    evictions first, then the oldest. Each pod not terminal is marked Failed first (with
    DisruptionTarget DeletionByPodGC for the first two), then deleted with grace 0.
- `LifecycleController`, the glue: observe, plan, apply, every node-monitor period (5 s) and when
  something falls due (an eviction, a zone's next token, an orphan's quarantine).

The kubelet's side (Lease renewals every 10 s, Ready=True posted again when it comes back) is the
node agent's (agent.py); `sunk local node stop|start NAME` stops and starts one Node's agent.

Not modelled: pod GC runs with every pass (upstream every 20 s, so its quarantine can start up to
20 s later there); on leaving full disruption upstream also restarts every Node's grace from then;
the Nodes' queue order is their Ready condition's last transition (upstream: when each was queued);
the memory-, disk- and PID-pressure taints; Events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from ..common.timefmt import rfc3339
from .resources import Resource
from .store import ApiError, Obj, Store

log = logging.getLogger("sunk.local.lifecycle")

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
LEASE_NAMESPACE = "kube-node-lease"
MONITOR_PERIOD = 5.0
"""--node-monitor-period: how often the controller looks at the Nodes (v1.32's default)."""
HEALTH_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
"""The conditions the node lifecycle controller turns Unknown when the kubelet goes silent."""


@dataclass(frozen=True)
class Settings:
    """The control plane's knobs the local cluster takes (`sunk local up` flags)."""

    node_monitor_grace: float = 50.0
    """--node-monitor-grace-period: seconds without a heartbeat before a Node's Ready is Unknown
    (v1.32 default 50 s)."""
    not_ready_toleration: int = 300
    """--default-not-ready-toleration-seconds of the DefaultTolerationSeconds admission plugin."""
    unreachable_toleration: int = 300
    """--default-unreachable-toleration-seconds."""
    node_startup_grace: float = 60.0
    """--node-startup-grace-period: seconds a registered Node that never posted Ready has before it
    is Unknown (v1.32 default 1m)."""
    eviction_rate: float = 0.1
    """--node-eviction-rate: Nodes per second, per zone, that get the NoExecute taint while the zone
    is healthy (and while it is fully down but another zone is not)."""
    secondary_eviction_rate: float = 0.01
    """--secondary-node-eviction-rate: the same while the zone is partly down, for a zone larger
    than `large_cluster_threshold` (0 for one this size or smaller)."""
    unhealthy_zone_threshold: float = 0.55
    """--unhealthy-zone-threshold: the fraction of a zone's Nodes not Ready (and at least 3) that
    makes it partly down."""
    large_cluster_threshold: int = 50
    """--large-cluster-size-threshold."""
    terminated_pod_gc_threshold: int = 12500
    """--terminated-pod-gc-threshold: terminated pods kept before pod GC deletes the oldest (0: never)."""
    orphan_quarantine: float = 40.0
    """Pod GC's quarantine: seconds a Node must stay gone before its pods are deleted (upstream's
    constant, not a flag)."""


# -- admission -------------------------------------------------------------------------------


def default_tolerations(tolerations: Iterable[Mapping[str, Any]], settings: Settings) -> list[Obj]:
    """A pod's tolerations after DefaultTolerationSeconds: a toleration of the not-ready or the
    unreachable NoExecute taint is added unless one already matches it by key (or an empty key)
    and effect (NoExecute or empty)."""
    out = [dict(t) for t in tolerations]
    for key, seconds in ((NOT_READY, settings.not_ready_toleration), (UNREACHABLE, settings.unreachable_toleration)):
        if not any(t.get("key", "") in ("", key) and t.get("effect", "") in ("", "NoExecute") for t in out):
            out.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds})
    return out


def admission(settings: Settings) -> Callable[[Resource, Obj], None]:
    """DefaultTolerationSeconds as the store's mutating admission (store.Store.admission): pods only."""

    def admit(res: Resource, obj: Obj) -> None:
        if res.kind == "Pod":
            spec = obj.setdefault("spec", {})
            spec["tolerations"] = default_tolerations(spec.get("tolerations") or [], settings)

    return admit


# -- the plan --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MarkNodeUnknown:
    node: str
    never: bool = False
    """The kubelet never posted Ready (the startup grace passed): NodeStatusNeverUpdated."""


@dataclass(frozen=True)
class SetTaints:
    node: str
    taints: tuple[Obj, ...]
    """The Node's whole taint list as it should be."""


@dataclass(frozen=True)
class MarkPodNotReady:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class Evict:
    """The taint-eviction controller's graceful deletion."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class ForceDelete:
    """Pod GC's deletion with grace 0: a pod not yet terminal is marked Failed first."""

    namespace: str
    name: str
    uid: str
    why: str = "out-of-service"
    """out-of-service (terminating on such a Node), orphaned (its Node is gone), terminated (over
    the threshold) or unscheduled (terminating and never bound)."""


Action = MarkNodeUnknown | SetTaints | MarkPodNotReady | Evict | ForceDelete

NORMAL, PARTIAL, FULL, INITIAL = "Normal", "PartialDisruption", "FullDisruption", "Initial"
"""A zone's disruption state, as the node lifecycle controller names them."""
EXCLUDE_DISRUPTION = "node.kubernetes.io/exclude-disruption"
"""A Node with this label does not count toward its zone's state."""


EPSILON = 1e-9
"""Refills summed over many passes fall short of a whole token by rounding: this much counts as one."""


@dataclass(frozen=True)
class Bucket:
    """A zone's NoExecute tainting limiter: a token bucket of burst 1 (upstream's
    EvictionRateLimiterBurst) refilled at `qps`; qps 0 never lets one through."""

    qps: float
    tokens: float
    at: datetime

    def refill(self, now: datetime) -> Bucket:
        if self.qps <= 0:
            return Bucket(0.0, 0.0, now)
        gained = self.qps * max(0.0, (now - self.at).total_seconds())
        tokens = self.tokens + gained
        return Bucket(self.qps, 1.0 if tokens >= 1 - EPSILON else tokens, now)

    def swap(self, qps: float, now: datetime) -> Bucket:
        """SwapLimiter: a new bucket at `qps`, full unless the old one was empty (then drained)."""
        if qps == self.qps:
            return self
        if qps <= 0:
            return Bucket(0.0, 0.0, now)
        return Bucket(qps, 1.0 if self.refill(now).tokens >= 1 else 0.0, now)

    def next_token(self) -> datetime | None:
        if self.qps <= 0:
            return None
        return self.at + timedelta(seconds=max(0.0, 1.0 - self.tokens) / self.qps)


@dataclass(frozen=True)
class Memory:
    """What the controllers keep between passes (pure: `plan` takes it and returns the next)."""

    zones: Mapping[str, str] = field(default_factory=dict)
    """Zone key -> its disruption state at the last pass."""
    buckets: Mapping[str, Bucket] = field(default_factory=dict)
    """Zone key -> its NoExecute tainting limiter."""
    missing: Mapping[str, datetime] = field(default_factory=dict)
    """A Node name pods are bound to that is not there -> when pod GC first saw it missing."""


def parse_time(text: str | None) -> datetime | None:
    """metav1.Time or MicroTime (a Lease's renewTime) as an aware datetime; None if absent or bad."""
    if not text:
        return None
    whole = text.rstrip("Z").split(".")[0]
    try:
        return datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return None


def _condition(node: Obj, kind: str) -> Obj | None:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def ready_status(node: Obj) -> str:
    """The Node's Ready condition: "True", "False" or "Unknown" (absent counts as Unknown)."""
    found = _condition(node, "Ready")
    return str(found.get("status", "Unknown")) if found else "Unknown"


def last_heard(node: Obj, lease: Obj | None) -> datetime | None:
    """When the kubelet last showed life: its Lease's renewTime or the Ready heartbeat, or the
    Node's creation when it has neither."""
    ready = _condition(node, "Ready") or {}
    times = [
        parse_time(((lease or {}).get("spec") or {}).get("renewTime")),
        parse_time(ready.get("lastHeartbeatTime")),
        parse_time(node["metadata"].get("creationTimestamp")),
    ]
    found = [t for t in times if t is not None]
    return max(found) if found else None


def zone_key(node: Obj) -> str:
    """GetZoneKey: the Node's region and zone labels ("" when it has neither)."""
    labels = node["metadata"].get("labels") or {}
    region = labels.get("topology.kubernetes.io/region") or labels.get("failure-domain.beta.kubernetes.io/region", "")
    zone = labels.get("topology.kubernetes.io/zone") or labels.get("failure-domain.beta.kubernetes.io/zone", "")
    return f"{region}:\x00:{zone}" if region or zone else ""


def zone_state(readies: Iterable[str | None], threshold: float) -> str:
    """ComputeZoneState: fully down when no Node is Ready, partly down when more than 2 and at
    least `threshold` of them are not Ready (a Node without a Ready condition counts as not Ready)."""
    readies = list(readies)
    down = sum(1 for r in readies if r != "True")
    if down and down == len(readies):
        return FULL
    if down > 2 and down / len(readies) >= threshold:
        return PARTIAL
    return NORMAL


def zone_rate(state: str, size: int, settings: Settings) -> float:
    """The tainting rate of a zone in `state` with `size` Nodes (setLimiterInZone)."""
    if state == PARTIAL:
        return settings.secondary_eviction_rate if size > settings.large_cluster_threshold else 0.0
    return settings.eviction_rate


def disruption(
    sizes: Mapping[str, list[str | None]], memory: Memory, now: datetime, settings: Settings
) -> tuple[dict[str, str], dict[str, Bucket], bool]:
    """handleDisruption: each zone's new state and limiter; True when the whole cluster has just
    gone fully down (every zone FullDisruption), where upstream stops tainting and takes the
    NoExecute taints off every Node."""
    old = {z: s for z, s in memory.zones.items() if z in sizes}
    buckets = {z: b for z, b in memory.buckets.items() if z in sizes}
    for zone in sizes:
        if zone not in old:
            old[zone] = INITIAL
            buckets[zone] = Bucket(settings.eviction_rate, 1.0, now)
    new = {z: zone_state(r, settings.unhealthy_zone_threshold) for z, r in sizes.items()}
    all_are = all(s == FULL for s in new.values())
    all_were = all(s == FULL for s in old.values())
    if all_are and all_were:
        return old, buckets, False
    if all_are:
        return {z: FULL for z in old}, {z: b.swap(0.0, now) for z, b in buckets.items()}, True
    states = dict(old)
    for zone, state in new.items():
        if all_were or old[zone] != state:
            buckets[zone] = buckets[zone].swap(zone_rate(state, len(sizes[zone]), settings), now)
            states[zone] = state
    return states, buckets, False


def no_schedule_taints(ready: str | None, current: Iterable[Obj]) -> list[Obj]:
    """TaintNodesByCondition: the not-ready or unreachable NoSchedule taint that the Ready condition
    calls for (none when True or when there is no Ready condition yet), the other taints kept."""
    want = {"False": NOT_READY, "Unknown": UNREACHABLE}.get(ready or "")
    kept = [
        t
        for t in current
        if t.get("effect") != "NoSchedule" or t.get("key") not in (NOT_READY, UNREACHABLE) or t.get("key") == want
    ]
    if want and not any(t.get("key") == want and t.get("effect") == "NoSchedule" for t in kept):
        kept.append({"key": want, "effect": "NoSchedule"})
    return kept


def _without_no_execute(taints: Iterable[Obj]) -> list[Obj]:
    return [t for t in taints if t.get("effect") != "NoExecute" or t.get("key") not in (NOT_READY, UNREACHABLE)]


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """ToleratesTaint: the effect matches (or is empty), the key matches (or is empty with
    Exists), and Exists or an Equal value."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return True
    return bool(toleration.get("key")) and toleration.get("value", "") == taint.get("value", "")


def eviction_delay(pod: Obj, taints: Iterable[Mapping[str, Any]]) -> float | None:
    """Seconds a pod may stay on a Node with these taints (only NoExecute ones count): 0 when one
    is not tolerated, None when every one is tolerated forever, else the smallest
    tolerationSeconds of the tolerations used (the first one matching each taint)."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    smallest: float | None = None
    for taint in taints:
        if taint.get("effect") != "NoExecute":
            continue
        used = next((t for t in tolerations if tolerates(t, taint)), None)
        if used is None:
            return 0.0
        seconds = used.get("tolerationSeconds")
        if seconds is not None:
            smallest = max(0.0, float(seconds)) if smallest is None else min(smallest, max(0.0, float(seconds)))
    return smallest


def _since(pod: Obj, taints: Iterable[Mapping[str, Any]]) -> datetime | None:
    added = [parse_time(t.get("timeAdded")) for t in taints if t.get("effect") == "NoExecute"]
    stamps = [t for t in added if t is not None]
    created = parse_time(pod["metadata"].get("creationTimestamp"))
    start = min(stamps) if stamps else created
    if start is not None and created is not None:
        start = max(start, created)
    return start


def _pod_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


NodeState = tuple[str | None, tuple[Obj, ...]]
"""A Node's Ready status (None: not posted yet, within the startup grace) and its taints, as this
pass leaves them."""


def _health(node: Obj, lease: Obj | None, now: datetime, settings: Settings) -> tuple[str | None, list[Action]]:
    """tryUpdateNodeHealth: the Node's Ready status after this pass (None: it never posted one and
    its startup grace has not passed) and the marking it needs."""
    name = node["metadata"]["name"]
    heard = last_heard(node, lease)
    found = _condition(node, "Ready")
    grace = settings.node_monitor_grace if found else settings.node_startup_grace
    silent = heard is not None and (now - heard).total_seconds() > grace
    if found is None:
        return ("Unknown", [MarkNodeUnknown(name, never=True)]) if silent else (None, [])
    ready = str(found.get("status", "Unknown"))
    if ready != "Unknown" and silent:
        return "Unknown", [MarkNodeUnknown(name)]
    return ready, []


def _queued_order(node: Obj) -> tuple[str, str]:
    ready = _condition(node, "Ready") or {}
    return (str(ready.get("lastTransitionTime") or ""), node["metadata"]["name"])


def _taint(
    ready: str | None, current: tuple[Obj, ...], bucket: Bucket, stop_all: bool, now: datetime
) -> tuple[tuple[Obj, ...], Bucket, bool]:
    """One Node's taints after this pass, its zone's limiter after it, and whether the Node still
    waits for its NoExecute taint: TaintNodesByCondition's NoSchedule taint at once; the NoExecute
    one off when Ready (or when the whole cluster just went fully down), swapped at once when the
    other key is there, else added when the limiter lets it through."""
    taints = no_schedule_taints(ready, current)
    want = {"False": NOT_READY, "Unknown": UNREACHABLE}.get(ready or "")
    has = {t.get("key") for t in taints if t.get("effect") == "NoExecute"} & {NOT_READY, UNREACHABLE}
    added = {"key": want, "effect": "NoExecute", "timeAdded": rfc3339(now)}
    if ready == "True" or stop_all or not want:
        return tuple(_without_no_execute(taints) if ready == "True" or stop_all else taints), bucket, False
    if has and want not in has:
        return (*_without_no_execute(taints), added), bucket, False
    if has:
        return tuple(taints), bucket, False
    bucket = bucket.refill(now)
    if bucket.tokens >= 1:
        return (*taints, added), Bucket(bucket.qps, bucket.tokens - 1, now), False
    return tuple(taints), bucket, True


def _nodes(
    nodes: Iterable[Obj], leases: Mapping[str, Obj], now: datetime, settings: Settings, memory: Memory
) -> tuple[list[Action], dict[str, NodeState], Memory, datetime | None]:
    """Node health; zone states and their limiters; the taints each Node's Ready condition calls
    for, the NoExecute ones as each zone's limiter lets them through (in the order the Nodes went
    not Ready); and when the next waiting one may go."""
    nodes = sorted(nodes, key=_queued_order)
    actions: list[Action] = []
    readies: dict[str, str | None] = {}
    sizes: dict[str, list[str | None]] = {}
    for node in nodes:
        name = node["metadata"]["name"]
        readies[name], marks = _health(node, leases.get(name), now, settings)
        actions += marks
        if EXCLUDE_DISRUPTION not in (node["metadata"].get("labels") or {}):
            sizes.setdefault(zone_key(node), []).append(readies[name])
    states, buckets, stop_all = disruption(sizes, memory, now, settings)
    for zone in {zone_key(n) for n in nodes} - set(buckets):  # only excluded Nodes: no state, a limiter
        buckets[zone] = memory.buckets.get(zone) or Bucket(settings.eviction_rate, 1.0, now)
    state: dict[str, NodeState] = {}
    waiting: set[str] = set()
    for node in nodes:
        name, zone = node["metadata"]["name"], zone_key(node)
        current = tuple((node.get("spec") or {}).get("taints") or [])
        final, buckets[zone], waits = _taint(readies[name], current, buckets[zone], stop_all, now)
        if final != current:
            actions.append(SetTaints(name, final))
        state[name] = (readies[name], final)
        if waits:
            waiting.add(zone)
    next_token = min((t for t in (buckets[z].next_token() for z in waiting) if t is not None), default=None)
    return actions, state, Memory(states, buckets, memory.missing), next_token


def _pod(pod: Obj, where: NodeState, now: datetime) -> tuple[list[Action], datetime | None]:
    """One bound pod: pod GC if it is terminating on an out-of-service Node, else not-ready
    marking and taint-based eviction (now, or the time it falls due)."""
    meta = pod["metadata"]
    ready, taints = where
    ident = (meta["namespace"], meta["name"], meta["uid"])
    if meta.get("deletionTimestamp"):
        gone = ready != "True" and any(t.get("key") == OUT_OF_SERVICE for t in taints)
        return ([ForceDelete(*ident)] if gone else []), None
    actions: list[Action] = []
    if ready not in ("True", None) and _pod_ready(pod):
        actions.append(MarkPodNotReady(*ident))
    delay = eviction_delay(pod, taints)
    if delay is None:
        return actions, None
    due = (_since(pod, taints) or now) + timedelta(seconds=delay)
    if delay == 0 or due <= now:
        return [*actions, Evict(*ident)], None
    return actions, due


def _terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in (None, "Pending", "Running", "Unknown")


def _gc_order(pod: Obj) -> tuple[bool, str, str]:
    """byEvictionAndCreationTimestamp: pods the kubelet evicted first, then the oldest."""
    status = pod.get("status") or {}
    evicted = status.get("phase") == "Failed" and status.get("reason") == "Evicted"
    return (not evicted, str(pod["metadata"].get("creationTimestamp") or ""), pod["metadata"]["name"])


def pod_gc(
    nodes: Iterable[str], pods: Iterable[Obj], now: datetime, settings: Settings, missing: Mapping[str, datetime]
) -> tuple[list[ForceDelete], dict[str, datetime]]:
    """The pod GC controller's passes but the out-of-service one (in `_pod`): terminated pods over
    the threshold, oldest first; pods bound to a Node gone for the quarantine; terminating pods
    never bound. Returns the actions and the Nodes still missing with when each was first seen so."""
    nodes, pods = set(nodes), list(pods)
    actions: list[ForceDelete] = []

    def ident(pod: Obj) -> tuple[str, str, str]:
        return pod["metadata"]["namespace"], pod["metadata"]["name"], pod["metadata"]["uid"]

    terminated = sorted((p for p in pods if _terminal(p)), key=_gc_order)
    if settings.terminated_pod_gc_threshold > 0:
        excess = len(terminated) - settings.terminated_pod_gc_threshold
        actions += [ForceDelete(*ident(p), why="terminated") for p in terminated[: max(0, excess)]]
    bound = {str((p.get("spec") or {}).get("nodeName") or "") for p in pods}
    gone = bound - nodes - {""}
    still = {name: missing.get(name, now) for name in sorted(gone)}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node in still and (now - still[node]).total_seconds() >= settings.orphan_quarantine:
            actions.append(ForceDelete(*ident(pod), why="orphaned"))
        elif not node and pod["metadata"].get("deletionTimestamp"):
            actions.append(ForceDelete(*ident(pod), why="unscheduled"))
    return list(dict.fromkeys(actions)), still


def plan(
    nodes: Iterable[Obj],
    leases: Mapping[str, Obj],
    pods: Iterable[Obj],
    now: datetime,
    settings: Settings,
    memory: Memory | None = None,
) -> tuple[list[Action], datetime | None, Memory]:
    """What the node lifecycle, taint-eviction and pod GC controllers do now, the next time one of
    them has something due (an eviction, a queued Node's taint, an orphan's quarantine; None:
    nothing), and what they remember for the next pass. Pure: `leases` maps a Node's name to its
    Lease."""
    nodes, pods = list(nodes), list(pods)
    actions, state, memory, due = _nodes(nodes, leases, now, settings, memory or Memory())
    pending: list[datetime] = [due] if due is not None else []
    for pod in pods:
        where = state.get((pod.get("spec") or {}).get("nodeName") or "")
        if where is None:
            continue
        more, when = _pod(pod, where, now)
        actions += more
        if when is not None:
            pending.append(when)
    collected, missing = pod_gc(state, pods, now, settings, memory.missing)
    actions += [a for a in collected if a not in actions]
    pending += [t + timedelta(seconds=settings.orphan_quarantine) for t in missing.values()]
    pending = [t for t in pending if t > now]
    return actions, min(pending) if pending else None, replace(memory, missing=missing)


# -- the glue --------------------------------------------------------------------------------


GC_MESSAGES = {"out-of-service": "PodGC: node is out of service", "orphaned": "PodGC: node no longer exists"}


def unknown_conditions(node: Obj, stamp: str) -> list[Obj]:
    """The Node's conditions once the controller gives up on its kubelet: each health condition
    Unknown, NodeStatusUnknown where the kubelet had posted it, NodeStatusNeverUpdated (added, its
    heartbeat the Node's creation) where it never had."""
    conditions = []
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") in HEALTH_CONDITIONS and c.get("status") != "Unknown":
            c = {**c, "status": "Unknown", "reason": "NodeStatusUnknown",
                 "message": "Kubelet stopped posting node status.", "lastTransitionTime": stamp}  # fmt: skip
        conditions.append(c)
    posted = {c.get("type") for c in conditions}
    created = node["metadata"].get("creationTimestamp") or stamp
    for kind in HEALTH_CONDITIONS:
        if kind not in posted:
            conditions.append({"type": kind, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                               "message": "Kubelet never posted node status.", "lastHeartbeatTime": created,
                               "lastTransitionTime": stamp})  # fmt: skip
    return conditions


class LifecycleController:
    """Runs `plan` against the store and applies its actions, each one idempotent (a pod that has
    gone meanwhile, or changed uid, is left alone)."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self._nodes = store.resource("v1/nodes")
        self._pods = store.resource("v1/pods")
        self._leases = store.resource("coordination.k8s.io/v1/leases")
        self._task: asyncio.Task[Any] | None = None
        self.memory = Memory()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def _loop(self) -> None:
        while True:
            wait = MONITOR_PERIOD
            try:
                due = self.reconcile(datetime.now(UTC))
                if due is not None:
                    wait = min(wait, max(0.2, (due - datetime.now(UTC)).total_seconds()))
            except Exception:
                log.exception("node lifecycle")
            await asyncio.sleep(wait)

    def reconcile(self, now: datetime) -> datetime | None:
        leases = {lease["metadata"]["name"]: lease for lease in self.store.items(self._leases, LEASE_NAMESPACE)}
        actions, due, self.memory = plan(
            list(self.store.items(self._nodes)),
            leases,
            list(self.store.items(self._pods)),
            now,
            self.settings,
            self.memory,
        )
        for action in actions:
            with contextlib.suppress(ApiError):
                self._apply(action, now)
        return due

    def _apply(self, action: Action, now: datetime) -> None:
        stamp = rfc3339(now)
        if isinstance(action, MarkNodeUnknown):
            conditions = unknown_conditions(self.store.get(self._nodes, None, action.node), stamp)
            self.store.patch(self._nodes, None, action.node, "merge", {"status": {"conditions": conditions}}, "status")
            grace = self.settings.node_startup_grace if action.never else self.settings.node_monitor_grace
            said = "never posted Ready" if action.never else "no heartbeat"
            log.info("node %s: %s for %.0f s; Ready Unknown", action.node, said, grace)
        elif isinstance(action, SetTaints):
            self.store.patch(self._nodes, None, action.node, "merge", {"spec": {"taints": list(action.taints)}})
        elif isinstance(action, MarkPodNotReady):
            self._pod_status(action.namespace, action.name, action.uid, "Ready", "False", None, stamp)
        elif isinstance(action, Evict):
            log.info("taint eviction: %s/%s", action.namespace, action.name)
            if self._pod_status(
                action.namespace, action.name, action.uid, "DisruptionTarget", "True", "DeletionByTaintManager", stamp
            ):
                self.store.delete(self._pods, action.namespace, action.name, uid=action.uid)
        else:
            self._collect(action, stamp)

    def _collect(self, action: ForceDelete, stamp: str) -> None:
        """Pod GC: a pod not terminal yet is marked Failed (with DisruptionTarget DeletionByPodGC when
        its Node is out of service or gone), then deleted with grace 0."""
        log.info("pod GC (%s): %s/%s", action.why, action.namespace, action.name)
        pod = self.store.find(self._pods, action.namespace, action.name)
        if pod is None or pod["metadata"]["uid"] != action.uid:
            return
        if not _terminal(pod):
            reason = "DeletionByPodGC" if action.why in ("out-of-service", "orphaned") else None
            kind = "DisruptionTarget" if reason else "Ready"
            status = "True" if reason else "False"
            self._pod_status(
                action.namespace, action.name, action.uid, kind, status, reason, stamp, phase="Failed",
                message=GC_MESSAGES.get(action.why),
            )  # fmt: skip
        self.store.delete(self._pods, action.namespace, action.name, grace=0, uid=action.uid)

    def _pod_status(
        self,
        namespace: str,
        name: str,
        uid: str,
        kind: str,
        status: str,
        reason: str | None,
        stamp: str,
        phase: str | None = None,
        message: str | None = None,
    ) -> bool:
        """Sets one condition of a pod (the others kept); False when the pod is gone or another."""
        pod = self.store.find(self._pods, namespace, name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return False
        conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") != kind]
        condition: Obj = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": stamp}
        if reason:
            condition["reason"] = reason
        if message:
            condition["message"] = message
        conditions.append(condition)
        body: Obj = {"status": {"conditions": conditions}}
        if phase:
            body["status"]["phase"] = phase
        self.store.patch(self._pods, namespace, name, "merge", body, "status")
        return True
