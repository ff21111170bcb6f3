"""SlurmCluster: one tenant's whole Slurm cluster in its namespace."""

from __future__ import annotations

import warnings

import pulumi
import pulumi_kubernetes as k8s

from sunk.manifests.cluster import namespace as namespace_manifest
from sunk.manifests.pods import shared_claim_manifest
from sunk.podgate import gate_problems
from sunk.problem import Problem
from sunk.spec.cluster import ClusterSpec
from sunk.spec.errors import SpecError

from ._k8s import Component, child, create, state_options, text, typed
from .accounting import Accounting
from .auth import Auth
from .config import SlurmConfig
from .controller import Controller
from .keygen import KeyGenerator
from .login import Login
from .monitoring import Monitoring
from .network import NetworkPolicies
from .nodesets import NodeSets
from .restapi import RestApi
from .runtime import Runtime


class SlurmCluster(Component):
    """Everything one tenant's Slurm cluster needs, from a validated ClusterSpec: namespace,
    config, auth, slurmctld, accounting, slurmrestd, login, NodeSets and the runtime.

    The compute pods come from the cluster-wide operator (Operator), installed once per
    Kubernetes cluster; pass its `crd` as `nodeset_crd` when both live in one program.

    Values the program computes go into the spec through `sunk.components.late` (a Namespace's
    name, an image, a StorageClass, an existing Secret's name); `opts.depends_on`, providers and
    transformations reach every child. Parts the spec disables are None."""

    namespace: pulumi.Output[str]
    """The tenant namespace."""
    login_endpoint: pulumi.Output[str] | None
    """Where users ssh to; None when login is disabled."""
    slurmrestd_url: pulumi.Output[str] | None
    """slurmrestd inside the Kubernetes cluster; None when the REST API is disabled."""
    controller_host: pulumi.Output[str]
    """slurmctld inside the Kubernetes cluster."""
    namespace_resource: k8s.core.v1.Namespace | None
    """The Namespace this component created; None with `createNamespace: false`."""
    config: SlurmConfig
    auth: Auth
    keygen: KeyGenerator | None
    """The in-cluster key generator; None when the keys are Pulumi's (`keys_in_cluster` off)."""
    controller: Controller
    """slurmctld."""
    accounting: Accounting | None
    restapi: RestApi | None
    login: Login | None
    nodesets: NodeSets
    runtime: Runtime
    network: NetworkPolicies
    monitoring: Monitoring | None

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        operator_namespace: str | None = "sunk-system",
        nodeset_crd: pulumi.Resource | None = None,
        allow_state_replacement: bool = False,
        keys_in_cluster: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`allow_state_replacement`: lift the protection of slurmctld's state and the accounting
        database's PVCs, for the one `up` that must replace them (a storage class change).
        `keys_in_cluster`: the keys and passwords are made in the cluster by a one-shot Job
        (KeyGenerator), never in the Pulumi state; otherwise pulumi-random and pulumi-tls make
        them and the state keeps them encrypted (stack setting `sunk:keys`).
        Raises SpecError, before any resource exists, for what the pod gate (sunk.podgate) refuses
        in the pods this spec makes; a stack file's program got the same refusals from validate."""
        gate = gate_problems(spec)
        if gate:
            raise SpecError([Problem("pods", p) for p in gate], f"SlurmCluster {name}")
        super().__init__("sunk:index:SlurmCluster", name, opts)
        ns: pulumi.Input[str] = spec.ns
        self.namespace_resource = None
        if spec.create_namespace:
            self.namespace_resource = typed(
                # Retained like the state it holds: deleting the Namespace would delete its PVCs.
                k8s.core.v1.Namespace,
                create(
                    f"{name}-namespace",
                    namespace_manifest(spec),
                    child(self, retain_on_delete=not allow_state_replacement),
                ),
            )
            ns = self.namespace_resource.metadata.name
        self.config = SlurmConfig(f"{name}-config", spec, namespace=ns, opts=child(self))
        self.auth = auth = Auth(f"{name}-auth", spec, namespace=ns, keys_in_cluster=keys_in_cluster, opts=child(self))
        self.keygen = None
        if keys_in_cluster:
            self.keygen = KeyGenerator(f"{name}-keygen", spec, namespace=ns, refs=auth.refs, opts=child(self))
        # Shared volumes sunk creates hold users' data (home, scratch): state, like slurmctld's.
        keep = state_options(allow_state_replacement)
        claims = [
            create(f"{name}-volume-{v.name}", shared_claim_manifest(spec, v), child(self, **keep), namespace=ns)
            for v in spec.shared_volumes
            if v.create is not None
        ]
        # Workloads wait for their files, keys and volumes so first pods start complete.
        keyed: list[pulumi.Resource] = [auth, *([self.keygen] if self.keygen is not None else [])]
        ready = [self.config, *keyed, *claims]
        refs = auth.refs
        # A release upgrade (slurm.upgradeFrom, sunk.upgrade's order): slurmdbd moves first and
        # converts the database, slurmctld once slurmdbd's rollout is ready, everything else once
        # slurmctld's is (Pulumi waits for a workload's rollout before updating what depends on
        # it; the operator then replaces each slurmd once it runs no job).
        upgrading = spec.slurm.upgrade_from not in (None, spec.slurm.version)

        def accounting() -> Accounting:
            return Accounting(
                f"{name}-accounting",
                spec,
                namespace=ns,
                refs=refs,
                allow_state_replacement=allow_state_replacement,
                keys_in_cluster=keys_in_cluster,
                opts=child(self, depends_on=ready),
            )

        self.accounting = accounting() if upgrading and spec.accounting.enabled else None
        first: list[pulumi.Resource] = [self.accounting] if self.accounting is not None else []
        self.controller = Controller(
            f"{name}-controller",
            spec,
            namespace=ns,
            refs=refs,
            allow_state_replacement=allow_state_replacement,
            # Its name and type were `<name>-controlplane` and ControlPlane: one alias naming both
            # keeps it, and through it every child (their names start with its name), in place.
            opts=child(
                self,
                depends_on=[*ready, *first],
                aliases=[pulumi.Alias(name=f"{name}-controlplane", type_="sunk:index:ControlPlane")],
            ),
        )
        if spec.accounting.enabled and self.accounting is None:
            self.accounting = accounting()
        after: list[pulumi.Resource] = [self.controller] if upgrading else []
        self.restapi = self.slurmrestd_url = None
        if spec.restapi.enabled:
            self.restapi = RestApi(
                f"{name}-restapi", spec, namespace=ns, refs=refs, opts=child(self, depends_on=[*ready, *after])
            )
            self.slurmrestd_url = self.restapi.url
        self.login = self.login_endpoint = None
        if spec.login.enabled:
            self.login = Login(
                f"{name}-login",
                spec,
                namespace=ns,
                refs=refs,
                keys_in_cluster=keys_in_cluster,
                opts=child(self, depends_on=[*ready, *after]),
            )
            self.login_endpoint = self.login.endpoint
        self.nodesets = NodeSets(
            f"{name}-nodesets",
            spec,
            namespace=ns,
            refs=refs,
            opts=child(self, depends_on=[*ready, *([nodeset_crd] if nodeset_crd is not None else []), *after]),
        )
        self.runtime = Runtime(
            f"{name}-runtime",
            spec,
            namespace=ns,
            refs=refs,
            operator_namespace=operator_namespace,
            opts=child(self, depends_on=[*keyed, *after]),
        )
        self.network = NetworkPolicies(
            f"{name}-network",
            spec,
            namespace=ns,
            operator_namespace=operator_namespace,
            keys_in_cluster=keys_in_cluster,
            opts=child(self),
        )
        self.monitoring = None
        if spec.monitoring.enabled:
            self.monitoring = Monitoring(
                f"{name}-monitoring", spec, namespace=ns, refs=refs, opts=child(self, depends_on=keyed)
            )
        self.namespace = text(ns) if isinstance(ns, str) else pulumi.Output.from_input(ns)
        self.controller_host = self.controller.host
        self.register_outputs(
            {
                "namespace": self.namespace,
                "login_endpoint": self.login_endpoint,
                "slurmrestd_url": self.slurmrestd_url,
                "controller_host": self.controller_host,
            }
        )

    @property
    def control_plane(self) -> Controller:
        """Deprecated: `controller` (slurmctld), the spec's name for it."""
        warnings.warn(
            "SlurmCluster.control_plane is deprecated: use SlurmCluster.controller", DeprecationWarning, stacklevel=2
        )
        return self.controller
