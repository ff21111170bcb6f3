"""The operator's Kubernetes side: the KubeApi it needs and its implementation.

KubeApi wraps the official client. Reads return plain dicts (`_preload_content=False` skips the
generated models, which cost most of a 1,000-pod list). Label selectors are sent AND applied
again here, so the code never depends on the server filtering (kmock, the test API server,
ignores selectors). Create answers 409 and delete 404 count as done: every action is idempotent."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from sunk import keys
from sunk.manifests.nodeset_pdb import PROTECTION
from sunk.manifests.nodeset_pod import SLURMD
from sunk.nodeset_resource import GROUP, PLURAL, VERSION


class KubeApi(Protocol):
    reads: int
    writes: int

    def list_nodesets(self) -> list[dict[str, Any]]: ...
    def list_pods(self) -> list[dict[str, Any]]: ...
    def list_bound_pods(self) -> list[dict[str, Any]]:
        """Every non-terminated pod bound to a Node, of any namespace (for the admission check)."""
        ...

    def list_nodes(self) -> list[dict[str, Any]]: ...
    def list_namespaces(self, label: str) -> dict[str, dict[str, str]]:
        """Namespaces carrying `label`: name -> labels."""
        ...

    def list_services(self) -> set[tuple[str, str]]: ...
    def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def create_config_map(self, body: Mapping[str, Any]) -> None: ...
    def patch_config_map(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None: ...
    def create_pod(self, body: Mapping[str, Any]) -> None: ...
    def delete_pod(self, namespace: str, name: str) -> None: ...
    def create_service(self, body: Mapping[str, Any]) -> None: ...
    def list_budgets(self) -> list[dict[str, Any]]:
        """The operator's PodDisruptionBudgets (sunk.manifests.nodeset_pdb), of every namespace."""
        ...

    def create_budget(self, body: Mapping[str, Any]) -> None: ...
    def delete_budget(self, namespace: str, name: str) -> None: ...
    def patch_nodeset_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None: ...
    def create_event(self, body: Mapping[str, Any]) -> None: ...
    def read_secret(self, namespace: str, name: str) -> dict[str, str] | None: ...


