"""Names and in-cluster paths every layer agrees on. Suffixes never change once released."""

from __future__ import annotations

from sunk.spec.cluster import ClusterSpec

SLURM_ETC = "/etc/slurm"
STATE_SAVE = "/var/spool/slurmctld"
SLURMD_SPOOL = "/var/spool/slurmd"
JWT_KEY_PATH = f"{SLURM_ETC}/jwt/jwt_hs256.key"
SLURM_KEY_PATH = f"{SLURM_ETC}/slurm.key"
MUNGE_SOCKET = "/run/munge/munge.socket.2"
PROLOG_DIR = f"{SLURM_ETC}/prolog.d"
EPILOG_DIR = f"{SLURM_ETC}/epilog.d"
PLUGSTACK_DIR = f"{SLURM_ETC}/plugstack.conf.d"
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819
SLURMRESTD_PORT = 6820
SLURMRESTD_API = "v0.0.42"
"""The slurmrestd OpenAPI version our client speaks (Slurm 24.11 serves v0.0.40-v0.0.42)."""
OWNED_REASON_PREFIX = "sunk:"
"""Drain reasons that sunk's controllers set start with this; others are never undone."""
OPERATOR_REASON_PREFIX = f"{OWNED_REASON_PREFIX}operator"
"""Drains the NodeSet operator sets (scale-in, rolling update) start with this. Only the operator
resumes them; the syncer must neither resume nor reword them (they have no Kubernetes cause)."""


def controller(spec: ClusterSpec) -> str:
    return f"{spec.name}-controller"


def controller_host(spec: ClusterSpec) -> str:
    """Pod 0 of the slurmctld StatefulSet: `hostname -s` inside it, so SlurmctldHost matches."""
    return f"{controller(spec)}-0"


def controller_fqdn(spec: ClusterSpec) -> str:
    return f"{controller_host(spec)}.{controller(spec)}.{spec.ns}.svc.cluster.local"


def accounting(spec: ClusterSpec) -> str:
    return f"{spec.name}-accounting"


def mariadb(spec: ClusterSpec) -> str:
    return f"{spec.name}-mariadb"


def restapi(spec: ClusterSpec) -> str:
    return f"{spec.name}-restapi"


def login(spec: ClusterSpec) -> str:
    return f"{spec.name}-login"


def nodeset(spec: ClusterSpec, name: str) -> str:
    return f"{spec.name}-{name}"


def slurm_node_name(nodeset: str, ordinal: int) -> str:
    """Slurm node (and pod hostname) of ordinal `ordinal` in a replicas-mode NodeSet."""
    return f"{nodeset}-{ordinal}"


def topology_config_map(cluster_name: str) -> str:
    """ConfigMap (key `topology.conf`) the NodeSet operator keeps in step with the Node labels.
    slurmctld mounts it beside the config ConfigMap in a projected volume (not subPath: subPath
    mounts never see updates)."""
    return f"{cluster_name}-topology"


def config_key(path: str) -> str:
    """ConfigMap key for a rendered file path relative to /etc/slurm (keys cannot hold '/')."""
    return path.replace("/", "_")
