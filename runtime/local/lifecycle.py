"""Node lifecycle for the local cluster, as Kubernetes v1.32's control plane has it.

- Admission (`default_tolerations`, the API server's DefaultTolerationSeconds plugin): a pod created
  without a toleration of `node.kubernetes.io/not-ready` or `node.kubernetes.io/unreachable`
  NoExecute gets one, operator Exists, tolerationSeconds 300 (the flags
  --default-not-ready-toleration-seconds and --default-unreachable-toleration-seconds).
- `plan`, pure, what kube-controller-manager's node lifecycle, taint-eviction and pod GC
  controllers decide from the Nodes, their Leases and the pods at a time `now`:
  - node health: a Node whose kubelet last renewed its Lease (or posted its Ready condition) more
    than the node-monitor grace period ago (--node-monitor-grace-period, 50 s in v1.32, 40 s before)
    gets its Ready, MemoryPressure, DiskPressure and PIDPressure conditions Unknown
    (NodeStatusUnknown, "Kubelet stopped posting node status."), and its pods Ready=False;
  - taints by condition: Ready=Unknown gives `node.kubernetes.io/unreachable` NoSchedule and
    NoExecute (timeAdded), Ready=False `node.kubernetes.io/not-ready` the same; Ready=True removes
    them;
  - taint-based eviction: a pod on a Node with a NoExecute taint it does not tolerate is deleted at
    once (gracefully: on a lost Node it stays Terminating, as no kubelet confirms it); one whose
    tolerations of those taints all carry tolerationSeconds is deleted once the smallest has passed
    since the taint came (or since the pod was created, if later); one tolerating forever stays.
    Each deletion first marks the pod DisruptionTarget (DeletionByTaintManager);
  - pod GC of the non-graceful node shutdown: a terminating pod on a Node that is not Ready and
    carries `node.kubernetes.io/out-of-service` is marked Failed (DeletionByPodGC) and deleted with
    grace 0, so its StatefulSet can create it again elsewhere.
- `LifecycleController`, the glue: observe, plan, apply, every node-monitor period (5 s) and at the
  next eviction deadline.

The kubelet's side (Lease renewals every 10 s, Ready=True posted again when it comes back) is the
node agent's (agent.py); `sunk local node stop|start NAME` stops and starts one Node's agent.

Not modelled: node-startup-grace-period (the cluster's Nodes are Ready from the start), eviction
rate limits and zone disruption states (every Node is one zone here; upstream slows evictions only
when a zone is mostly down), pod GC of orphaned pods (Node deleted) and of terminated pods over the
threshold, the NodeStatusNeverUpdated path, Events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
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
    """Pod GC's deletion with grace 0, the pod marked Failed first."""

    namespace: str
    name: str
    uid: str


Action = MarkNodeUnknown | SetTaints | MarkPodNotReady | Evict | ForceDelete


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


def condition_taints(ready: str, current: Iterable[Obj], now: datetime) -> tuple[Obj, ...]:
    """The Node's taints with the not-ready/unreachable pair that its Ready condition calls for
    (none when True); a NoExecute taint already there keeps its timeAdded."""
    current = list(current)
    want = {"False": NOT_READY, "Unknown": UNREACHABLE}.get(ready)
    kept = [t for t in current if t.get("key") not in (NOT_READY, UNREACHABLE) or t.get("key") == want]
    if want:
        for effect in ("NoSchedule", "NoExecute"):
            if not any(t.get("key") == want and t.get("effect") == effect for t in kept):
                taint: Obj = {"key": want, "effect": effect}
                if effect == "NoExecute":
                    taint["timeAdded"] = rfc3339(now)
                kept.append(taint)
    return tuple(kept)


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


NodeState = tuple[str, tuple[Obj, ...]]
"""A Node's Ready status and its taints, as this pass leaves them."""


