"""The NodeSet custom resource: what the components write and the operator reads.

Its spec is the user's NodeSetSpec plus what the operator needs to build slurmd pods without
reading the stack: the resolved image, the ConfigMap of each Slurm file its pods mount, the
Secrets, and the config hash that triggers a rolling update. The CRD's OpenAPI schema is generated from this model (sunk.manifests.nodeset_crd)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, model_validator

from sunk.images import DEFAULT_SLURM, supported_release
from sunk.spec.base import DnsLabel, DnsSubdomain, Model, SecretRef
from sunk.spec.identity import ClientCertRef, ConfigMapRef
from sunk.spec.nodeset import NodeSetSpec
from sunk.spec.scheduling import NamedTopologySpec, SharedVolumeSpec, TopologySpec, topology_file_of
from sunk.spec.slurmtext import GresConfLines, TopologyConfLines

GROUP = "slurm.sunk.dev"
VERSION = "v1alpha1"
KIND = "NodeSet"
PLURAL = "nodesets"
API_VERSION = f"{GROUP}/{VERSION}"

# Folders and file names as sunk.spec.base.FileName allows them: no '..', no absolute path.
_CONFIG_PATH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")


def _config_path(value: str) -> str:
    if len(value) > 253 or not _CONFIG_PATH.fullmatch(value):
        raise ValueError(f"{value!r} is not a path relative to /etc/slurm such as slurm.conf or prolog.d/00-x.sh")
    return value


ConfigPath = Annotated[str, AfterValidator(_config_path)]


class SssdRefs(Model):
    """What the sssd sidecar of a Slurm pod mounts (sunk.manifests.sssd): sssd.conf without the
    bind password, the password's Secret, and the TLS files."""

    config_map: DnsSubdomain
    """ConfigMap holding sssd.conf (key `sssd.conf`), rendered from the cluster's auth.ldap. It holds
    no secret: the sidecar appends the bind password from its Secret at start."""
    config_hash: str = ""
    """Hash of that sssd.conf: a change rolls the pods (sssd reads its file once, at start)."""
    bind_password_secret: SecretRef | None = None
    """The LDAP bind password. Default: none (anonymous or client-certificate bind)."""
    ca_secret: SecretRef | None = None
    """CA certificate (PEM) from a Secret. Default: none."""
    ca_config_map: ConfigMapRef | None = None
    """CA certificate (PEM) from a ConfigMap. Default: none."""
    client_cert_secret: ClientCertRef | None = None
    """Client certificate and key. Default: none."""


class NodeSetResourceSpec(NodeSetSpec):
    """spec of a NodeSet object."""

    cluster_name: DnsLabel
    """Slurm ClusterName (and the prefix of the cluster's objects)."""
    slurmd_image: str
    """Resolved slurmd image reference (NodeSet override or the cluster default)."""
    config_files: dict[ConfigPath, DnsSubdomain]
    """Every file the slurmd pods get under /etc/slurm: path relative to it -> the ConfigMap holding
    the file as its only key (sunk.manifests.config: one ConfigMap per rendered file; this NodeSet's
    `gres-<nodeset>.conf` is its `gres.conf`). Must include slurm.conf. Required."""
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
    slurm_version: Annotated[str, AfterValidator(supported_release)] = DEFAULT_SLURM
    """The cluster's Slurm release (slurm.version), for what the operator renders (topology.conf).
    Default: a cluster's default (sunk.images.DEFAULT_SLURM); sunk writes the cluster's in every NodeSet."""
    topology: TopologySpec = TopologySpec()
    """The cluster's topology (the same on every NodeSet of a cluster). The operator renders
    topology.conf from it and the labels of the Nodes its pods run on. Default: none."""
    gres_extra: GresConfLines = []
    """gpus.fromNodeLabels: the cluster's extraConfig.gresConf lines, appended to each pod's own
    gres.conf. Default: none."""
    topologies: list[NamedTopologySpec] = []
    """The cluster's named topologies (slurm.version 26.05): the operator then renders topology.yaml
    with every one of them instead of topology.conf. Default: none."""
    topology_extra: TopologyConfLines = []
    """The cluster's extraConfig.topologyConf lines, appended to that topology.conf. Default: none."""
    sssd: SssdRefs | None = None
    """Directory users (the cluster's auth.ldap): an sssd sidecar resolves them for slurmd, so jobs
    run as the user with the user's groups. Default: none (local users only)."""

    @property
    def topology_file(self) -> str | None:
        """topology.yaml (named topologies), topology.conf (one topology) or None."""
        return topology_file_of(self.topology, self.topologies)

    @model_validator(mode="after")
    def _slurm_conf_mounted(self) -> NodeSetResourceSpec:
        if "slurm.conf" not in self.config_files:
            given = ", ".join(sorted(self.config_files)) or "none"
            raise ValueError(
                f"configFiles must name the ConfigMap of slurm.conf (slurmd cannot start without it); got {given}"
            )
        return self


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
    outdated: int = 0
    """Members whose pod runs an older template (with updateStrategy OnDelete they stay until
    someone deletes them)."""
    protected: int = 0
    """slurmd pods a PodDisruptionBudget shields from eviction (Slurm node not drained and idle)."""
    replicas: int = 0
    """slurmd pods that exist and are not leaving: the scale subresource's status (kubectl scale,
    HPA, KEDA read it)."""
    selector: str = ""
    """The label selector of the NodeSet's slurmd pods, as the scale subresource reports it."""
    observed_generation: int = 0
    conditions: list[dict[str, str]] = []
