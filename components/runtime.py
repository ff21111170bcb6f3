"""Runtime: the per-tenant syncer and scheduler."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from sunk.manifests.auth import AuthRefs
from sunk.manifests.operator import OPERATOR_NAME
from sunk.manifests.runtime import CONTROLLERS, deployment, metrics_service, operator_access, rbac
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create, typed


class Runtime(Component):
    """The syncer (Slurm node state <-> Kubernetes Nodes and Pods) and the scheduler (pods with
    schedulerName `sunk-scheduler` placed by Slurm), each a Deployment of the runtime image with
    its own ServiceAccount and least-privilege RBAC, plus the Role that lets the cluster-wide
    operator read this tenant's JWT key (and no other Secret)."""

    deployments: dict[str, k8s.apps.v1.Deployment]
    """By controller: `syncer`, `scheduler`."""
    metrics_services: dict[str, k8s.core.v1.Service]
    """By controller: the Service Prometheus scrapes."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        refs: AuthRefs,
        operator_namespace: str | None = "sunk-system",
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:Runtime", name, opts)
        self.deployments, self.metrics_services = {}, {}
        for controller in CONTROLLERS:
            grants = []
            for manifest in rbac(spec, controller):
                suffix = manifest["kind"].lower()
                grants.append(create(f"{name}-{controller}-{suffix}", manifest, child(self), namespace=namespace))
            made = create(
                f"{name}-{controller}",
                deployment(spec, refs, controller),
                child(self, depends_on=grants),
                namespace=namespace,
            )
            self.deployments[controller] = typed(k8s.apps.v1.Deployment, made)
            metrics = create(
                f"{name}-{controller}-metrics", metrics_service(spec, controller), child(self), namespace=namespace
            )
            self.metrics_services[controller] = typed(k8s.core.v1.Service, metrics)
        if operator_namespace is not None:
            for manifest in operator_access(spec, refs, operator_namespace, OPERATOR_NAME):
                suffix = manifest["kind"].lower()
                create(f"{name}-operator-access-{suffix}", manifest, child(self), namespace=namespace)
        self.register_outputs({})
