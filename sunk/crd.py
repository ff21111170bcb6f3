"""The NodeSet custom resource: what the components write and the operator reads.

Its spec is the user's NodeSetSpec plus what the operator needs to build slurmd pods without
reading the stack: the resolved image, the config objects, and the config hash that triggers a
rolling update. The CRD's OpenAPI schema is generated from this model (sunk.manifests.crd)."""

from __future__ import annotations

from typing import Literal

from sunk.spec.base import ConfLine, DnsLabel, Model
from sunk.spec.nodeset import NodeSetSpec
from sunk.spec.scheduling import SharedVolumeSpec, TopologySpec

GROUP = "slurm.sunk.dev"
VERSION = "v1alpha1"
KIND = "NodeSet"
PLURAL = "nodesets"
API_VERSION = f"{GROUP}/{VERSION}"


class NodeSetResourceSpec(NodeSetSpec):
    """spec of a NodeSet object."""

    cluster_name: DnsLabel
    """Slurm ClusterName (and the prefix of the cluster's objects)."""
    slurmd_image: str
    """Resolved slurmd image reference (NodeSet override or the cluster default)."""
    config_map: DnsLabel
    """ConfigMap with the rendered Slurm files (keys from sunk.naming.config_key)."""
    auth_type: Literal["munge", "slurm"] = "munge"
    """auth/munge adds a munged container; auth/slurm mounts slurm.key."""
    auth_secret: DnsLabel
    """Secret holding the munge key (key `munge.key`) or slurm.key (key `slurm.key`)."""
    jwt_secret: DnsLabel
    """Secret holding the slurmrestd JWT key (key `jwt_hs256.key`)."""
    auth_secret_key: str | None = None
    """Key inside auth_secret, for an existing Secret that names it differently.
    Default: `munge.key` or `slurm.key` by auth_type."""
    jwt_secret_key: str | None = None
    """Key inside jwt_secret. Default: `jwt_hs256.key`."""
    config_hash: str = ""
    """Hash of everything rendered into the pods; a change rolls them (maxUnavailable at a time)."""
    shared_volumes: list[SharedVolumeSpec] = []
    """The cluster's shared volumes that mount on compute."""
    topology: TopologySpec = TopologySpec()
    """The cluster's topology (the same on every NodeSet of a cluster). The operator renders
    topology.conf from it and the labels of the Nodes its pods run on. Default: none."""
    topology_extra: list[ConfLine] = []
    """The cluster's extraConfig.topologyConf lines, appended to that topology.conf. Default: none."""


class NodeSetStatus(Model):
    """status of a NodeSet object, written by the operator."""

    desired: int = 0
    feasible: int = 0
    scheduled: int = 0
    ready: int = 0
    idle: int = 0
    allocated: int = 0
    draining: int = 0
    drained: int = 0
    down: int = 0
    updated: int = 0
    observed_generation: int = 0
    conditions: list[dict[str, str]] = []
