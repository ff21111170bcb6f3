"""Plain manifests (from sunk.manifests) -> typed pulumi_kubernetes resources.

One generic bridge keeps every component a few lines: the pure builder decides the object, this
picks its Pulumi class and passes the body through unchanged (camelCase keys inside the body
reach the provider as written; only the top-level argument names are snake_case)."""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from sunk.manifests.meta import Manifest

_TYPED: dict[tuple[str, str], Any] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    ("apps/v1", "StatefulSet"): k8s.apps.v1.StatefulSet,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): k8s.apiextensions.v1.CustomResourceDefinition,
}
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def _snake(key: str) -> str:
    return _CAMEL.sub("_", key).lower()


def create(
    name: str,
    manifest: Manifest,
    opts: pulumi.ResourceOptions,
    *,
    namespace: pulumi.Input[str] | None = None,
    **fields: Any,
) -> pulumi.CustomResource:
    """Register `manifest` as resource `name`. `namespace` replaces metadata.namespace (an
    Output, so the object waits for its Namespace); `fields` add or replace top-level fields
    (Secret data from generated Outputs)."""
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    body = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    if namespace is not None and "namespace" in body["metadata"]:
        body["metadata"] = {**body["metadata"], "namespace": namespace}
    body.update(fields)
    cls = _TYPED.get((api_version, kind))
    if cls is None:
        # Custom resources (NodeSet, ServiceMonitor): fields pass through untouched.
        resource: pulumi.CustomResource = k8s.apiextensions.CustomResource(
            name, api_version=api_version, kind=kind, opts=opts, **body
        )
        return resource
    typed: pulumi.CustomResource = cls(name, opts=opts, **{_snake(k): v for k, v in body.items()})
    return typed


def child(parent: pulumi.Resource, **extra: Any) -> pulumi.ResourceOptions:
    """Options of a component's child: parented (providers are inherited, never constructed)."""
    return pulumi.ResourceOptions(parent=parent, **extra)