def is_slurmd_pod(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(keys.APP_COMPONENT) == SLURMD and keys.NODESET in labels


def is_protection_budget(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(keys.APP_COMPONENT) == PROTECTION and keys.NODESET in labels


def bound_and_running(obj: Mapping[str, Any]) -> bool:
    """The field selector again, for servers that ignore it."""
    phase = (obj.get("status") or {}).get("phase")
    return bool((obj.get("spec") or {}).get("nodeName")) and phase not in ("Succeeded", "Failed")


class OfficialKube:
    """KubeApi over the official `kubernetes` client (an ApiClient the caller configured)."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)
        self._coord = client.CoordinationV1Api(api_client)
        self._policy = client.PolicyV1Api(api_client)
        self._exc = client.ApiException
        self.reads = 0
        self.writes = 0

    def _raw(self, response: Any) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(response.data)
        return data

    @staticmethod
    def _discard(response: Any) -> None:
        """Read a write's reply to the end: a raw (`_preload_content=False`) reply left unread
        keeps its connection out of the pool, so the next request opens a new one (the lease
        renewal every few seconds did, measured 2026-11 in the scheduler as 2 ms of CPU per request)."""
        response.data  # noqa: B018 -- reading the property consumes the body and frees the connection

    def _ok(self, err: Exception, *statuses: int) -> bool:
        return isinstance(err, self._exc) and err.status in statuses

    def list_nodesets(self) -> list[dict[str, Any]]:
        self.reads += 1
        raw = self._custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, _preload_content=False)
        return list(self._raw(raw).get("items") or [])

    def list_pods(self) -> list[dict[str, Any]]:
        self.reads += 1
        selector = f"{keys.APP_COMPONENT}={SLURMD},{keys.NODESET}"
        raw = self._core.list_pod_for_all_namespaces(label_selector=selector, _preload_content=False)
        return [p for p in self._raw(raw).get("items") or [] if is_slurmd_pod(p)]

    def list_bound_pods(self) -> list[dict[str, Any]]:
        self.reads += 1
        selector = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
        raw = self._core.list_pod_for_all_namespaces(field_selector=selector, _preload_content=False)
        return [p for p in self._raw(raw).get("items") or [] if bound_and_running(p)]

    def list_nodes(self) -> list[dict[str, Any]]:
        self.reads += 1
        return list(self._raw(self._core.list_node(_preload_content=False)).get("items") or [])

    def list_namespaces(self, label: str) -> dict[str, dict[str, str]]:
        self.reads += 1
        raw = self._core.list_namespace(label_selector=label, _preload_content=False)
        return {
            (n.get("metadata") or {}).get("name", ""): dict((n.get("metadata") or {}).get("labels") or {})
            for n in self._raw(raw).get("items") or []
        }

    def list_services(self) -> set[tuple[str, str]]:
        self.reads += 1
        raw = self._core.list_service_for_all_namespaces(label_selector=keys.NODESET, _preload_content=False)
        out = set()
        for s in self._raw(raw).get("items") or []:
            meta = s.get("metadata") or {}
            if keys.NODESET in (meta.get("labels") or {}):
                out.add((meta.get("namespace", ""), meta.get("name", "")))
        return out

    def get_config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads += 1
        try:
            return self._raw(self._core.read_namespaced_config_map(name, namespace, _preload_content=False))
        except Exception as err:
            if self._ok(err, 404):
                return None
            raise

    def create_config_map(self, body: Mapping[str, Any]) -> None:
        self._create(self._core.create_namespaced_config_map, body)

    def patch_config_map(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        self.writes += 1
        self._discard(self._core.patch_namespaced_config_map(name, namespace, dict(patch), _preload_content=False))

    def create_pod(self, body: Mapping[str, Any]) -> None:
        self._create(self._core.create_namespaced_pod, body)

    def delete_pod(self, namespace: str, name: str) -> None:
        self.writes += 1
        try:
            self._discard(self._core.delete_namespaced_pod(name, namespace, _preload_content=False))
        except Exception as err:
            if not self._ok(err, 404):
                raise

    def create_service(self, body: Mapping[str, Any]) -> None:
        self._create(self._core.create_namespaced_service, body)

    def list_budgets(self) -> list[dict[str, Any]]:
        self.reads += 1
        selector = f"{keys.APP_COMPONENT}={PROTECTION},{keys.NODESET}"
        raw = self._policy.list_pod_disruption_budget_for_all_namespaces(
            label_selector=selector, _preload_content=False
        )
        return [b for b in self._raw(raw).get("items") or [] if is_protection_budget(b)]

    def create_budget(self, body: Mapping[str, Any]) -> None:
        self._create(self._policy.create_namespaced_pod_disruption_budget, body)

    def delete_budget(self, namespace: str, name: str) -> None:
        self.writes += 1
        try:
            self._discard(self._policy.delete_namespaced_pod_disruption_budget(name, namespace, _preload_content=False))
        except Exception as err:
            if not self._ok(err, 404):
                raise

    def patch_nodeset_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        self.writes += 1
        self._custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, PLURAL, name, {"status": dict(status)}
        )

    def create_event(self, body: Mapping[str, Any]) -> None:
        self._create(self._core.create_namespaced_event, body)

    def read_secret(self, namespace: str, name: str) -> dict[str, str] | None:
        self.reads += 1
        try:
            raw = self._raw(self._core.read_namespaced_secret(name, namespace, _preload_content=False))
        except Exception as err:
            if self._ok(err, 404):
                return None
            raise
        return dict(raw.get("data") or {})

    # LeaseApi (leader election). A lost race is a False, never an exception.
    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            return self._raw(self._coord.read_namespaced_lease(name, namespace, _preload_content=False))
        except Exception as err:
            if self._ok(err, 404):
                return None
            raise

    def create_lease(self, body: Mapping[str, Any]) -> bool:
        try:
            create: Any = self._coord.create_namespaced_lease  # a dict body is accepted (and validated)
            self._discard(create(body["metadata"]["namespace"], dict(body), _preload_content=False))
        except Exception as err:
            if self._ok(err, 409):
                return False
            raise
        return True

    def patch_lease(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> bool:
        try:
            # A list body is sent as application/json-patch+json.
            self._discard(self._coord.patch_namespaced_lease(name, namespace, ops, _preload_content=False))
        except Exception as err:
            # 409/422: a `test` failed on a real API server (someone else wrote first); kmock
            # answers 500 for the same. Either way we did not win.
            if isinstance(err, self._exc):
                return False
            raise
        return True

    def _create(self, method: Any, body: Mapping[str, Any]) -> None:
        self.writes += 1
        namespace = body["metadata"]["namespace"]
        try:
            self._discard(method(namespace, dict(body), _preload_content=False))
        except Exception as err:
            if not self._ok(err, 409):
                raise


def kube_client() -> Any:
    """An ApiClient from the in-cluster service account, else KUBECONFIG."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    return client.ApiClient()
