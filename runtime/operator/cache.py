"""What a resync reads of Kubernetes, either listed (`ListedKube`: every resync lists; the glue
tests' fakes) or kept by watches (`WatchedKube`: runtime/common/informer.py, one list per kind at
start, then only watch events; the process).

Each informer keeps a small projection, never the objects:
- NodeSets, cluster-wide: the object without `managedFields` (a handful per cluster);
- slurmd pods (`app.kubernetes.io/component=slurmd`, with a NodeSet label), cluster-wide: the
  parsed `Pod`, its NodeSet key, and, while it is pinned to a Node and not bound yet, that Node
  and its requests (the admission check counts them);
- pods on a Node, every namespace (`spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed`),
  as (Node, requests): the admission check of all-matching-nodes NodeSets sums them;
- Nodes (`KubeNode`), Services with a NodeSet label, the operator's PodDisruptionBudgets, and
  Namespaces (their labels, for the tenant policy).

`changed` is set by every informer whose store changed: the loop resyncs right after a change
instead of at its next period."""

from __future__ import annotations

import functools
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from sunk import keys

from ..common.store import View
from .admission import add_usage, node_usage, pod_requests, terminated
from .kube import KubeApi, bound_and_running, is_protection_budget, is_slurmd_pod
from .model import Budget, KubeNode, Pod

T = TypeVar("T")

SetKey = tuple[str, str, str]
"""(namespace, cluster, NodeSet name): whose pods and budgets these are."""

BOUND_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


@dataclass(frozen=True)
class KubeState:
    """One read of what a resync needs from Kubernetes."""

    nodesets: list[dict[str, Any]]
    pods: Mapping[SetKey, list[Pod]]
    pinned: list[tuple[str, Mapping[str, int]]]
    """(Node, requests) of slurmd pods made for a Node, not bound yet and not ended."""
    kube_nodes: Mapping[str, KubeNode]
    services: set[tuple[str, str]]
    budgets: Mapping[SetKey, list[Budget]] | None
    """None: PodDisruptionBudgets could not be read (protect nothing, remove nothing)."""
    bound_usage: Callable[[], dict[str, dict[str, int]]]
    """Node -> summed requests of every non-terminated pod bound to it (asked only when an
    all-matching-nodes NodeSet needs the admission check)."""
    namespaces: Callable[[str], dict[str, dict[str, str]]]
    """Namespaces carrying a label: name -> labels."""


def set_key(obj: Mapping[str, Any]) -> SetKey:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return meta.get("namespace", ""), labels.get(keys.CLUSTER, ""), labels.get(keys.NODESET, "")


def _pinned(obj: Mapping[str, Any]) -> tuple[str, Mapping[str, int]] | None:
    node = ((obj.get("metadata") or {}).get("annotations") or {}).get(keys.KUBE_NODE)
    if not node or (obj.get("spec") or {}).get("nodeName") or terminated(obj):
        return None
    return node, pod_requests(obj)


class ListedKube:
    """Every resync lists (5 lists, 6 with an all-matching-nodes NodeSet; namespaces with a
    tenant policy)."""

    def __init__(self, kube: KubeApi) -> None:
        self.kube = kube

    def read(self) -> KubeState:
        pods: dict[SetKey, list[Pod]] = defaultdict(list)
        pinned = []
        for obj in self.kube.list_pods():
            pods[set_key(obj)].append(Pod.from_object(obj))
            if (p := _pinned(obj)) is not None:
                pinned.append(p)
        try:
            budgets: dict[SetKey, list[Budget]] | None = defaultdict(list)
            for obj in self.kube.list_budgets():
                budgets[set_key(obj)].append(Budget.from_object(obj))  # type: ignore[index]
        except Exception as err:  # e.g. a ClusterRole from before PDBs
            _budgets_unreadable(err)
            budgets = None
        return KubeState(
            nodesets=self.kube.list_nodesets(),
            pods=pods,
            pinned=pinned,
            kube_nodes={n.name: n for n in map(KubeNode.from_object, self.kube.list_nodes())},
            services=self.kube.list_services(),
            budgets=budgets,
            bound_usage=lambda: node_usage(self.kube.list_bound_pods()),
            namespaces=self.kube.list_namespaces,
        )


