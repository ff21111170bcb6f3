"""RestApi: slurmrestd."""

from __future__ import annotations

import pulumi

from sunk.manifests.auth import AuthRefs
from sunk.manifests.restapi import restapi_manifests, url
from sunk.spec.cluster import ClusterSpec

from ._k8s import child, create


class RestApi(pulumi.ComponentResource):
    """slurmrestd (Deployment and Service `<cluster>-restapi` on 6820) with JWT authentication:
    callers send tokens signed with the cluster's JWT key; slurmctld and slurmdbd verify them."""

    url: pulumi.Output[str]
    """http://<cluster>-restapi.<namespace>.svc.cluster.local:6820"""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        refs: AuthRefs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:RestApi", name, None, opts)
        deployment, service = restapi_manifests(spec, refs)
        create(f"{name}-slurmrestd", deployment, child(self), namespace=namespace)
        create(f"{name}-service", service, child(self), namespace=namespace)
        self.url = pulumi.Output.from_input(url(spec))
        self.register_outputs({"url": self.url})
