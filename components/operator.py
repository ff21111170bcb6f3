"""Operator: the cluster-wide piece, installed once per Kubernetes cluster."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from sunk.manifests.operator import namespace, operator_manifests
from sunk.spec.operator import OperatorSpec

from ._k8s import Component, child, create, text, typed


class Operator(Component):
    """The NodeSet CRD (schema generated from the model the operator parses), the operator's
    namespace, ServiceAccount, ClusterRole (no cluster-admin), leader-election Role and
    Deployment. Tenants' SlurmCluster NodeSets wait for `crd` when both are in one program."""

    crd: k8s.apiextensions.v1.CustomResourceDefinition
    """The NodeSet CustomResourceDefinition: pass it to SlurmCluster(nodeset_crd=...)."""
    deployment: k8s.apps.v1.Deployment
    """The operator."""
    namespace: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        spec: OperatorSpec | None = None,
        *,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        # Named SunkOperator (a stutter under the `sunk` package) until renamed; the alias keeps the
        # CRD and the operator of existing stacks in place.
        super().__init__("sunk:index:Operator", name, opts, formerly=["sunk:index:SunkOperator"])
        op = spec or OperatorSpec()
        # Cluster-wide: every tenant's NodeSets (and so their slurmd pods) hang off the CRD. A
        # `pulumi destroy` of the stack that installed it forgets these objects and leaves them
        # in the cluster; removing the operator is a deliberate kubectl step.
        ns: pulumi.Input[str] = op.namespace
        if op.create_namespace:
            ns_res = create(f"{name}-namespace", namespace(op), child(self, retain_on_delete=True))
            ns = ns_res.metadata.name  # type: ignore[attr-defined]
        crd, *rest = operator_manifests(op)
        self.crd = typed(
            k8s.apiextensions.v1.CustomResourceDefinition,
            create(f"{name}-crd", crd, child(self, retain_on_delete=True)),
        )
        for manifest in rest:
            suffix = manifest["kind"].lower()
            made = create(f"{name}-{suffix}", manifest, child(self, retain_on_delete=True), namespace=ns)
            if isinstance(made, k8s.apps.v1.Deployment):
                self.deployment = made
        self.namespace = text(ns) if isinstance(ns, str) else pulumi.Output.from_input(ns)
        self.register_outputs({"namespace": self.namespace})
