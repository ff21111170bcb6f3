"""What a release upgrade (slurm.upgradeFrom) adds to a cluster's pods, and the scripts of its
safety copies (sunk.upgrade's backup and snapshot steps): the accounting database dumped before
slurmdbd moves, StateSaveLocation copied before slurmctld moves, and the two restores. Each is a
shipped script (scripts/) filled with its paths; the real-Slurm drill (runtime/harness/upgrade.py)
runs exactly these."""

from __future__ import annotations

from dataclasses import dataclass

from sunk import dbguard, naming, roles
from sunk.images import RELEASES
from sunk.manifests.meta import SLURM_UID, Manifest, exec_probe, fixed_resources, metadata, obj, read_only
from sunk.manifests.scripts import heartbeat_probe_command, sh
from sunk.render.script import render
from sunk.spec.cluster import ClusterSpec
from sunk.upgrade import BACKUP_TIMEOUT, CONVERT_TIMEOUT

BACKUP_DIR = "/backup"
"""Where the backup volume (a PVC) is mounted: the dumps and the state snapshots."""


@dataclass(frozen=True)
class Database:
    """How the backup reaches the accounting database (slurmdbd.conf's Storage* values)."""

    host: str
    port: int
    name: str
    user: str
    password_file: str


def _db(action: str, db: Database, name: str, directory: str) -> str:
    """accounting-db.sh doing `action`: the dump and the restore share their connection lines."""
    return render(
        "accounting-db.sh",
        ACTION=action,
        HOST=db.host,
        PORT=str(db.port),
        DATABASE=db.name,
        USER=db.user,
        PASSWORD_FILE=db.password_file,
        DIR=directory,
        NAME=name,
    )


def db_backup(db: Database, name: str, directory: str = BACKUP_DIR, *, keep: bool = False) -> str:
    """`<directory>/<name>.sql` and its sha256, renamed into place once complete. `keep`: an
    existing dump of that name is kept, not taken again (the dump before a conversion is never
    replaced by one of the converted database)."""
    return _db("backup-once" if keep else "backup", db, name, directory)


def db_restore(db: Database, name: str, directory: str = BACKUP_DIR) -> str:
    """The database dropped and loaded from the dump, once its checksum matches."""
    return _db("restore", db, name, directory)


def db_schema(db: Database, directory: str = BACKUP_DIR) -> str:
    """accounting-db.sh printing the database's schema as the database guard records it."""
    return _db("schema", db, "-", directory)


def state_snapshot(name: str, directory: str = BACKUP_DIR, state: str = naming.STATE_SAVE) -> str:
    """state-snapshot.sh: `<directory>/<name>/` and `<name>.sha256` (every file's checksum)."""
    return render("state-snapshot.sh", STATE=state, DIR=directory, NAME=name, LOCK=naming.CONTROLLER_LOCK)


def state_restore(name: str, directory: str = BACKUP_DIR, state: str = naming.STATE_SAVE) -> str:
    """state-restore.sh: StateSaveLocation emptied and filled from the snapshot, checksums verified
    before and after."""
    return render("state-restore.sh", STATE=state, DIR=directory, NAME=name, LOCK=naming.CONTROLLER_LOCK)


