"""Accounting: the in-cluster MariaDB (or nothing, with an external database), slurmdbd and its
Service, and the Job that registers the cluster and creates the spec's QOS."""

from __future__ import annotations

from sunk import keys, naming, roles
from sunk.manifests import scripts, upgrade
from sunk.manifests.auth import AuthRefs, db_secret_name
from sunk.manifests.config import (
    accounting_hash,
    role_files,
    slurm_files,
    slurm_projection,
)
from sunk.manifests.meta import (
    MARIADB_UID,
    SLURM_UID,
    Manifest,
    content_hash,
    exec_probe,
    labels,
    metadata,
    obj,
    read_only,
    resources,
    selector,
    tcp_probe,
)
from sunk.manifests.pods import auth_mounts, auth_sidecars, auth_volumes, slurm_pod_security
from sunk.manifests.podsettings import apply_pod, object_meta
from sunk.manifests.sssd import with_sssd
from sunk.render import ACCOUNTING_SETUP
from sunk.spec.cluster import ClusterSpec
from sunk.spec.services import MARIADB_BUFFER_POOL_MIB

COMPONENT = "accounting"
DB_COMPONENT = "mariadb"
SETUP_COMPONENT = "accounting-setup"
MARIADB_PORT = roles.MARIADB_PORT
MARIADB_RUN = "/run/mysqld"
MARIADB_SOCKET = f"{MARIADB_RUN}/mysqld.sock"
"""Where sunk-mariadb-entrypoint starts mariadbd's socket (runtime/images/mariadb)."""
DATABASE = "slurm_acct_db"
DB_USER = "slurm"


def mariadb_claim_name(spec: ClusterSpec) -> str:
    return naming.mariadb_data_claim(spec)


def mariadb_manifests(spec: ClusterSpec) -> list[Manifest]:
    """PVC, Service and StatefulSet of the in-cluster database. Its password Secret
    (`<cluster>-mariadb`) comes from the component, which generates the values."""
    db = spec.accounting.mariadb
    claim: Manifest = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": db.storage_size}}}
    if db.storage_class:
        claim["storageClassName"] = db.storage_class
    name = naming.mariadb(spec)
    secret_dir = "/etc/mariadb-secret"
    container = {
        "name": "mariadb",
        "image": spec.images.mariadb.ref,
        # slurmdbd 24.11 logs errors with a buffer pool under 2G (measured 2026-11; 1G still errs) or a
        # short lock wait timeout (Slurm's accounting guide: 900). MariaDbSpec keeps the memory
        # request and limit above the pool.
        "args": [
            f"--innodb-buffer-pool-size={MARIADB_BUFFER_POOL_MIB}M",
            "--innodb-log-file-size=64M",
            "--innodb-lock-wait-timeout=900",
            # MariaDB 11.8 turns it on by default; slurmdbd 26.05 logs an error at start ("not
            # supported by Slurm and will cause slurmdbd to fatal when a write conflicts with a
            # concurrent transaction", measured 2026-11), and 24.11 runs into the same conflicts silently.
            "--innodb-snapshot-isolation=OFF",
        ],
        "env": [
            {"name": "MARIADB_DATABASE", "value": DATABASE},
            {"name": "MARIADB_USER", "value": DB_USER},
            {"name": "MARIADB_PASSWORD_FILE", "value": f"{secret_dir}/{keys.DB_PASSWORD}"},
            {"name": "MARIADB_ROOT_PASSWORD_FILE", "value": f"{secret_dir}/{keys.DB_ROOT_PASSWORD}"},
        ],
        "ports": [{"name": "mysql", "containerPort": MARIADB_PORT, "protocol": "TCP"}],
        "securityContext": read_only(MARIADB_UID),
        "resources": resources(db.resources),
        "startupProbe": tcp_probe("mysql", period=5, failures=60),
        # Our image has no healthcheck.sh (the official image's); `ping` exits 0 whenever the
        # server answers, even when it refuses the (passwordless) login. The first-start server
        # listens on the socket too, but has no network: the startup probe holds until it is gone.
        "readinessProbe": exec_probe(["mariadb-admin", f"--socket={MARIADB_SOCKET}", "ping"], period=10),
        "livenessProbe": tcp_probe("mysql", period=20, failures=6),
        "volumeMounts": [
            {"name": "data", "mountPath": "/var/lib/mysql"},
            {"name": "run", "mountPath": MARIADB_RUN},
            # mariadbd's tmpdir: sorts and temporary tables too big for memory.
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "secret", "mountPath": secret_dir, "readOnly": True},
        ],
    }
    pod = {
        "metadata": {"labels": labels(spec, DB_COMPONENT)},
        "spec": {
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": {**slurm_pod_security(MARIADB_UID), "runAsNonRoot": True},
            "containers": [container],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": mariadb_claim_name(spec)}},
                {"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}},
                {"name": "tmp", "emptyDir": {"sizeLimit": "2Gi"}},
                {"name": "secret", "secret": {"secretName": db_secret_name(spec), "defaultMode": 0o440}},
            ],
        },
    }
    pod = apply_pod(pod, db, main="mariadb", pull_secrets=spec.images.pull_secrets, extra_args=db.extra_args)
    return [
        obj(
            "v1",
            "PersistentVolumeClaim",
            object_meta(metadata(spec, mariadb_claim_name(spec), DB_COMPONENT), db),
            spec=claim,
        ),
        obj(
            "v1",
            "Service",
            object_meta(metadata(spec, name, DB_COMPONENT), db),
            spec={
                "selector": selector(spec, DB_COMPONENT),
                "ports": [{"name": "mysql", "port": MARIADB_PORT, "targetPort": "mysql", "protocol": "TCP"}],
            },
        ),
        obj(
            "apps/v1",
            "StatefulSet",
            object_meta(metadata(spec, name, DB_COMPONENT), db),
            spec={
                "replicas": 1,
                "serviceName": name,
                "selector": {"matchLabels": selector(spec, DB_COMPONENT)},
                "template": pod,
            },
        ),
    ]