def _nodes(
    nodes: Iterable[Obj], leases: Mapping[str, Obj], now: datetime, settings: Settings
) -> tuple[list[Action], dict[str, NodeState]]:
    """Node health, then the taints each Node's Ready condition calls for."""
    actions: list[Action] = []
    state: dict[str, NodeState] = {}
    for node in nodes:
        name = node["metadata"]["name"]
        ready = ready_status(node)
        heard = last_heard(node, leases.get(name))
        if ready != "Unknown" and heard is not None and (now - heard).total_seconds() > settings.node_monitor_grace:
            actions.append(MarkNodeUnknown(name))
            ready = "Unknown"
        current = tuple((node.get("spec") or {}).get("taints") or [])
        taints = condition_taints(ready, current, now)
        if taints != current:
            actions.append(SetTaints(name, taints))
        state[name] = (ready, taints)
    return actions, state


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
    if ready != "True" and _pod_ready(pod):
        actions.append(MarkPodNotReady(*ident))
    delay = eviction_delay(pod, taints)
    if delay is None:
        return actions, None
    due = (_since(pod, taints) or now) + timedelta(seconds=delay)
    if delay == 0 or due <= now:
        return [*actions, Evict(*ident)], None
    return actions, due


def plan(
    nodes: Iterable[Obj],
    leases: Mapping[str, Obj],
    pods: Iterable[Obj],
    now: datetime,
    settings: Settings,
) -> tuple[list[Action], datetime | None]:
    """What the node lifecycle, taint-eviction and pod GC controllers do now, and the next time
    an eviction falls due (None: none pending). Pure: `leases` maps a Node's name to its Lease."""
    actions, state = _nodes(nodes, leases, now, settings)
    pending: list[datetime] = []
    for pod in pods:
        where = state.get((pod.get("spec") or {}).get("nodeName") or "")
        if where is None:
            continue
        more, due = _pod(pod, where, now)
        actions += more
        if due is not None:
            pending.append(due)
    return actions, min(pending) if pending else None


# -- the glue --------------------------------------------------------------------------------


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
        actions, due = plan(
            list(self.store.items(self._nodes)), leases, list(self.store.items(self._pods)), now, self.settings
        )
        for action in actions:
            with contextlib.suppress(ApiError):
                self._apply(action, now)
        return due

    def _apply(self, action: Action, now: datetime) -> None:
        stamp = rfc3339(now)
        if isinstance(action, MarkNodeUnknown):
            node = self.store.get(self._nodes, None, action.node)
            conditions = []
            for c in (node.get("status") or {}).get("conditions") or []:
                if c.get("type") in HEALTH_CONDITIONS and c.get("status") != "Unknown":
                    c = {
                        **c,
                        "status": "Unknown",
                        "reason": "NodeStatusUnknown",
                        "message": "Kubelet stopped posting node status.",
                        "lastTransitionTime": stamp,
                    }
                conditions.append(c)
            log.info("node %s: no heartbeat for %.0f s; Ready Unknown", action.node, self.settings.node_monitor_grace)
            self.store.patch(self._nodes, None, action.node, "merge", {"status": {"conditions": conditions}}, "status")
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
            log.info("pod GC: %s/%s on an out-of-service Node", action.namespace, action.name)
            pod = self.store.find(self._pods, action.namespace, action.name)
            if pod is None or pod["metadata"]["uid"] != action.uid:
                return
            self._pod_status(
                action.namespace,
                action.name,
                action.uid,
                "DisruptionTarget",
                "True",
                "DeletionByPodGC",
                stamp,
                phase="Failed",
            )
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
    ) -> bool:
        """Sets one condition of a pod (the others kept); False when the pod is gone or another."""
        pod = self.store.find(self._pods, namespace, name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return False
        conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") != kind]
        condition: Obj = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": stamp}
        if reason:
            condition["reason"] = reason
        conditions.append(condition)
        body: Obj = {"status": {"conditions": conditions}}
        if phase:
            body["status"]["phase"] = phase
        self.store.patch(self._pods, namespace, name, "merge", body, "status")
        return True
