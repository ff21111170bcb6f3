"""Names and in-cluster paths every layer agrees on. Suffixes never change once released."""

from __future__ import annotations

import hashlib
import re

from sunk import roles
from sunk.images import shared_rest_api
from sunk.spec.cluster import ClusterSpec

SLURM_ETC = "/etc/slurm"
STATE_SAVE = "/var/spool/slurmctld"
SLURMD_SPOOL = "/var/spool/slurmd"
JWT_KEY_PATH = f"{SLURM_ETC}/jwt/jwt_hs256.key"
SLURM_KEY_PATH = f"{SLURM_ETC}/slurm.key"
MUNGE_SOCKET = "/run/munge/munge.socket.2"
PROLOG_DIR = f"{SLURM_ETC}/prolog.d"
EPILOG_DIR = f"{SLURM_ETC}/epilog.d"
PROLOG_SLURMCTLD_DIR = f"{SLURM_ETC}/prolog-slurmctld.d"
EPILOG_SLURMCTLD_DIR = f"{SLURM_ETC}/epilog-slurmctld.d"
PLUGSTACK_DIR = f"{SLURM_ETC}/plugstack.conf.d"
# The ports are the role table's (sunk.roles), which the NetworkPolicies are built from.
SLURMCTLD_PORT = roles.SLURMCTLD_PORT
SLURMD_PORT = roles.SLURMD_PORT
SLURMDBD_PORT = roles.SLURMDBD_PORT
SLURMRESTD_PORT = roles.SLURMRESTD_PORT
SLURMRESTD_API = shared_rest_api()
"""The newest slurmrestd data_parser version every supported release serves (each release's row,
sunk.images.RELEASES: v0.0.42). The runtime's client picks the newest it speaks from the server's
own document (runtime/slurmrest/versions.py); this one is for tools and tests that need one fixed."""
RUNTIME_SLURM_USER = "slurm"
"""The Slurm user the runtime (scheduler, syncer, operator) acts as through slurmrestd: SlurmUser,
so it may drain and resume nodes, and the owner of every placeholder job."""
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


def shared_volume(name: str) -> str:
    """The pod volume of a shared volume, the same on every role (login, controller, slurmd):
    `shared-<name>`, shortened with a hash when that would pass a DNS label's 63 characters."""
    full = f"shared-{name}"
    if len(full) <= 63:
        return full
    return f"{full[:54].rstrip('-')}-{hashlib.sha256(full.encode()).hexdigest()[:8]}"


def topology_config_map(cluster_name: str) -> str:
    """ConfigMap (key `topology.conf`) the NodeSet operator keeps in step with the Node labels.
    slurmctld mounts it beside the per-file ConfigMaps in a projected volume (not subPath:
    subPath mounts never see updates)."""
    return f"{cluster_name}-topology"


_SLUG_JUNK = re.compile(r"[^a-z0-9]+")
_SCRIPT_DIRS = {
    # Longest first: _unslug reads a slug back through the first short form it starts with.
    "prolog-slurmctld-": "prolog-slurmctld.d/",
    "epilog-slurmctld-": "epilog-slurmctld.d/",
    "prolog-": "prolog.d/",
    "epilog-": "epilog.d/",
    "health-": "health.d/",
}
# Slugs whose file name holds a character the slug turns into '-' other than the extension dot.
_UNSLUG_FIXED = {
    "job-submit-lua": "job_submit.lua",
    "acct-gather-conf": "acct_gather.conf",
    "burst-buffer-conf": "burst_buffer.conf",
    "cli-filter-lua": "cli_filter.lua",
    "job-container-conf": "job_container.conf",
}
_HASH_CHARS = 10
"""40 bits of sha256: hashed names of one cluster collide only if those do (for a few files, ~2^-30)."""
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_MAX_NAME = 253


def _slug(path: str) -> str:
    for short, prefix in _SCRIPT_DIRS.items():
        if path.startswith(prefix):
            path = short + path[len(prefix) :]
    return _SLUG_JUNK.sub("-", path.lower()).strip("-")


def _unslug(slug: str) -> str | None:
    """The one path whose plain name is `<cluster>-<slug>`, or None (then no path has one)."""
    for short, prefix in _SCRIPT_DIRS.items():
        if slug.startswith(short):
            rest = _unslug(slug[len(short) :])
            return None if rest is None or rest.startswith(tuple(_SCRIPT_DIRS.values())) else prefix + rest
    if slug in _UNSLUG_FIXED:
        return _UNSLUG_FIXED[slug]
    stem, dash, ext = slug.rpartition("-")
    return f"{stem}.{ext}" if dash and stem else None


def config_file_map(cluster_name: str, path: str) -> str:
    """Name of the ConfigMap holding the rendered Slurm file `path` (relative to /etc/slurm).

    Plain names are `<cluster>-<slug>`: the path lowercased, `prolog.d/`/`epilog.d/` shortened
    to `prolog-`/`epilog-`, every other run of characters outside [a-z0-9] one '-'
    (`slurm.conf` -> `<cluster>-slurm-conf`, `gres-gpu.conf` -> `<cluster>-gres-gpu-conf`,
    `prolog.d/00-mark.sh` -> `<cluster>-prolog-00-mark-sh`). A slug loses information (`a_b` and
    `a-b` agree), so a path gets the plain name only if it is exactly the path `_unslug` reads
    back from the slug; any other path (and any name that would pass 253 characters) becomes
    `<cluster>-<slug, cut to fit>.<10 hex of sha256(path)>`. Hence names are unique per cluster:
    two plain names agree only for one path (`_unslug` is a function), a plain name has no '.'
    while a hashed one has, and two hashed names agree only if their hashes do. A plain name
    always has an extension part (`-conf`), so it never takes `<cluster>-topology` or another
    one-word object name. Always a DNS-1123 subdomain of at most 253 characters."""
    if not _DNS_LABEL.fullmatch(cluster_name) or len(cluster_name) > 63:
        raise ValueError(f"cluster name {cluster_name!r} is not a DNS-1123 label")
    slug = _slug(path)
    plain = f"{cluster_name}-{slug}"
    if slug and _unslug(slug) == path and len(plain) <= _MAX_NAME:
        return plain
    digest = hashlib.sha256(path.encode()).hexdigest()[:_HASH_CHARS]
    room = _MAX_NAME - len(cluster_name) - 2 - _HASH_CHARS
    return f"{cluster_name}-{slug[:room].rstrip('-') or 'file'}.{digest}"


def config_file_key(path: str) -> str:
    """The only key of a per-file ConfigMap: the file's name (ConfigMap keys cannot hold '/')."""
    return path.rsplit("/", 1)[-1]