def slurmdbd_manifests(spec: ClusterSpec, refs: AuthRefs) -> list[Manifest]:
    assert refs.db_password is not None, "accounting is enabled, so a password reference exists"
    image = spec.images.accounting.ref
    name = naming.accounting(spec)
    container: Manifest = {
        "name": "slurmdbd",
        "image": image,
        "command": scripts.sh(scripts.slurmdbd_start(guard=upgrade.slurmdbd_guard(spec), release=spec.slurm.version)),
        "ports": [{"name": "slurmdbd", "containerPort": naming.SLURMDBD_PORT, "protocol": "TCP"}],
        "securityContext": read_only(SLURM_UID),
        "resources": resources(spec.accounting.resources),
        "startupProbe": tcp_probe("slurmdbd", period=5, failures=60),
        "readinessProbe": tcp_probe("slurmdbd", period=10),
        "livenessProbe": tcp_probe("slurmdbd", period=20, failures=6),
        "volumeMounts": [
            {"name": "slurm-config", "mountPath": naming.SLURM_ETC, "readOnly": True},
            {"name": "db-password", "mountPath": "/etc/slurm-db", "readOnly": True},
            {"name": "conf", "mountPath": scripts.SLURMDBD_RUN},
            {"name": "run", "mountPath": "/run/slurmdbd"},
            # ArchiveDir's default: slurmdbd refuses to start unless it can write there.
            {"name": "tmp", "mountPath": "/tmp"},
            *auth_mounts(spec),
        ],
    }
    sidecars = auth_sidecars(spec, image)
    volumes: list[Manifest] = [
        slurm_projection(spec, "accounting", auth_key=refs.auth, jwt_key=refs.jwt),
        {
            "name": "db-password",
            "secret": {
                "secretName": refs.db_password.secret,
                "defaultMode": 0o440,
                "items": [{"key": refs.db_password.key, "path": "password"}],
            },
        },
        {"name": "conf", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
        {"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        *auth_volumes(spec, refs.auth),
    ]
    # slurmdbd resolves the uids of the users it records (accounts, associations).
    sssd_hash = with_sssd(spec, image, sidecars, volumes, container["volumeMounts"])
    # Every render: the release that last ran on the database checked and recorded; with
    # slurm.upgradeFrom, before slurmdbd of the new release converts the database, its dump; after
    # a failed conversion, the restore; going back, the check (sunk.dbguard).
    password_mount = next(m for m in container["volumeMounts"] if m["name"] == "db-password")
    sidecars.insert(0, upgrade.db_guard_container(spec, password_mount, scripts.DB_PASSWORD_FILE))
    if upgrade.guarded(spec):
        volumes.append(upgrade.backup_volume(spec, COMPONENT))
        if upgrade.upgrading(spec):
            # slurmdbd's start script marks the conversion's outcome beside the dump.
            container["volumeMounts"].append({"name": upgrade.BACKUP_VOLUME, "mountPath": upgrade.BACKUP_DIR})
    annotations = {keys.CONFIG_HASH: accounting_hash(spec), **({keys.SSSD_HASH: sssd_hash} if sssd_hash else {})}
    pod = {
        "metadata": {"labels": labels(spec, COMPONENT), "annotations": annotations},
        "spec": {
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": slurm_pod_security(),
            "initContainers": sidecars,
            "containers": [container],
            "volumes": volumes,
        },
    }
    settings = spec.accounting
    pod = apply_pod(
        pod, settings, main="slurmdbd", pull_secrets=spec.images.pull_secrets, extra_args=settings.extra_args
    )
    deployment = obj(
        "apps/v1",
        "Deployment",
        object_meta(metadata(spec, name, COMPONENT), settings),
        spec={
            "replicas": 1,
            # Two slurmdbd on one database would both run its upgrades and rollups.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector(spec, COMPONENT)},
            "template": pod,
        },
    )
    service = obj(
        "v1",
        "Service",
        object_meta(metadata(spec, name, COMPONENT), settings),
        spec={
            "selector": selector(spec, COMPONENT),
            "ports": [{"name": "slurmdbd", "port": naming.SLURMDBD_PORT, "targetPort": "slurmdbd", "protocol": "TCP"}],
        },
    )
    return [deployment, service]


def backup_claims(spec: ClusterSpec) -> list[Manifest]:
    """The dump's volume while slurm.upgradeFrom is set (sunk.manifests.upgrade)."""
    if not (spec.accounting.enabled and upgrade.guarded(spec)):
        return []
    db = spec.accounting.mariadb
    return [upgrade.backup_claim(spec, COMPONENT, db.storage_size, db.storage_class)]


def setup_job_name(spec: ClusterSpec, pod: Manifest) -> str:
    """The name carries a hash of what the Job does and of its pod, so a new QOS list or a new pod
    (another release's image, a changed setting) runs a new Job, as a Job's template is immutable
    (kube-apiserver refuses the apply: "field is immutable"), and an unchanged one is left alone."""
    script = slurm_files(spec).get(ACCOUNTING_SETUP, "")
    return naming.accounting_setup_job(spec, content_hash(spec.name, script, pod)[:8])


def setup_job(spec: ClusterSpec, refs: AuthRefs) -> Manifest:
    image = spec.images.accounting.ref
    has_script = ACCOUNTING_SETUP in role_files(spec, "accounting-setup")
    container = {
        "name": "setup",
        "image": image,
        "command": scripts.sh(scripts.accounting_setup()),
        "env": scripts.accounting_setup_env(
            spec.name, f"{naming.SLURM_ETC}/{ACCOUNTING_SETUP}" if has_script else None
        ),
        # SlurmUser is an accounting administrator without further grants.
        "securityContext": read_only(SLURM_UID),
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [{"name": "slurm-config", "mountPath": naming.SLURM_ETC, "readOnly": True}, *auth_mounts(spec)],
    }
    pod = {
        "metadata": {"labels": labels(spec, SETUP_COMPONENT)},
        "spec": {
            "restartPolicy": "OnFailure",
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            "securityContext": slurm_pod_security(),
            "initContainers": auth_sidecars(spec, image),
            "containers": [container],
            "volumes": [
                slurm_projection(spec, "accounting-setup", auth_key=refs.auth),
                *auth_volumes(spec, refs.auth),
            ],
        },
    }
    # The Job runs slurmdbd's image: it is scheduled and pulls as slurmdbd does.
    pod = apply_pod(pod, spec.accounting, main=None, pull_secrets=spec.images.pull_secrets)
    return obj(
        "batch/v1",
        "Job",
        metadata(spec, setup_job_name(spec, pod), SETUP_COMPONENT),
        spec={"backoffLimit": 10, "activeDeadlineSeconds": 3600, "template": pod},
    )


def accounting_manifests(spec: ClusterSpec, refs: AuthRefs) -> list[Manifest]:
    if not spec.accounting.enabled:
        return []
    db = mariadb_manifests(spec) if spec.accounting.external is None else []
    return [*db, *backup_claims(spec), *slurmdbd_manifests(spec, refs), setup_job(spec, refs)]
