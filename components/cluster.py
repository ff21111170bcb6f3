"""SlurmCluster: one tenant's whole Slurm cluster in its namespace."""

from __future__ import annotations

import pulumi

from sunk.manifests.cluster import namespace as namespace_manifest
from sunk.manifests.pods import shared_claim_manifest
from sunk.spec.cluster import ClusterSpec

from ._k8s import child, create
from .accounting import Accounting
from .auth import Auth
from .config import SlurmConfig
from .controlplane import ControlPlane
from .login import Login
from .monitoring import Monitoring
from .network import NetworkPolicies
from .nodesets import NodeSets
from .restapi import RestApi
from .runtime import Runtime

NO_LOGIN = "<login disabled>"
NO_RESTAPI = "<restapi disabled>"


class SlurmCluster(pulumi.ComponentResource):
    """Everything one tenant's Slurm cluster needs, from a validated ClusterSpec: namespace,
    config, auth, slurmctld, accounting, slurmrestd, login, NodeSets and the runtime.

    The compute pods come from the cluster-wide operator (SunkOperator), installed once per
    Kubernetes cluster; pass its `crd` as `nodeset_crd` when both live in one program."""

    namespace: pulumi.Output[str]
    """The tenant namespace."""
    login_endpoint: pulumi.Output[str]
    """Where users ssh to."""
    slurmrestd_url: pulumi.Output[str]
    """slurmrestd inside the Kubernetes cluster."""
    controller_host: pulumi.Output[str]
    """slurmctld inside the Kubernetes cluster."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        operator_namespace: str | None = "sunk-system",
        nodeset_crd: pulumi.Resource | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:SlurmCluster", name, None, opts)
        ns: pulumi.Input[str] = spec.ns
        if spec.create_namespace:
            ns_res = create(f"{name}-namespace", namespace_manifest(spec), child(self))
            ns = ns_res.metadata.name  # type: ignore[attr-defined]
        config = SlurmConfig(f"{name}-config", spec, namespace=ns, opts=child(self))
        auth = Auth(f"{name}-auth", spec, namespace=ns, opts=child(self))
        claims = [
            create(f"{name}-volume-{v.name}", shared_claim_manifest(spec, v), child(self), namespace=ns)
            for v in spec.shared_volumes
            if v.create is not None
        ]
        # Workloads wait for their files, keys and volumes so first pods start complete.
        ready = [config, auth, *claims]
        refs = auth.refs
        control = ControlPlane(
            f"{name}-controlplane", spec, namespace=ns, refs=refs, opts=child(self, depends_on=ready)
        )
        if spec.accounting.enabled:
            Accounting(f"{name}-accounting", spec, namespace=ns, refs=refs, opts=child(self, depends_on=ready))
        self.slurmrestd_url = pulumi.Output.from_input(NO_RESTAPI)
        if spec.restapi.enabled:
            rest = RestApi(f"{name}-restapi", spec, namespace=ns, refs=refs, opts=child(self, depends_on=ready))
            self.slurmrestd_url = rest.url
        self.login_endpoint = pulumi.Output.from_input(NO_LOGIN)
        if spec.login.enabled:
            login = Login(f"{name}-login", spec, namespace=ns, refs=refs, opts=child(self, depends_on=ready))
            self.login_endpoint = login.endpoint
        NodeSets(
            f"{name}-nodesets",
            spec,
            namespace=ns,
            refs=refs,
            opts=child(self, depends_on=[*ready, *([nodeset_crd] if nodeset_crd is not None else [])]),
        )
        Runtime(
            f"{name}-runtime",
            spec,
            namespace=ns,
            refs=refs,
            operator_namespace=operator_namespace,
            opts=child(self, depends_on=[auth]),
        )
        NetworkPolicies(f"{name}-network", spec, namespace=ns, operator_namespace=operator_namespace, opts=child(self))
        if spec.monitoring.enabled:
            Monitoring(f"{name}-monitoring", spec, namespace=ns, opts=child(self))
        self.namespace = pulumi.Output.from_input(ns)
        self.controller_host = control.host
        self.register_outputs(
            {
                "namespace": self.namespace,
                "login_endpoint": self.login_endpoint,
                "slurmrestd_url": self.slurmrestd_url,
                "controller_host": self.controller_host,
            }
        )