def _budgets_unreadable(err: Exception) -> None:
    import logging

    logging.getLogger("sunk.operator").warning("PodDisruptionBudgets unreadable, eviction protection paused: %s", err)


# --- watched --------------------------------------------------------------------------------


class Source(Protocol[T]):
    """What is read of an informer (runtime/common/informer.Informer)."""

    def view(self, since: int | None = None) -> View[T]: ...

    @property
    def synced(self) -> bool: ...


class NotSynced(Exception):
    """An informer has not listed yet: a resync must not plan from an empty picture."""


def nodeset_entry(obj: dict[str, Any]) -> dict[str, Any] | None:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": meta}


@dataclass(frozen=True)
class SlurmdEntry:
    key: SetKey
    pod: Pod
    pinned: tuple[str, Mapping[str, int]] | None = None


def slurmd_entry(obj: dict[str, Any]) -> SlurmdEntry | None:
    if not is_slurmd_pod(obj):
        return None
    return SlurmdEntry(set_key(obj), Pod.from_object(obj), _pinned(obj))


@dataclass(frozen=True)
class BoundEntry:
    node: str
    requests: Mapping[str, int] = field(default_factory=dict)


def bound_entry(obj: dict[str, Any]) -> BoundEntry | None:
    if not bound_and_running(obj):
        return None
    try:
        return BoundEntry(obj["spec"]["nodeName"], pod_requests(obj))
    except ValueError:
        # A quantity the API server accepted but we cannot read: count the pod, not its requests.
        return BoundEntry(obj["spec"]["nodeName"], {"pods": 1})


def node_entry(obj: dict[str, Any]) -> KubeNode | None:
    try:
        return KubeNode.from_object(obj)
    except (KeyError, ValueError):
        return None


def service_entry(obj: dict[str, Any]) -> bool | None:
    return True if keys.NODESET in ((obj.get("metadata") or {}).get("labels") or {}) else None


@dataclass(frozen=True)
class BudgetEntry:
    key: SetKey
    budget: Budget


def budget_entry(obj: dict[str, Any]) -> BudgetEntry | None:
    return BudgetEntry(set_key(obj), Budget.from_object(obj)) if is_protection_budget(obj) else None


def namespace_entry(obj: dict[str, Any]) -> Mapping[str, str] | None:
    return dict((obj.get("metadata") or {}).get("labels") or {})


@dataclass
class Informers:
    nodesets: Source[dict[str, Any]]
    slurmd: Source[SlurmdEntry]
    bound: Source[BoundEntry]
    nodes: Source[KubeNode]
    services: Source[bool]
    budgets: Source[BudgetEntry]
    namespaces: Source[Mapping[str, str]]

    def all(self) -> list[Source[Any]]:
        return [self.nodesets, self.slurmd, self.bound, self.nodes, self.services, self.budgets, self.namespaces]