# -- in the cluster: the copies taken, and the order held, by the pods themselves -----------------
# In every render, slurmdbd's `db-guard` and slurmctld's `state-guard` refuse a release change
# nobody announced (another release ran on the database, or wrote the state files) and record
# what runs; without slurm.upgradeFrom they mount no backup volume and copy nothing, so a first
# deploy and a same-release restart cost a few reads. With slurm.upgradeFrom set, the render adds what makes the upgrade safe whatever applies it
# (`pulumi up`, whose dependencies order the rollouts, or a GitOps `kubectl apply` of the render,
# where every object changes at once): each daemon's pod holds itself until what must come first
# is done, and takes its own copy before it converts anything.
#   slurmdbd's pod    `db-guard`: dumps the database (accounting-db.sh, once) before slurmdbd of
#                     the new release starts and converts it, and restores the dump when that
#                     conversion fails (sunk.dbguard; slurmdbd's start script marks the outcome).
#                     A native sidecar of that pod, not a separate Job: the dump then precedes the
#                     conversion by construction, the restore follows a failure while slurmdbd
#                     is held, and the backup volume (ReadWriteOnce) has one user, so no two pods
#                     on different Nodes wait for each other's volume.
#   slurmctld's pod   `wait-slurmdbd`: until slurmdbd answers at the new release (its conversion
#                     done); `state-guard`: the state snapshot before the conversion, or the
#                     restore when the stack goes back (state-guard.sh).
#   login's pod       `wait-slurmctld`: until slurmctld answers at the new release; the old login
#                     pod serves meanwhile (the Deployment keeps it until the new one is ready).
#   slurmd pods       the operator's rolling update: each is drained and replaced once it runs no
#                     job, nothing is deleted while Slurm can't be read (slurmctld waiting),
#                     and none is replaced while Slurm answers at an older release.
BACKUP_VOLUME = "backup"
WAIT_PERIOD = 5
"""Seconds between the wait containers' asks (each ask is one Slurm RPC)."""


def upgrading(spec: ClusterSpec) -> bool:
    """A move to another release is under way: the waits and the copies before each conversion."""
    return spec.slurm.upgrade_from not in (None, spec.slurm.version)


def guarded(spec: ClusterSpec) -> bool:
    """slurm.upgradeFrom is set (also once equal to slurm.version, as when going back): the backup
    volumes and slurmctld's state guard stay in the render."""
    return spec.slurm.upgrade_from is not None


def backup_claim_name(spec: ClusterSpec, component: str) -> str:
    """`<cluster>-accounting-backup-<upgradeFrom>` (the dump) or `<cluster>-controller-backup-<upgradeFrom>`
    (the snapshot). One volume per release moved from: a later upgrade gets a new one, beside the
    copies of the earlier ones (kept in the cluster; Pulumi forgets a retained claim, and would
    meet the old one if the name came back)."""
    return naming.backup_claim(spec.name, component, spec.slurm.upgrade_from or "")


def backup_claim(
    spec: ClusterSpec, component: str, size: str, storage_class: str | None, access_mode: str = "ReadWriteOnce"
) -> Manifest:
    """The backup volume of one daemon: sized as the volume it copies, in its StorageClass;
    ReadWriteMany where every controller pod mounts it (controller.replicas 2-3)."""
    claim: Manifest = {"accessModes": [access_mode], "resources": {"requests": {"storage": size}}}
    if storage_class:
        claim["storageClassName"] = storage_class
    return obj("v1", "PersistentVolumeClaim", metadata(spec, backup_claim_name(spec, component), component), spec=claim)


def backup_volume(spec: ClusterSpec, component: str) -> Manifest:
    return {"name": BACKUP_VOLUME, "persistentVolumeClaim": {"claimName": backup_claim_name(spec, component)}}


def database(spec: ClusterSpec, password_file: str) -> Database:
    """The accounting database as slurmdbd.conf's Storage* lines name it."""
    ext = spec.accounting.external
    if ext is not None:
        return Database(ext.host, ext.port, ext.database, ext.user, password_file)
    return Database(naming.mariadb(spec), roles.MARIADB_PORT, "slurm_acct_db", "slurm", password_file)


def dump_name(spec: ClusterSpec) -> str:
    """`<database>-<the release it was dumped on>`."""
    return naming.database_dump(database(spec, "").name, spec.slurm.upgrade_from or "")


def snapshot_name(release: str) -> str:
    return naming.state_snapshot(release)


