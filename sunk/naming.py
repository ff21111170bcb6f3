"""Names and in-cluster paths every layer agrees on. Suffixes never change once released.

Every Kubernetes object name sunk builds is built here (tests/test_naming_home.py fails on a
name-building f-string elsewhere). The functions take the cluster as anything with a `name` and a
namespace `ns` (a ClusterSpec), so the spec itself may ask for its objects' names."""

from __future__ import annotations

import hashlib
import re
from typing import Protocol

from sunk import roles
from sunk.images import shared_rest_api


class ClusterSpec(Protocol):
    """What names are built from: the cluster's name and namespace (sunk.spec.cluster.ClusterSpec).
    A protocol, not the model, so the spec may import this module."""

    @property
    def name(self) -> str: ...

    @property
    def ns(self) -> str: ...


SLURM_ETC = "/etc/slurm"
STATE_SAVE = "/var/spool/slurmctld"
CONTROLLER_LOCK = ".slurmctld.lock"
"""In StateSaveLocation: the lock every slurmctld's container holds shared while it runs
(slurmctld-start.sh), and an upgrade's state-guard takes exclusively (state-guard.sh). A dot name:
slurmctld's own files never start with one, and the guard's `*` does not match it."""
SLURMD_SPOOL = "/var/spool/slurmd"
JWT_KEY_PATH = f"{SLURM_ETC}/jwt/jwt_hs256.key"
SLURM_KEY_PATH = f"{SLURM_ETC}/slurm.key"
MUNGE_SOCKET = "/run/munge/munge.socket.2"
PROLOG_DIR = f"{SLURM_ETC}/prolog.d"
EPILOG_DIR = f"{SLURM_ETC}/epilog.d"
PROLOG_SLURMCTLD_DIR = f"{SLURM_ETC}/prolog-slurmctld.d"
EPILOG_SLURMCTLD_DIR = f"{SLURM_ETC}/epilog-slurmctld.d"
PLUGSTACK_DIR = f"{SLURM_ETC}/plugstack.conf.d"
HA_DIR = "ha.d"
"""Under /etc/slurm: the SlurmctldPrimaryOnProg and OffProg of a controller with backups."""
PRIMARY_MARK = "/run/slurmctld/primary"
"""Present while this pod's slurmctld is the primary (pod memory: a restarted pod has none)."""
STANDBY_MARK = "/run/slurmctld/standby"
"""Present while this pod's slurmctld stands by as a backup."""
FENCE_STOP = "/run/slurmctld/fence-stop"
"""Written by the fence container when this pod's slurmctld may not act as the primary (sunk.fence):
the watcher SlurmctldPrimaryOnProg starts then stops slurmctld."""
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


OPERATOR = "sunk-operator"
"""The cluster-wide operator's Deployment, ServiceAccount, ClusterRole (and its binding), metrics
Service and leader-election Lease."""


def operator_alerts() -> str:
    """The operator's PrometheusRule."""
    return f"{OPERATOR}-alerts"


def operator_leader_election() -> str:
    """The Role (and its binding) on the operator's leader-election Lease."""
    return f"{OPERATOR}-leader-election"


def namespace(tenant: str, cluster_name: str) -> str:
    """A cluster's namespace when the stack names none: `<tenant>-<cluster>`."""
    return f"{tenant}-{cluster_name}"


def controller(spec: ClusterSpec) -> str:
    return f"{spec.name}-controller"


def controller_fence(spec: ClusterSpec) -> str:
    """The Lease a slurmctld with backups holds while it is the primary (sunk.fence), and the
    ServiceAccount, Role and RoleBinding of its controller pods, which may write only that Lease."""
    return f"{controller(spec)}-fence"


def controller_state_claim(spec: ClusterSpec) -> str:
    """slurmctld's StateSaveLocation volume claim."""
    return f"{controller(spec)}-state"


def controller_host(spec: ClusterSpec, ordinal: int = 0) -> str:
    """Pod `ordinal` of the slurmctld StatefulSet: `hostname -s` inside it, so its SlurmctldHost
    line matches (pod 0 is the primary)."""
    return f"{controller(spec)}-{ordinal}"


def controller_fqdn(spec: ClusterSpec, ordinal: int = 0) -> str:
    """Pod `ordinal`'s name in the headless Service, which publishes it whether ready or not."""
    return f"{controller_host(spec, ordinal)}.{controller(spec)}.{spec.ns}.svc.cluster.local"


def accounting(spec: ClusterSpec) -> str:
    return f"{spec.name}-accounting"


def accounting_setup_job(spec: ClusterSpec, digest: str) -> str:
    """The Job that loads accounts and QOS, named by a hash of what it does (Jobs are immutable)."""
    return f"{spec.name}-accounting-setup-{digest}"


def mariadb(spec: ClusterSpec) -> str:
    """The bundled MariaDB's StatefulSet and Service, and the Secret of its passwords."""
    return f"{spec.name}-mariadb"


def mariadb_data_claim(spec: ClusterSpec) -> str:
    return f"{mariadb(spec)}-data"


def backup_claim(cluster_name: str, component: str, release: str) -> str:
    """The claim one daemon's copy (accounting: the dump; controller: the state snapshot) is kept
    on before an upgrade from `release`: one per release moved from."""
    return f"{cluster_name}-{component}-backup-{release}"


def database_dump(database: str, release: str) -> str:
    """The dump of the accounting database taken on `release`, in the backup volume."""
    return f"{database}-{release}"


STATE_SNAPSHOT_PREFIX = "statesave"
"""A state snapshot's name: statesave-<release that wrote it>."""