class WatchedKube:
    """KubeState from informers: no request to the API server after their first lists.
    `changed` is the informers' on_change (the loop waits on it and clears it)."""

    def __init__(self, informers: Informers, changed: threading.Event | None = None) -> None:
        self.informers = informers
        self.changed = changed or threading.Event()
        self._usage_seq: int | None = None
        self._usage: dict[str, dict[str, int]] = {}

    def start(self) -> None:
        for source in self.informers.all():
            start = getattr(source, "start", None)
            if start is not None:
                start()

    def stop(self) -> None:
        for source in self.informers.all():
            stop = getattr(source, "stop", None)
            if stop is not None:
                stop()

    @property
    def lists(self) -> int:
        """List requests the informers made (pages included): one per kind at start, more only
        after a 410 Gone."""
        return sum(int(getattr(s, "lists", 0)) for s in self.informers.all())

    @property
    def synced(self) -> bool:
        return all(s.synced for s in self.informers.all())

    def read(self) -> KubeState:
        if not self.synced:
            raise NotSynced("waiting for the first list of NodeSets, pods, Nodes, Services, budgets, namespaces")
        inf = self.informers
        pods: dict[SetKey, list[Pod]] = defaultdict(list)
        pinned = []
        for entry in sorted(inf.slurmd.view().items.values(), key=lambda e: e.pod.name):
            pods[entry.key].append(entry.pod)
            if entry.pinned is not None:
                pinned.append(entry.pinned)
        budgets: dict[SetKey, list[Budget]] = defaultdict(list)
        for b in inf.budgets.view().items.values():
            budgets[b.key].append(b.budget)
        namespaces = inf.namespaces.view().items

        def with_label(label: str) -> dict[str, dict[str, str]]:
            return {name: dict(labels) for name, labels in namespaces.items() if label in labels}

        return KubeState(
            nodesets=sorted(
                inf.nodesets.view().items.values(),
                key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"].get("name", "")),
            ),
            pods=pods,
            pinned=pinned,
            kube_nodes=dict(inf.nodes.view().items),
            services={tuple(k.split("/", 1)) for k in inf.services.view().items},  # type: ignore[misc]
            budgets=budgets,
            bound_usage=self._bound_usage,
            namespaces=with_label,
        )

    def _bound_usage(self) -> dict[str, dict[str, int]]:
        """Summed per Node; recomputed only when the bound pods changed."""
        view = self.informers.bound.view(self._usage_seq)
        if self._usage_seq is None or view.changed is None or view.changed:
            usage: dict[str, dict[str, int]] = {}
            for entry in view.items.values():
                add_usage(usage, entry.node, entry.requests)
            self._usage = usage
        self._usage_seq = view.seq
        return {node: dict(amounts) for node, amounts in self._usage.items()}


def watch(api_client: Any) -> WatchedKube:
    """WatchedKube on the official client (informers not started: Operator.run starts them)."""
    from kubernetes import client

    from sunk.manifests.nodeset_pdb import PROTECTION
    from sunk.manifests.nodeset_pod import SLURMD
    from sunk.nodeset_resource import GROUP, PLURAL, VERSION

    from ..common.informer import Informer
    from ..common.kubewatch import KubeListWatch

    core, custom, policy = (
        client.CoreV1Api(api_client),
        client.CustomObjectsApi(api_client),
        client.PolicyV1Api(api_client),
    )
    changed = threading.Event()
    on_change = changed.set

    def informer(
        fn: Callable[..., Any],
        transform: Callable[[dict[str, Any]], Any],
        name: str,
        *,
        label_selector: str = "",
        field_selector: str = "",
    ) -> Any:
        return Informer(
            KubeListWatch(fn),
            transform,
            name=name,
            on_change=on_change,
            label_selector=label_selector,
            field_selector=field_selector,
        )

    nodesets = functools.partial(custom.list_cluster_custom_object, GROUP, VERSION, PLURAL)
    return WatchedKube(
        Informers(
            nodesets=informer(nodesets, nodeset_entry, "nodesets"),
            slurmd=informer(
                core.list_pod_for_all_namespaces,
                slurmd_entry,
                "slurmd-pods",
                label_selector=f"{keys.APP_COMPONENT}={SLURMD},{keys.NODESET}",
            ),
            bound=informer(core.list_pod_for_all_namespaces, bound_entry, "bound-pods", field_selector=BOUND_SELECTOR),
            nodes=informer(core.list_node, node_entry, "nodes"),
            services=informer(
                core.list_service_for_all_namespaces, service_entry, "services", label_selector=keys.NODESET
            ),
            budgets=informer(
                policy.list_pod_disruption_budget_for_all_namespaces,
                budget_entry,
                "budgets",
                label_selector=f"{keys.APP_COMPONENT}={PROTECTION},{keys.NODESET}",
            ),
            namespaces=informer(core.list_namespace, namespace_entry, "namespaces"),
        ),
        changed,
    )