GUARD_SCRATCH = "/tmp/db-guard"
"""The database guard's folder without slurm.upgradeFrom: in the pod's scratch space, so it holds no
dump and no marker (the guard then only checks and records the release)."""
DB_GUARD_PERIOD = 10
"""Seconds between the database guard's looks after slurmdbd started (two small queries each)."""
DB_GUARD_READY = "/tmp/db-guard.ready"
"""Written once the guard's start phase passed: its startup probe, which holds slurmdbd."""
DB_GUARD_ALIVE = "/tmp/db-guard.alive"
"""Touched before each look of the watch: its liveness probe. A look may restore the dump, which
takes as long as a conversion may (CONVERT_TIMEOUT), so only a guard silent longer is restarted."""


def db_guard(
    spec: ClusterSpec,
    password_file: str,
    mode: str = "sidecar",
    directory: str | None = None,
    db: Database | None = None,
    ready: str = DB_GUARD_READY,
    alive: str = DB_GUARD_ALIVE,
) -> str:
    """db-guard.sh for spec's release and slurm.upgradeFrom, its tables filled from sunk.dbguard.plan.
    `mode`: start, watch (each once) or sidecar (start, then watch for as long as the pod runs).
    `db`: the database where it is not the stack's own (the harness's); `ready`: the file its
    startup probe waits for (in the pod's emptyDir, so a restarted sidecar finds it). `directory`:
    by default the backup volume while slurm.upgradeFrom is set, else scratch space (GUARD_SCRATCH)."""
    directory = directory or (BACKUP_DIR if guarded(spec) else GUARD_SCRATCH)
    source = spec.slurm.upgrade_from or spec.slurm.version
    release = spec.slurm.version
    start_table, start_messages = dbguard.table("start", source=source, release=release)
    watch_table, watch_messages = dbguard.table("watch", source=source, release=release)
    db = db or database(spec, password_file)
    name = naming.database_dump(db.name, source)
    return render(
        "db-guard.sh",
        MODE=mode,
        DIR=directory,
        NAME=name,
        RELEASE=release,
        SOURCE=source,
        PROTOCOLS=_protocols(),
        PERIOD=str(DB_GUARD_PERIOD),
        READY=ready,
        ALIVE=alive,
        START_TABLE=start_table,
        START_MESSAGES=start_messages,
        WATCH_TABLE=watch_table,
        WATCH_MESSAGES=watch_messages,
        DB=_db("argument", db, name, directory),
    )


def _protocols() -> str:
    """`<protocol>=<release>` of every release sunk supports, as the guards read them."""
    return " ".join(f"{r.protocol}={r.version}" for r in RELEASES.values())


