"""The Kubernetes side: a small KubeApi protocol over raw JSON objects, its implementation on
the official client, and the parsing of Nodes and pods into the syncer's views."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any, Protocol

from sunk import keys

from ..common.conditions import Condition, Patch, condition_patch
from ..common.events import event
from .model import KubeNode, SlurmdPod

__all__ = ["Patch", "condition_patch"]

COMPONENT = "sunk-syncer"

_PAGE = 500  # list page size: bounded replies from a real API server at 10k objects


class KubeApiError(Exception):
    """A Kubernetes request failed (transport, 4xx, 5xx)."""


class KubeApi(Protocol):
    def list_nodes(self) -> list[dict[str, Any]]: ...

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]: ...

    # A patch returns the object as the server stored it (None where a fake has no such reply):
    # the syncer applies it to its cache at once (InformerCache.observe).
    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any] | None: ...

    def patch_pod_status(self, namespace: str, name: str, patch: Patch) -> dict[str, Any] | None: ...

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any] | None: ...

    def patch_node_status(self, name: str, patch: Patch) -> dict[str, Any] | None: ...

    def create_event(self, namespace: str, body: dict[str, Any]) -> None: ...


def _conditions(obj: dict[str, Any]) -> tuple[Condition, ...]:
    return tuple(Condition.from_dict(c) for c in (obj.get("status") or {}).get("conditions") or [])


def _ours(annotations: dict[str, str] | None, namespace: str | None = None) -> dict[str, str]:
    """Only our annotations are kept: sunk's, and every tenant's keys (or, given `namespace`, that
    tenant's only), so the views stay small at 10k objects and other tenants' writes to a shared
    Node do not read as a change here."""
    if namespace is not None:
        own = f"{namespace}.{keys.TENANT_PREFIX}/"
        return {k: v for k, v in (annotations or {}).items() if k.startswith(keys.PREFIX) or k.startswith(own)}
    return {
        k: v
        for k, v in (annotations or {}).items()
        if k.startswith(keys.PREFIX) or k.partition("/")[0].endswith(f".{keys.TENANT_PREFIX}")
    }


def parse_node(obj: dict[str, Any], namespace: str | None = None) -> KubeNode:
    """A Node as the syncer reads it. Every condition is kept (a condition write is guarded by
    its index in the list), but only our annotations (see `_ours`)."""
    meta = obj.get("metadata") or {}
    conditions = _conditions(obj)
    ready = next((c for c in conditions if c.type == "Ready"), None)
    return KubeNode(
        name=meta["name"],
        unschedulable=bool((obj.get("spec") or {}).get("unschedulable")),
        # Ready=Unknown (the node controller lost the kubelet) counts as NotReady, as kubectl shows it.
        ready=None if ready is None else ready.status == "True",
        ready_reason=ready.reason if ready is not None else "",
        ready_message=ready.message if ready is not None else "",
        annotations=_ours(meta.get("annotations"), namespace),
        conditions=conditions,
    )


def parse_pod(obj: dict[str, Any], namespace: str) -> SlurmdPod | None:
    """A slurmd pod of a NodeSet in `namespace`, or None for any other pod. Checked here even
    though the list call selects by label: the selector is the server's job, this is ours."""
    meta = obj.get("metadata") or {}
    if keys.NODESET not in (meta.get("labels") or {}) or meta.get("namespace") != namespace:
        return None
    spec = obj.get("spec") or {}
    return SlurmdPod(
        namespace=namespace,
        name=meta["name"],
        uid=str(meta.get("uid") or ""),
        hostname=spec.get("hostname") or meta["name"],
        node_name=spec.get("nodeName") or "",
        deleting=bool(meta.get("deletionTimestamp")),
        created=str(meta.get("creationTimestamp") or ""),
        annotations=_ours(meta.get("annotations")),
        conditions=_conditions(obj),
    )


def pod_event(pod: SlurmdPod, reason: str, message: str, warning: bool, now: datetime) -> dict[str, Any]:
    """A core/v1 Event about a slurmd pod."""
    involved = {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid}
    return event(involved, reason, message, now=now, component=COMPONENT, warning=warning)


class KubernetesApi:
    """KubeApi on the official `kubernetes` client. Replies are read as raw JSON
    (`_preload_content=False`): faster than the generated models at 10k objects and immune to
    their deserialization quirks."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self.api_client = api_client
        self._core = client.CoreV1Api(api_client)
        self._api_exception: type[Exception] = client.ApiException

    @classmethod
    def from_environment(cls) -> KubernetesApi:
        """In-cluster service account, else the local kubeconfig."""
        from kubernetes import client, config

        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        return cls(client.ApiClient())

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            reply = fn(*args, _preload_content=False, **kwargs)
            return json.loads(reply.data)
        except self._api_exception as exc:
            raise KubeApiError(f"{fn.__name__}: {getattr(exc, 'status', '')} {getattr(exc, 'reason', exc)}") from exc
        except (OSError, ValueError) as exc:  # urllib3 transport errors are OSErrors; ValueError: bad JSON
            raise KubeApiError(f"{fn.__name__}: {exc}") from exc

    def _pages(self, fn: Any, *args: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        token: str | None = None
        while True:
            extra = {"_continue": token} if token else {}
            reply = self._call(fn, *args, limit=_PAGE, **kwargs, **extra)
            yield from reply.get("items") or []
            token = (reply.get("metadata") or {}).get("continue")
            if not token:
                return

    def list_nodes(self) -> list[dict[str, Any]]:
        return list(self._pages(self._core.list_node))

    def list_pods(self, namespace: str, label_selector: str) -> list[dict[str, Any]]:
        return list(self._pages(self._core.list_namespaced_pod, namespace, label_selector=label_selector))

    @staticmethod
    def _content_type(patch: Patch) -> str:
        return "application/json-patch+json" if isinstance(patch, list) else "application/merge-patch+json"

    def _patch(self, fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        reply = self._call(fn, *args, **kwargs)
        return reply if isinstance(reply, dict) else None

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any] | None:
        return self._patch(
            self._core.patch_namespaced_pod, name, namespace, patch, _content_type=self._content_type(patch)
        )

    def patch_pod_status(self, namespace: str, name: str, patch: Patch) -> dict[str, Any] | None:
        return self._patch(
            self._core.patch_namespaced_pod_status, name, namespace, patch, _content_type=self._content_type(patch)
        )

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any] | None:
        return self._patch(self._core.patch_node, name, patch, _content_type=self._content_type(patch))

    def patch_node_status(self, name: str, patch: Patch) -> dict[str, Any] | None:
        return self._patch(self._core.patch_node_status, name, patch, _content_type=self._content_type(patch))

    def create_event(self, namespace: str, body: dict[str, Any]) -> None:
        self._call(self._core.create_namespaced_event, namespace, body)
