"""The syncer's Kubernetes view: Nodes and this tenant's slurmd pods, with what changed since
the last read.

In the process it comes from two informers (runtime/common/informer.py): the Nodes watched once
(the API server cannot select Nodes by tenant: no label says whose slurmd a Node runs and Node
field selectors are only metadata.name and spec.unschedulable), each kept as a small projection
holding only sunk's and this tenant's keys; the pods listed and watched in the tenant namespace
with the NodeSet label selector. After the first list a quiet cycle makes no Kubernetes request.

`PollingCache` reads the same view by listing both every time: what the in-memory fakes use,
with the same change semantics (runtime/common/store.Store)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sunk import keys

from ..common.informer import Informer
from ..common.kubewatch import KubeListWatch
from ..common.store import Store
from .kube import KubeApi, KubeApiError, parse_node, parse_pod
from .model import KubeNode, SlurmdPod

Cursor = tuple[int, int]


@dataclass(frozen=True)
class KubeRead:
    nodes: Mapping[str, KubeNode]
    pods: Mapping[str, SlurmdPod]
    """By `namespace/name`."""
    node_changes: frozenset[str] | None
    """Node names changed since the cursor read with; None: possibly all."""
    pod_changes: frozenset[str] | None
    cursor: Cursor


class KubeCache(Protocol):
    @property
    def reads(self) -> int:
        """Kubernetes read requests made so far (lists and watches)."""
        ...

    def read(self, since: Cursor | None) -> KubeRead:
        """The view and its changes since `since`; raises KubeApiError when there is no
        trustworthy view (never synced), so the cycle fails closed."""
        ...

    def observe(self, kind: str, obj: dict[str, Any]) -> None:
        """A write's reply ("node" or "pod"): the view shows it from now on, without waiting for
        the write's watch event (a cycle in between would otherwise repeat the write)."""
        ...

    def close(self) -> None: ...


class InformerCache:
    def __init__(
        self, api_client: Any, namespace: str, *, sync_timeout: float = 30.0, stale_after_failures: int = 3
    ) -> None:
        from kubernetes import client

        core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.sync_timeout = sync_timeout
        self.stale_after_failures = stale_after_failures
        """A watch failing this many times in a row (0.5 + 1 + 2 s of backoff: ~4 s) and not open
        again makes the view untrustworthy: cycles fail closed, as they did when a list failed,
        until a watch is open again."""
        self.nodes: Informer[KubeNode] = Informer(
            KubeListWatch(core.list_node),
            functools.partial(parse_node, namespace=namespace),
            name="nodes",
        )
        self.pods: Informer[SlurmdPod] = Informer(
            KubeListWatch(functools.partial(core.list_namespaced_pod, namespace)),
            functools.partial(parse_pod, namespace=namespace),
            name=f"pods/{namespace}",
            label_selector=keys.NODESET,
        )

    def start(self) -> InformerCache:
        self.nodes.start()
        self.pods.start()
        return self

    @property
    def reads(self) -> int:
        return self.nodes.lists + self.nodes.watches + self.pods.lists + self.pods.watches

    def read(self, since: Cursor | None) -> KubeRead:
        for informer in (self.nodes, self.pods):
            if not informer.wait_synced(self.sync_timeout):
                raise KubeApiError(f"{informer.name}: not listed yet ({informer.last_error or 'waiting'})")
            if informer.failures >= self.stale_after_failures and not informer.watching:
                raise KubeApiError(f"{informer.name}: watch failing ({informer.failures} tries): {informer.last_error}")
        nodes = self.nodes.view(since[0] if since else None)
        pods = self.pods.view(since[1] if since else None)
        return KubeRead(nodes.items, pods.items, nodes.changed, pods.changed, (nodes.seq, pods.seq))

    def observe(self, kind: str, obj: dict[str, Any]) -> None:
        (self.nodes if kind == "node" else self.pods).observe(obj)

    def close(self) -> None:
        self.nodes.stop()
        self.pods.stop()


class PollingCache:
    """Lists both kinds at every read (through a KubeApi) and reports what changed, as the
    informers would: for the in-memory fakes and tests that change objects between cycles."""

    def __init__(self, kube: KubeApi, namespace: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.reads = 0
        self._nodes: Store[KubeNode] = Store()
        self._pods: Store[SlurmdPod] = Store()

    def read(self, since: Cursor | None) -> KubeRead:
        self.reads += 2
        nodes = {n.name: n for n in (parse_node(o, self.namespace) for o in self.kube.list_nodes())}
        pods: dict[str, SlurmdPod] = {}
        for obj in self.kube.list_pods(self.namespace, keys.NODESET):
            pod = parse_pod(obj, self.namespace)
            if pod is not None:
                pods[f"{pod.namespace}/{pod.name}"] = pod
        self._nodes.replace(nodes)
        self._pods.replace(pods)
        node_view = self._nodes.view(since[0] if since else None)
        pod_view = self._pods.view(since[1] if since else None)
        return KubeRead(
            node_view.items, pod_view.items, node_view.changed, pod_view.changed, (node_view.seq, pod_view.seq)
        )

    def observe(self, kind: str, obj: dict[str, Any]) -> None:
        pass  # every read lists again

    def close(self) -> None:
        pass
