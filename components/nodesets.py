"""NodeSets: one NodeSet custom resource per spec NodeSet."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from sunk import naming
from sunk.manifests.auth import AuthRefs
from sunk.manifests.nodeset import nodeset_resource
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create, typed


class NodeSets(Component):
    """NodeSet objects (slurm.sunk.dev/v1alpha1). The operator turns each into slurmd pods:
    GPUs, volumes, sidecars and s6 scripts travel in the object's spec, together with the
    config hash whose change rolls the pods (drained first, maxUnavailable at a time)."""

    names: pulumi.Output[list[str]]
    """NodeSet object names, `<cluster>-<nodeset>`."""
    resources: dict[str, k8s.apiextensions.CustomResource]
    """The NodeSet objects, by spec nodeset name."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        refs: AuthRefs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:NodeSets", name, opts)
        self.resources = {}
        for ns in spec.nodesets:
            # With externalScaling the scale subresource owns spec.replicas after creation.
            ignored = ["spec.replicas"] if ns.external_scaling else None
            made = create(
                f"{name}-{ns.name}",
                nodeset_resource(spec, ns, refs),
                child(self, ignore_changes=ignored),
                namespace=namespace,
            )
            self.resources[ns.name] = typed(k8s.apiextensions.CustomResource, made)
        self.names = pulumi.Output.from_input([naming.nodeset(spec, ns.name) for ns in spec.nodesets])
        self.register_outputs({"names": self.names})
