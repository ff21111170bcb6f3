"""The scheduler's view of Kubernetes, kept current by watches (runtime/common/informer.py)
instead of lists every cycle and reads before every Binding.

Two informers, each keeping a small projection:
- `pods`: every non-terminal pod of the cluster (fieldSelector
  `status.phase!=Succeeded,status.phase!=Failed`, the selector of kube-scheduler's own pod
  informer), kept as what the scheduler reads of it: a PodView for its own pods (its
  schedulerName, in its namespaces), the few fields of a slurmd pod of its cluster that map Slurm
  nodes to Kubernetes Nodes, and, for a pod on a Node, its effective requests (what that Node's
  kubelet counts when it admits one more pod). Other pods are not kept. One watch rather than
  one per purpose: on this 2-core machine each watch costs the API server and the scheduler
  their share of every pod event (a pod of ours that gets bound is all three at once);
- `nodes`: every Node's allocatable.

A pod bound by this scheduler counts on its Node from the moment the API server accepted the
Binding, before the watch reports it (kube-scheduler's "assumed" pods): otherwise a cycle between
the Binding and its watch event would see the Node emptier than it is, and could bind a pod the
kubelet then rejects. The assumption ends when the watch shows the pod on a Node, when the pod
is gone, or after ASSUME_TTL seconds.

Selectors are the API server's job and an optimisation here: every projection checks the fields
itself (kubesim, like kmock, ignores field selectors)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from sunk import keys
from sunk.kubefit import amount

from ..common.store import View
from ..slurmrest.podref import PodRef
from .fit import NodeView, pod_requests
from .model import TERMINAL_PHASES, PodView, pod_view

T = TypeVar("T")

ASSUME_TTL = 30.0
"""Seconds a Binding the API server accepted counts before its watch event: far longer than a
watch takes to deliver; if the event never comes (a watch broken for that long) the informer's
relist has the truth by then."""

POD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


class Source(Protocol[T]):
    """What the cache reads of an informer (runtime/common/informer.Informer has it)."""

    def view(self, since: int | None = None) -> View[T]: ...

    @property
    def synced(self) -> bool: ...


class NotSynced(Exception):
    """An informer has not listed yet: the cycle must not act on an empty picture."""


def _terminal(obj: Mapping[str, Any]) -> bool:
    return (obj.get("status") or {}).get("phase") in TERMINAL_PHASES


def our_pod(scheduler_name: str, namespaces: Sequence[str]) -> Callable[[dict[str, Any]], PodView | None]:
    """Projection of the `ours` informers: a PodView, or None for a pod that is not ours or ended
    (an ended pod's job is cancelled as for a deleted one)."""
    every = "*" in namespaces
    wanted = frozenset(namespaces)

    def transform(obj: dict[str, Any]) -> PodView | None:
        namespace = (obj.get("metadata") or {}).get("namespace", "")
        if (obj.get("spec") or {}).get("schedulerName") != scheduler_name or _terminal(obj):
            return None
        if not every and namespace not in wanted:
            return None
        return pod_view(obj)

    return transform


def slurmd_pod(namespace: str) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    """Projection of the `slurmd` informer: the fields model.node_map and exclusive_nodes read."""

    def transform(obj: dict[str, Any]) -> dict[str, Any] | None:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        labels = meta.get("labels") or {}
        if keys.NODESET not in labels or meta.get("namespace", namespace) != namespace:
            return None
        kept = {k: labels[k] for k in (keys.NODESET, keys.RESOURCE_MODE) if k in labels}
        return {
            "metadata": {"labels": kept, "deletionTimestamp": meta.get("deletionTimestamp")},
            "spec": {"hostname": spec.get("hostname"), "nodeName": spec.get("nodeName")},
        }

    return transform


@dataclass(frozen=True)
class Assigned:
    """A pod on a Node as its kubelet counts it."""

    node: str
    uid: str
    requests: Mapping[str, int] = field(default_factory=dict)
    error: str = ""
    """A request that does not parse: the Node it is on is not bound to (fail closed)."""


def assigned_pod(obj: dict[str, Any]) -> Assigned | None:
    """Projection of the `assigned` informer; None for a pod without a Node or that ended."""
    node = (obj.get("spec") or {}).get("nodeName") or ""
    if not node or _terminal(obj):
        return None
    uid = (obj.get("metadata") or {}).get("uid", "")
    try:
        return Assigned(node, uid, pod_requests(obj.get("spec") or {}))
    except ValueError as e:
        return Assigned(node, uid, error=str(e))


@dataclass(frozen=True)
class PodEntry:
    """What the scheduler keeps of one pod; at least one field is set."""

    ours: PodView | None = None
    slurmd: Mapping[str, Any] | None = None
    assigned: Assigned | None = None


def pod_entry(
    scheduler_name: str,
    namespaces: Sequence[str],
    slurmd_namespace: str,
    *,
    on_ours: Callable[[], None] | None = None,
) -> Callable[[dict[str, Any]], PodEntry | None]:
    """Projection of the `pods` informer; None for a pod the scheduler has no use for.
    `on_ours` is called for every event about a pod of this scheduler or a slurmd pod (ended
    ones too): the loop's wake-up, so other pods of a busy cluster do not wake it."""
    ours, slurmd = our_pod(scheduler_name, namespaces), slurmd_pod(slurmd_namespace)

    def transform(obj: dict[str, Any]) -> PodEntry | None:
        entry = PodEntry(ours(obj), slurmd(obj), assigned_pod(obj))
        mine = (obj.get("spec") or {}).get("schedulerName") == scheduler_name
        if on_ours is not None and (mine or entry.slurmd is not None):
            on_ours()
        return entry if entry.ours or entry.slurmd or entry.assigned else None

    return transform


@dataclass(frozen=True)
class NodeEntry:
    allocatable: Mapping[str, int]
    error: str = ""


def node_entry(obj: dict[str, Any]) -> NodeEntry:
    """Projection of the `nodes` informer: allocatable in the kubelet's units."""
    try:
        raw = (obj.get("status") or {}).get("allocatable") or {}
        return NodeEntry({k: amount(k, v) for k, v in raw.items()})
    except ValueError as e:
        return NodeEntry({}, error=str(e))


@dataclass(frozen=True)
class _Assumed:
    ref: PodRef
    node: str
    annotations: Mapping[str, str]
    until: float


@dataclass(frozen=True)
class ClusterSnapshot:
    """One read of the informers, with this scheduler's accepted Bindings applied. Its Node
    views read the cache's per-Node index: use them before the next `snapshot()`."""

    pods: list[PodView]
    slurmd: list[dict[str, Any]]
    _pods: Mapping[str, PodEntry]
    _by_node: Mapping[str, set[str]]
    _extra: Mapping[str, list[Assigned]]
    """Pods this scheduler bound that the `assigned` informer does not show yet, by Node."""
    _nodes: Mapping[str, NodeEntry]

    def node_views(self, names: Iterable[str]) -> dict[str, NodeView]:
        """NodeViews of these Nodes; a Node that does not exist, or whose allocatable or one of
        whose pods' requests does not parse, is left out (nothing is bound there)."""
        out = {}
        for name in names:
            node = self._nodes.get(name)
            if node is None or node.error:
                continue
            on_node = [a for k in self._by_node.get(name, ()) if (a := self._pods[k].assigned) is not None]
            on_node += self._extra.get(name, ())
            if any(a.error for a in on_node):
                continue
            used: dict[str, int] = {}
            for a in on_node:
                for k, v in a.requests.items():
                    used[k] = used.get(k, 0) + v
            out[name] = NodeView(name, node.allocatable, used, len(on_node))
        return out


class WatchedCluster:
    """Reads for the scheduler's cycle from the informers; `assume` records an accepted Binding.
    `snapshot()` is called from one thread (the loop), `assume` from any."""

    def __init__(
        self,
        pods: Source[PodEntry],
        nodes: Source[NodeEntry],
        *,
        clock: Callable[[], float] = time.monotonic,
        assume_ttl: float = ASSUME_TTL,
    ) -> None:
        self._pods = pods
        self._nodes = nodes
        self._clock = clock
        self._ttl = assume_ttl
        self._lock = threading.Lock()
        self._assumed: dict[str, _Assumed] = {}
        # Indexes of the pods store, kept up to date from its change log.
        self._seq: int | None = None
        self._ours: dict[str, PodView] = {}
        self._slurmd: dict[str, Mapping[str, Any]] = {}
        self._node_of: dict[str, str] = {}
        self._by_node: dict[str, set[str]] = {}

    @property
    def synced(self) -> bool:
        return self._pods.synced and self._nodes.synced

    def assume(self, ref: PodRef, node: str, annotations: Mapping[str, str]) -> None:
        """The API server accepted this Binding (called from any thread)."""
        assumed = _Assumed(ref, node, dict(annotations), self._clock() + self._ttl)
        with self._lock:
            self._assumed[f"{ref.namespace}/{ref.name}"] = assumed

    @property
    def assumed(self) -> int:
        with self._lock:
            return len(self._assumed)

    def _index(self, view: View[PodEntry]) -> None:
        changed = view.changed if self._seq is not None else None
        if changed is None:  # first read, or the change log no longer reaches back: everything
            self._ours, self._slurmd, self._node_of, self._by_node = {}, {}, {}, {}
            changed = frozenset(view.items)
        for key in changed:
            self._ours.pop(key, None)
            self._slurmd.pop(key, None)
            old = self._node_of.pop(key, None)
            if old is not None:
                self._by_node[old].discard(key)
                if not self._by_node[old]:
                    del self._by_node[old]
            entry = view.items.get(key)
            if entry is None:
                continue
            if entry.ours is not None:
                self._ours[key] = entry.ours
            if entry.slurmd is not None:
                self._slurmd[key] = entry.slurmd
            if entry.assigned is not None:
                self._node_of[key] = entry.assigned.node
                self._by_node.setdefault(entry.assigned.node, set()).add(key)
        self._seq = view.seq

    def snapshot(self) -> ClusterSnapshot:
        """Raises NotSynced until both informers have listed once."""
        if not self.synced:
            raise NotSynced("waiting for the first list of pods and Nodes")
        view = self._pods.view(self._seq)
        self._index(view)
        ours = dict(self._ours)
        extra: dict[str, list[Assigned]] = {}
        now = self._clock()
        with self._lock:
            for key, a in list(self._assumed.items()):
                pod = ours.get(key)
                if pod is None or pod.uid != a.ref.uid or pod.node_name or now > a.until:
                    # gone (or recreated), shown bound by the watch, or the watch is that late
                    del self._assumed[key]
                    continue
                ours[key] = replace(pod, node_name=a.node, annotations={**pod.annotations, **a.annotations})
                extra.setdefault(a.node, []).append(Assigned(a.node, pod.uid, pod.requests, pod.resource_error))
        return ClusterSnapshot(
            pods=list(ours.values()),
            slurmd=[dict(s) for s in self._slurmd.values()],
            _pods=view.items,
            _by_node=self._by_node,
            _extra=extra,
            _nodes=self._nodes.view().items,
        )