def db_guard_container(spec: ClusterSpec, password_mount: Manifest, password_file: str) -> Manifest:
    """slurmdbd's `db-guard` (mariadb image), a native sidecar in every render: the release check
    and record; with slurm.upgradeFrom, the dump before slurmdbd of the new release starts, then
    the restore if its conversion fails (sunk.dbguard)."""
    backup = [{"name": BACKUP_VOLUME, "mountPath": BACKUP_DIR}] if guarded(spec) else []
    return {
        "name": "db-guard",
        "image": spec.images.mariadb.ref,
        "restartPolicy": "Always",
        "command": sh(db_guard(spec, password_file)),
        "securityContext": read_only(SLURM_UID),
        # mariadb-dump and mariadb stream rows; a large table's rows pass through them, not their memory.
        "resources": fixed_resources("50m", "64Mi", "512Mi"),
        # Held as long as the upgrade plan gives the dump (the start phase takes it).
        "startupProbe": exec_probe(["test", "-e", DB_GUARD_READY], period=2, failures=BACKUP_TIMEOUT // 2),
        "livenessProbe": exec_probe(heartbeat_probe_command(DB_GUARD_ALIVE, CONVERT_TIMEOUT), period=60),
        # A refusal's reason in the pod's status (kubectl describe), not only in its log.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [password_mount, *backup, {"name": "tmp", "mountPath": "/tmp"}],
    }


def slurmdbd_guard(spec: ClusterSpec, directory: str = BACKUP_DIR) -> str:
    """Where slurmdbd's start script marks how the conversion went (slurmdbd_start's `guard`):
    the dump's path without `.sql` while slurmdbd converts, else nothing."""
    return f"{directory}/{dump_name(spec)}" if upgrading(spec) else ""


def controller_peers(spec: ClusterSpec) -> list[str]:
    """`address:port` of every SlurmctldHost, which the state guards of a controller with backups
    wait on before they copy or restore (none answering: every old controller pod deleted), and
    whose turns they take; none with one controller, or without slurm.upgradeFrom (nothing is
    then written, and the backup volume that holds the turns is not mounted)."""
    if not (spec.controller.ha and guarded(spec)):
        return []
    return [f"{naming.controller_fqdn(spec, i)}:{naming.SLURMCTLD_PORT}" for i in range(spec.controller.replicas)]


def state_guard(
    spec: ClusterSpec,
    directory: str = BACKUP_DIR,
    state: str = naming.STATE_SAVE,
    peers: list[str] | None = None,
) -> str:
    """state-guard.sh for spec's release and slurm.upgradeFrom: the snapshot before a conversion,
    the restore when going back (unless it would lose jobs: slurm.acceptJobLoss), the refusal of
    a change nobody announced. `peers`: the controllers' addresses where they are not the
    stack's own (the harness's; by default controller_peers)."""
    source = spec.slurm.upgrade_from or spec.slurm.version
    release = spec.slurm.version
    return render(
        "state-guard.sh",
        STATE=state,
        DIR=directory,
        LOCK=f"{state}/{naming.CONTROLLER_LOCK}",
        RELEASE=release,
        SOURCE=source,
        ANNOUNCED=spec.slurm.upgrade_from or "",
        ACCEPT_LOSS="yes" if spec.slurm.accept_job_loss else "no",
        PROTOCOLS=_protocols(),
        PEERS=" ".join(controller_peers(spec) if peers is None else peers),
        SNAPSHOT=state_snapshot(snapshot_name(source), directory, state),
        RESTORE=state_restore(snapshot_name(release), directory, state),
    )


def state_guard_container(spec: ClusterSpec, image: str) -> Manifest:
    """slurmctld's `state-guard` init container, in every render; the backup volume with
    slurm.upgradeFrom only."""
    backup = [{"name": BACKUP_VOLUME, "mountPath": BACKUP_DIR}] if guarded(spec) else []
    return {
        "name": "state-guard",
        "image": image,
        "command": sh(state_guard(spec)),
        "securityContext": read_only(SLURM_UID),
        "resources": fixed_resources("50m", "32Mi", "128Mi"),
        # A refusal's reason in the pod's status (kubectl describe), not only in its log.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"name": "state", "mountPath": naming.STATE_SAVE}, *backup],
    }


def wait_release(daemon: str, release: str, period: float = WAIT_PERIOD) -> str:
    """wait-release.sh: until `daemon` answers at `release`."""
    return render("wait-release.sh", DAEMON=daemon, RELEASE=release, PERIOD=f"{period:g}")


def wait_release_container(spec: ClusterSpec, daemon: str, image: str, mounts: list[Manifest]) -> Manifest:
    """`wait-<daemon>`: an init container holding its pod until `daemon` (slurmdbd or slurmctld)
    answers at spec's release (wait-release.sh). `mounts`: the Slurm files and the auth socket."""
    return {
        "name": f"wait-{daemon}",
        "image": image,
        "command": sh(render("wait-release.sh", DAEMON=daemon, RELEASE=spec.slurm.version, PERIOD=str(WAIT_PERIOD))),
        "securityContext": read_only(SLURM_UID),
        "resources": fixed_resources("10m", "16Mi", "64Mi"),
        "volumeMounts": mounts,
    }
