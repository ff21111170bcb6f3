"""NetworkPolicies."""

from __future__ import annotations

import pulumi

from sunk.manifests.network import network_policies
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create


class NetworkPolicies(Component):
    """A default deny over the cluster's pods and, per role, exactly the traffic its row of the
    role table lists (sunk.manifests.network)."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        operator_namespace: str | None = "sunk-system",
        keys_in_cluster: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`keys_in_cluster`: the key generator's Job runs here, so it gets its policy too."""
        super().__init__("sunk:index:NetworkPolicies", name, opts)
        for policy in network_policies(spec, operator_namespace, keygen=keys_in_cluster):
            target = policy["metadata"]["labels"]["app.kubernetes.io/component"]
            create(f"{name}-{target}", policy, child(self), namespace=namespace)
        self.register_outputs({})
