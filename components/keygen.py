"""KeyGenerator: the in-cluster key generator Job and its create-only RBAC."""

from __future__ import annotations

import pulumi

from sunk.manifests.auth import AuthRefs
from sunk.manifests.keygen import keygen_manifests
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create


class KeyGenerator(Component):
    """ServiceAccount, Role (create Secrets, nothing else), RoleBinding and the one-shot Job that
    creates the cluster's keys and passwords in the cluster (sunk.manifests.keygen). The Job is
    registered last, so Pulumi waits for it to complete; the workloads wait for this component."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        refs: AuthRefs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:KeyGenerator", name, opts)
        made: list[pulumi.Resource] = []
        for m in keygen_manifests(spec, refs):
            suffix = "job" if m["kind"] == "Job" else m["kind"].lower()
            made.append(create(f"{name}-{suffix}", m, child(self, depends_on=list(made)), namespace=namespace))
        self.register_outputs({})
