"""RestApi: slurmrestd."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from sunk.manifests.auth import AuthRefs
from sunk.manifests.restapi import restapi_manifests, url
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create, text, typed


class RestApi(Component):
    """slurmrestd (Deployment and Service `<cluster>-restapi` on 6820) with JWT authentication:
    callers send tokens signed with the cluster's JWT key; slurmctld and slurmdbd verify them."""

    url: pulumi.Output[str]
    """http://<cluster>-restapi.<namespace>.svc.cluster.local:6820"""
    deployment: k8s.apps.v1.Deployment
    service: k8s.core.v1.Service

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        refs: AuthRefs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:RestApi", name, opts)
        deployment, service = restapi_manifests(spec, refs)
        self.deployment = typed(
            k8s.apps.v1.Deployment, create(f"{name}-slurmrestd", deployment, child(self), namespace=namespace)
        )
        self.service = typed(k8s.core.v1.Service, create(f"{name}-service", service, child(self), namespace=namespace))
        self.url = text(url(spec))
        self.register_outputs({"url": self.url})