def state_snapshot(release: str) -> str:
    """The copy of StateSaveLocation taken on `release`, beside it in slurmctld's state volume."""
    return f"{STATE_SNAPSHOT_PREFIX}-{release}"


def auth_secret(spec: ClusterSpec) -> str:
    """The munge or slurm key sunk generates (no existingSecret)."""
    return f"{spec.name}-auth"


def jwt_secret(spec: ClusterSpec) -> str:
    """The JWT signing key sunk generates (no existingSecret)."""
    return f"{spec.name}-jwt"


def db_secret(spec: ClusterSpec) -> str:
    """The accounting database's passwords: named as the database it opens."""
    return mariadb(spec)


def login_host_keys(spec: ClusterSpec) -> str:
    """login's SSH host keys Secret."""
    return f"{spec.name}-login-host-keys"


def sssd_config(cluster_name: str) -> str:
    """The ConfigMap of sssd.conf (no password: the sidecar appends the bind password at start)."""
    return f"{cluster_name}-sssd-conf"


def keygen(spec: ClusterSpec) -> str:
    """The key generator's ServiceAccount, Role and binding."""
    return f"{spec.name}-keygen"


def keygen_renew(spec: ClusterSpec) -> str:
    """The key generator's CronJob that renews the certificates it made (the webhook's)."""
    return f"{keygen(spec)}-renew"


def keygen_job(spec: ClusterSpec, digest: str) -> str:
    """The key generator's Job, named by a hash of its pod (a Job's template is immutable)."""
    return f"{keygen(spec)}-{digest}"


def runtime_controller(spec: ClusterSpec, controller: str) -> str:
    """A tenant's runtime controller (syncer, scheduler) or exporter: Deployment, ServiceAccount,
    Role, metrics Service."""
    return f"{spec.name}-{controller}"


def webhook(spec: ClusterSpec) -> str:
    """The pod admission webhook (inference.namespaces): Deployment, ServiceAccount, Service."""
    return f"{spec.name}-webhook"


def webhook_tls_secret(spec: ClusterSpec) -> str:
    """The webhook's serving certificate, key and CA (made in the cluster by the key generator)."""
    return f"{spec.name}-webhook-tls"


def cluster_scoped(spec: ClusterSpec, what: str) -> str:
    """A cluster-scoped object of one tenant's cluster (ClusterRole, ClusterRoleBinding,
    MutatingWebhookConfiguration), or one it places in a namespace that is not its own: named
    after its namespace and cluster, so tenants never share or overwrite one."""
    return f"sunk-{spec.ns}-{spec.name}-{what}"


def operator_access(spec: ClusterSpec) -> str:
    """The Role (and binding) granting the cluster-wide operator what it reads in this tenant."""
    return f"{spec.name}-operator"


def runtime_monitor(spec: ClusterSpec) -> str:
    """The ServiceMonitor of the runtime's metrics Services."""
    return f"{spec.name}-runtime"


def alerts(spec: ClusterSpec) -> str:
    """The cluster's PrometheusRule."""
    return f"{spec.name}-alerts"


def dashboard(spec: ClusterSpec, board: str) -> str:
    """A Grafana dashboard's ConfigMap; the runtime board keeps the name it always had."""
    return f"{spec.name}-dashboard" if board == "runtime" else f"{spec.name}-dashboard-{board}"


def default_deny(spec: ClusterSpec) -> str:
    """The NetworkPolicy that closes every pod of the cluster."""
    return f"{spec.name}-default-deny"


def role_policy(spec: ClusterSpec, role: str) -> str:
    """The NetworkPolicy of one role (sunk.roles)."""
    return f"{spec.name}-{role}"


def restapi(spec: ClusterSpec) -> str:
    return f"{spec.name}-restapi"


def login(spec: ClusterSpec) -> str:
    return f"{spec.name}-login"


def nodeset(spec: ClusterSpec, name: str) -> str:
    return nodeset_service(spec.name, name)


def nodeset_service(cluster_name: str, nodeset: str) -> str:
    """A NodeSet's headless Service (each slurmd pod's DNS name is `<node>.<service>`)."""
    return f"{cluster_name}-{nodeset}"


def nodeset_pod(cluster_name: str, nodeset: str, slurm_node: str, *, replicas: bool) -> str:
    """`<cluster>-<slurm node>` in replicas mode (the node already starts with the NodeSet name);
    `<cluster>-<nodeset>-<slurm node>` in all-matching-nodes, where the node is a Kubernetes Node
    name that two NodeSets may share."""
    if replicas:
        return f"{cluster_name}-{slurm_node}"
    return f"{cluster_name}-{nodeset}-{slurm_node}"


def shared_claim(cluster_name: str, volume: str) -> str:
    """The PersistentVolumeClaim sunk creates for a shared volume with `create:`."""
    return f"{cluster_name}-{volume}"


def slurm_node_name(nodeset: str, ordinal: int) -> str:
    """Slurm node (and pod hostname) of ordinal `ordinal` in a replicas-mode NodeSet."""
    return f"{nodeset}-{ordinal}"


def slurm_node_for_kube_node(kube_node: str) -> str:
    """all-matching-nodes: the Slurm node (and pod hostname) on Kubernetes Node `kube_node`.

    The Node name itself when it is a DNS label (a hostname must be one); otherwise (dots, over
    63 characters) a label made from it plus a hash of the full name, so it stays unique."""
    if len(kube_node) <= 63 and _DNS_LABEL.fullmatch(kube_node):
        return kube_node
    base = re.sub(r"[^a-z0-9-]+", "-", kube_node.lower()).strip("-")[:54].rstrip("-") or "node"
    return f"{base}-{hashlib.sha256(kube_node.encode()).hexdigest()[:8]}"


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
