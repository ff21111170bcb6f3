"""SlurmCluster: one tenant's whole Slurm cluster in its namespace."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from sunk.manifests import parts
from sunk.manifests.pods import shared_claim_manifest
from sunk.podgate import admitted, gate_problems
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
from .webhook import Webhook


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
    webhook: Webhook | None
    """The pod admission webhook; None without inference.namespaces."""

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
        missing = [p.name for p in parts.PARTS if p.name not in _PARTS]
        if missing:
            # A part of the table (sunk.manifests.parts) that the render and the pod gate have
            # but no constructor here would be rendered and checked, and never deployed.
            raise TypeError(f"SlurmCluster has no constructor for the part(s) {missing} of sunk.manifests.parts.PARTS")
        gate = [] if admitted(spec) else gate_problems(spec)  # once per deploy: validation gated it
        if gate:
            raise SpecError([Problem("pods", p) for p in gate], f"SlurmCluster {name}")
        super().__init__("sunk:index:SlurmCluster", name, opts)
        self.namespace_resource = self.webhook = self.keygen = self.accounting = self.restapi = self.login = (
            self.monitoring
        ) = None
        self.login_endpoint = self.slurmrestd_url = None
        build = _Build(
            cluster=self,
            name=name,
            ctx=parts.context(spec, operator_namespace, keys_in_cluster=keys_in_cluster),
            namespace=spec.ns,
            allow_state_replacement=allow_state_replacement,
            nodeset_crd=nodeset_crd,
        )
        made: dict[str, list[pulumi.Resource]] = {}
        for part in parts.in_order(build.ctx):
            waits = [r for other in part.waits(build.ctx) for r in made.get(other, [])]
            made[part.name] = _PARTS[part.name](build, waits)
        ns = build.namespace
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


@dataclass
class _Build:
    """What each part's constructor needs: the cluster, its name, the table's context, the
    namespace (the Namespace's Output once the cluster creates it) and the deploy-only settings."""

    cluster: SlurmCluster
    name: str
    ctx: parts.Context
    namespace: pulumi.Input[str]
    allow_state_replacement: bool
    nodeset_crd: pulumi.Resource | None

    @property
    def spec(self) -> ClusterSpec:
        return self.ctx.spec

    def child(self, part: str) -> str:
        return f"{self.name}-{part}"

    def opts(self, waits: list[pulumi.Resource] | None = None, **kwargs: Any) -> pulumi.ResourceOptions:
        return child(self.cluster, depends_on=waits, **kwargs) if waits is not None else child(self.cluster, **kwargs)


def _namespace(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    manifest = parts.namespace(b.spec)
    # Retained like the state it holds: deleting the Namespace would delete its PVCs.
    made = typed(
        k8s.core.v1.Namespace,
        create(b.child("namespace"), manifest, b.opts(retain_on_delete=not b.allow_state_replacement)),
    )
    b.cluster.namespace_resource = made
    b.namespace = made.metadata.name
    return [made]


def _config(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    b.cluster.config = SlurmConfig(b.child("config"), b.spec, namespace=b.namespace, opts=b.opts())
    return [b.cluster.config]


def _auth(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    b.cluster.auth = Auth(
        b.child("auth"), b.spec, namespace=b.namespace, keys_in_cluster=b.ctx.keys_in_cluster, opts=b.opts()
    )
    return [b.cluster.auth]


def _keygen(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    b.cluster.keygen = KeyGenerator(
        b.child("keygen"),
        b.spec,
        namespace=b.namespace,
        refs=b.ctx.refs,
        keys_in_cluster=b.ctx.keys_in_cluster,
        opts=b.opts(),
    )
    return [b.cluster.keygen]


def _volumes(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    # Shared volumes sunk creates hold users' data (home, scratch): state, like slurmctld's.
    keep = state_options(b.allow_state_replacement)
    return [
        create(b.child(f"volume-{v.name}"), shared_claim_manifest(b.spec, v), b.opts(**keep), namespace=b.namespace)
        for v in b.spec.shared_volumes
        if v.create is not None
    ]


def _controller(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    b.cluster.controller = Controller(
        b.child("controller"),
        b.spec,
        namespace=b.namespace,
        refs=b.ctx.refs,
        allow_state_replacement=b.allow_state_replacement,
        # Its name and type were `<name>-controlplane` and ControlPlane: one alias naming both
        # keeps it, and through it every child (their names start with its name), in place.
        opts=b.opts(waits, aliases=[pulumi.Alias(name=b.child("controlplane"), type_="sunk:index:ControlPlane")]),
    )
    return [b.cluster.controller]


def _accounting(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    b.cluster.accounting = Accounting(
        b.child("accounting"),
        b.spec,
        namespace=b.namespace,
        refs=b.ctx.refs,
        allow_state_replacement=b.allow_state_replacement,
        keys_in_cluster=b.ctx.keys_in_cluster,
        opts=b.opts(waits),
    )
    return [b.cluster.accounting]


def _restapi(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    b.cluster.restapi = RestApi(b.child("restapi"), b.spec, namespace=b.namespace, refs=b.ctx.refs, opts=b.opts(waits))
    b.cluster.slurmrestd_url = b.cluster.restapi.url
    return [b.cluster.restapi]


def _login(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    b.cluster.login = Login(
        b.child("login"),
        b.spec,
        namespace=b.namespace,
        refs=b.ctx.refs,
        keys_in_cluster=b.ctx.keys_in_cluster,
        opts=b.opts(waits),
    )
    b.cluster.login_endpoint = b.cluster.login.endpoint
    return [b.cluster.login]


def _nodesets(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    # The NodeSets wait for the CRD too, when the same program installs the operator.
    crd = [b.nodeset_crd] if b.nodeset_crd is not None else []
    b.cluster.nodesets = NodeSets(
        b.child("nodesets"), b.spec, namespace=b.namespace, refs=b.ctx.refs, opts=b.opts([*waits, *crd])
    )
    return [b.cluster.nodesets]


def _runtime(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    b.cluster.runtime = Runtime(
        b.child("runtime"),
        b.spec,
        namespace=b.namespace,
        refs=b.ctx.refs,
        operator_namespace=b.ctx.operator_namespace,
        opts=b.opts(waits),
    )
    return [b.cluster.runtime]


def _network(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    b.cluster.network = NetworkPolicies(
        b.child("network"),
        b.spec,
        namespace=b.namespace,
        operator_namespace=b.ctx.operator_namespace,
        keys_in_cluster=b.ctx.keys_in_cluster,
        opts=b.opts(),
    )
    return [b.cluster.network]


def _monitoring(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    b.cluster.monitoring = Monitoring(
        b.child("monitoring"), b.spec, namespace=b.namespace, refs=b.ctx.refs, opts=b.opts(waits)
    )
    return [b.cluster.monitoring]


def _webhook(b: _Build, waits: list[pulumi.Resource]) -> list[pulumi.Resource]:
    b.cluster.webhook = Webhook(b.child("webhook"), b.spec, namespace=b.namespace, opts=b.opts(waits))
    return [b.cluster.webhook]


_PARTS: dict[str, Callable[[_Build, list[pulumi.Resource]], list[pulumi.Resource]]] = {
    "namespace": _namespace,
    "config": _config,
    "auth": _auth,
    "keygen": _keygen,
    "volumes": _volumes,
    "controller": _controller,
    "accounting": _accounting,
    "restapi": _restapi,
    "login": _login,
    "nodesets": _nodesets,
    "runtime": _runtime,
    "network": _network,
    "monitoring": _monitoring,
    "webhook": _webhook,
}
"""Each part of sunk.manifests.parts.PARTS -> what creates it, given the resources it waits for
(the table's `waits`); it returns what the parts that wait for it wait for."""
