"""KeyGenerator: the in-cluster key generator Job and its create-only RBAC."""

from __future__ import annotations

import pulumi

from sunk.manifests.auth import AuthRefs
from sunk.manifests.keygen import keygen_manifests
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create


class KeyGenerator(Component):
    """ServiceAccount, Role (create Secrets; get and update the certificates it made, by name),
    RoleBinding and the one-shot Job that creates the cluster's keys and passwords in the cluster
    (sunk.manifests.keygen), and the daily CronJob renewing the webhook's certificate where there is
    one. Pulumi waits for the Job to complete; the workloads wait for this component."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        refs: AuthRefs,
        keys_in_cluster: bool = True,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`keys_in_cluster` off: Pulumi makes the keys and passwords; the generator makes only the
        webhook's certificate (and renews it)."""
        super().__init__("sunk:index:KeyGenerator", name, opts)
        made: list[pulumi.Resource] = []
        for m in keygen_manifests(spec, refs, keys_in_cluster):
            suffix = {"Job": "job", "CronJob": "renew"}.get(m["kind"], m["kind"].lower())
            made.append(create(f"{name}-{suffix}", m, child(self, depends_on=list(made)), namespace=namespace))
        self.register_outputs({})
