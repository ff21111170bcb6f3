"""The cluster-wide operator's options (`sunk:operator` in the stack that installs it, or
`sunk.api.OperatorSpec` in a program) and the tenant policy it enforces on every NodeSet.

The manifests they become are built in sunk.manifests.operator; the policy's checks are in
sunk.policy (the operator calls them on each pod it would create)."""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field

from sunk import keys
from sunk.images import DEFAULT_REGISTRY
from sunk.spec.base import AbsPath, Image, LabelKey, Model, OwnNamespace, Resources, _matcher, resources
from sunk.spec.pod import PodRole, PodSettings
from sunk.spec.services import Images, NetworkSpec


class TenantPolicy(Model):
    """The operator's tenant policy (`sunk:operator: {policy: ...}` in the stack that installs it)."""

    namespace_label: LabelKey | None = keys.TENANT
    """NodeSets are served only in namespaces carrying this label; tenant stacks put it on the
    namespaces they create (label a namespace you bring yourself). null: any namespace.
    Default: slurm.sunk.dev/tenant."""
    image_prefixes: list[
        Annotated[
            str,
            _matcher(
                r"[a-z0-9.:-]+(/[a-z0-9._-]+)*/",
                "a registry or repository path ending in '/', such as ghcr.io/acme/ (so ghcr.io/acme "
                "can't admit ghcr.io/acme-evil)",
                255,
            ),
        ]
    ] = Field(default_factory=lambda: [f"{DEFAULT_REGISTRY}/"])
    """Every container image of a slurmd pod (slurmd, sidecars, init containers) must start with
    one of these. Default: sunk's own registry, ghcr.io/sunk-dev/."""
    host_paths: list[AbsPath] = []
    """hostPath volumes a NodeSet may mount: these paths or paths under them. Default: none.

    What the policy does not confine: slurmd is privileged and runs, as root, the scripts a tenant
    supplies (prolog and epilog, the NodeSet's s6 scripts), and a NodeSet chooses its Nodes
    (nodeSelector, tolerations). Whoever may write NodeSets and the Slurm ConfigMaps in a tenant
    namespace is trusted with root on the Nodes its NodeSets reach: keep tenants on Nodes of their
    own (taints and a nodeSelector the platform sets) where that trust is not given."""


class OperatorSpec(PodSettings):
    """Options of the cluster-wide operator, and its pod settings (sunk.spec.pod.PodSettings)."""

    POD_ROLE: ClassVar[PodRole] = "operator"

    namespace: OwnNamespace = "sunk-system"
    """Namespace of the operator; not default or kube-* (sunk enforces Pod Security `restricted` on it).
    Default: sunk-system."""
    create_namespace: bool = True
    """Default: true."""
    image: Image = Images().runtime
    """The runtime image. Default: the cluster default runtime image."""
    replicas: Annotated[int, Field(ge=1, le=3)] = 1
    """More than one waits on the leader-election lease. Default: 1."""
    resources: Resources = resources("100m", "256Mi", "1Gi")
    """Default: requests 100m/256Mi, limit 1Gi memory."""
    monitoring: bool = False
    """A ServiceMonitor for the operator's metrics and a PrometheusRule with its alerts (no leader,
    a tenant's Slurm unreadable, failing actions); needs the Prometheus Operator CRDs. Default: false."""
    monitoring_labels: dict[str, str] = {}
    """Extra labels on them, e.g. the `release` your Prometheus selects. Default: none."""
    network: NetworkSpec = NetworkSpec()
    """The operator's NetworkPolicy (from the role table) and where the Kubernetes API is.
    Default: rendered, the API anywhere on 443 and 6443."""
    policy: TenantPolicy = TenantPolicy()
    """What a tenant's NodeSet may ask of the Nodes (slurmd pods are privileged): tenant namespaces
    only, images from allowed prefixes, hostPath volumes under allowed paths; the operator refuses
    the others and says why on the NodeSet. Default: namespaces labelled slurm.sunk.dev/tenant, images
    from ghcr.io/sunk-dev/, no hostPath."""
