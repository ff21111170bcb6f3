"""SunkOperator: the cluster-wide piece, installed once per Kubernetes cluster."""

from __future__ import annotations

import pulumi

from sunk.manifests.operator import OperatorSpec, namespace, operator_manifests

from ._k8s import child, create


class SunkOperator(pulumi.ComponentResource):
    """The NodeSet CRD (schema generated from the model the operator parses), the operator's
    namespace, ServiceAccount, ClusterRole (no cluster-admin), leader-election Role and
    Deployment. Tenants' SlurmCluster NodeSets wait for `crd` when both are in one program."""

    crd: pulumi.CustomResource
    """The NodeSet CustomResourceDefinition: pass it to SlurmCluster(nodeset_crd=...)."""
    namespace: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        spec: OperatorSpec | None = None,
        *,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:SunkOperator", name, None, opts)
        op = spec or OperatorSpec()
        ns: pulumi.Input[str] = op.namespace
        if op.create_namespace:
            ns_res = create(f"{name}-namespace", namespace(op), child(self))
            ns = ns_res.metadata.name  # type: ignore[attr-defined]
        crd, *rest = operator_manifests(op)
        self.crd = create(f"{name}-crd", crd, child(self))
        for manifest in rest:
            suffix = manifest["kind"].lower()
            create(f"{name}-{suffix}", manifest, child(self), namespace=ns)
        self.namespace = pulumi.Output.from_input(ns)
        self.register_outputs({"namespace": self.namespace})
