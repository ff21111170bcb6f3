"""NetworkPolicies."""

from __future__ import annotations

import pulumi

from sunk.manifests.network import network_policies
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create


class NetworkPolicies(Component):
    """The accounting database reachable only from slurmdbd; slurmrestd only from the tenant's
    runtime, its login pods and the operator."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        operator_namespace: str | None = "sunk-system",
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:NetworkPolicies", name, opts)
        for policy in network_policies(spec, operator_namespace):
            target = policy["metadata"]["labels"]["app.kubernetes.io/component"]
            create(f"{name}-{target}", policy, child(self), namespace=namespace)
        self.register_outputs({})
