"""sunk.upgrade's plan executed on a harness cluster: each role's root moved to the next
release's image, in the plan's order, each step held until its gate passes.

What stands in for what: a role's root keeps its upper layer when its image changes
(Jail.replace_lower), as a pod replaced by one of a new image keeps its volumes (StateSaveLocation,
MariaDB's data); a folder under the work folder stands in for the backup volume; the new
release's slurmd run in a second slurmd root beside the old one, as new pods beside old ones. The
backup, snapshot and restore are the shipped scripts (sunk/manifests/upgrade.py), run in the root
of the image their Job uses (mariadb for the database, slurmctld for the state).

`faults` injects the two failures the rollbacks exist for; the steps after a failed gate never
run (UpgradeStopped says which failed and what was rolled back).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from sunk import naming
from sunk.images import SLURM_UID, release_of
from sunk.manifests import upgrade as scripts
from sunk.manifests.accounting import MARIADB_SOCKET
from sunk.manifests.scripts import SLURMDBD_RUN, slurmdbd_start
from sunk.render import render_slurm_files
from sunk.spec.cluster import ClusterSpec
from sunk.upgrade import DRAIN_REASON, UpgradePlan, upgrade_plan

from ..images.build import Builder
from . import daemons
from .layout import SLURM_ROLES, SimNode, prepare_role, write_slurm_files
from .local import LocalSlurm
from .overrides import LOOPBACK, backup_address, directive, local_files
from .ports import wait_until

FAULTS = ("slurmdbd", "slurmctld")
"""Failures a drill can inject: slurmdbd's schema conversion fails (its database user may not
ALTER tables), or slurmctld crashes on the new release after it has rewritten its state files."""


@dataclass
class Event:
    step: str
    what: str
    waited_for: str
    seconds: float


@dataclass
class Timeline:
    events: list[Event] = field(default_factory=list)

    def add(self, step: str, what: str, waited_for: str, seconds: float) -> None:
        self.events.append(Event(step, what, waited_for, seconds))

    def text(self) -> str:
        width = max((len(e.what) for e in self.events), default=10)
        lines = [f"{'step':<10} {'what':<{width}} {'s':>6}  waited for"]
        lines += [f"{e.step:<10} {e.what:<{width}} {e.seconds:6.1f}  {e.waited_for}" for e in self.events]
        lines.append(f"{'total':<10} {'':<{width}} {sum(e.seconds for e in self.events):6.1f}")
        return "\n".join(lines)


def target_images(release: str, roles: Iterable[str]) -> dict[str, Path]:
    """The release's unpacked image per role (built first where the cache lacks one)."""
    builder = Builder(release=release)
    return {role: builder.rootfs(role) for role in roles}


class UpgradeStopped(RuntimeError):
    """A gate failed: the step named, and what its rollback restored."""

    def __init__(self, step: str, reason: str, rolled_back: str, log: str = "") -> None:
        self.step, self.reason, self.rolled_back = step, reason, rolled_back
        self.log = log
        """The failed daemon's last log lines."""
        super().__init__(f"upgrade stopped at {step}: {reason}; rolled back: {rolled_back}")


SLURMDBD_VERSION = ["env", f"SLURM_CONF={SLURMDBD_RUN}/slurm.conf", "slurmdbd", "-V"]
"""slurmdbd reads slurmdbd.conf even for -V, and refuses the shared one (no password, mode 0644):
the start script's private copy."""


class Upgrade:
    """`Upgrade(slurm, "26.05").run()` on a cluster booted on an older release."""

    def __init__(
        self,
        slurm: LocalSlurm,
        target: str,
        *,
        faults: tuple[str, ...] = (),
        gate_timeout: float = 60,
        images: Mapping[str, Path] | None = None,
    ) -> None:
        """`images`: the target release's unpacked image per role, where the caller has them
        already (target_images); by default they are looked up (and built if missing) here."""
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}")
        self.slurm = slurm
        self.source = slurm.spec.slurm.version
        data = slurm.spec.model_dump(by_alias=True, exclude_unset=True)
        # The stack of the upgrade (slurm.upgradeFrom set), and of going back (the old release,
        # upgradeFrom equal to it): what slurmctld's state guard reads in each pod.
        self.target_spec = ClusterSpec.model_validate(
            {**data, "slurm": {"version": target, "upgradeFrom": self.source}}
        )
        self.back_spec = ClusterSpec.model_validate(
            {**data, "slurm": {"version": self.source, "upgradeFrom": self.source}}
        )
        self.plan: UpgradePlan = upgrade_plan(self.target_spec, self.source)
        self.faults = set(faults)
        self.gate_timeout = gate_timeout
        """Seconds each gate waits here (the plan's own timeouts are sized for real clusters)."""
        # The new images pulled before the upgrade starts (as nodes pull them before a rollout),
        # so no step's time is an image build or unpack.
        self.images = dict(images) if images is not None else target_images(target, slurm.roles)
        self.images_before = dict(slurm.jail.lowers)
        self.timeline = Timeline()
        self.backup = slurm.jail.workdir / "shared" / "backup"
        self.backup.mkdir(parents=True, exist_ok=True)
        # slurmdbd's start script, run as the slurm user, marks the conversion's outcome there
        # (a pod's fsGroup makes the volume writable to it).
        os.chmod(self.backup, 0o777)
        self.done: list[str] = []
        self.new_slurmd = f"slurmd-{target}"
        self.restored = False
        """With the slurmctld fault: StateSaveLocation matched the snapshot after the restore."""
        self.guard_log = ""
        """With the slurmctld fault: what the old release's state guard said when it restored."""
        self.db_guard: dict[str, str] = {}
        """With the slurmdbd fault: what each look of the database guard said, and slurmdbd's
        start script after the failure ("failed": its mark, "restore": the sidecar's restore,
        "refused": slurmdbd started again, "new pod": the guard of a new pod on the new release,
        "back": the guard of the old release's pod, "schema before"/"schema after": the schema
        recorded before the dump and the one 24.11 runs on)."""
        self.rewritten: list[str] = []
        """With the slurmctld fault: the state files the crashed start had rewritten."""
        self.guard_logs: dict[str, str] = {}
        """What each controller pod's state guard said, by the pod it stands for ("0", "1": with
        backups, pod 0's guard copies while the old backups are still being stopped, pod 1's
        follows it; "back": the old release's guard in the rollback)."""
        self.hooks: dict[str, Callable[[], None]] = {}
        """Step name -> called after that step's gate passed; "node replaced": after the first
        slurmd is replaced (the drill lets its running job end there, in the mixed window)."""

    @property
    def target(self) -> str:
        return self.target_spec.slurm.version

    # -- running -------------------------------------------------------------------------
    def run(self) -> Timeline:
        for step in self.plan.steps:
            getattr(self, f"_{step.name}")()
            self.done.append(step.name)
            hook = self.hooks.get(step.name)
            if hook is not None:
                hook()
        return self.timeline

    def _timed(self, step: str, what: str, waited_for: str, action: Callable[[], object]) -> None:
        started = time.monotonic()
        try:
            action()
        finally:
            self.timeline.add(step, what, waited_for, time.monotonic() - started)

    def _in(self, role: str, script: str, timeout: float = 120) -> str:
        done = self.slurm.jail.run(["/bin/sh", "-c", script], role=role, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"script in {role} failed ({done.returncode}): {done.stdout}{done.stderr}")
        return done.stdout

    def _bind_backup(self, role: str) -> None:
        """The backup volume mounted in the role's root (the Job's pod mounts the PVC)."""
        if not (self.slurm.role_root(role) / scripts.BACKUP_DIR.lstrip("/")).is_mount():
            self.slurm.jail.bind(role, self.backup, scripts.BACKUP_DIR)

    def _move_root(self, role: str, daemon_names: list[str]) -> None:
        """Stop the role's processes, put its root on the target's image, prepare it as a new pod
        (keys, folders) and start its munged again."""
        jail = self.slurm.jail
        for name in [*daemon_names, f"munged-{role}"]:
            jail.stop(name, timeout=30)
        jail.replace_lower(role, self.images[role])
        self._new_pod_folders(role)
        prepare_role(jail.root(role), role, host=self.slurm.host, munge_key=self._munge_key())
        self._backup_names(role)
        if role in SLURM_ROLES and self.slurm.spec.auth.type == "munge":
            daemons.start_munged(jail, role)

    def _backup_names(self, root: str) -> None:
        """The backups' pod names resolve in a root prepared afresh (as the headless Service's
        names do in a new pod): every client walks the SlurmctldHost list."""
        hosts = self.slurm.jail.root(root) / "etc/hosts"
        lines = [f"{backup_address(i)} {self.slurm.controller_hosts[i]}" for i in self.backups]
        text = hosts.read_text() if hosts.exists() else ""
        missing = [line for line in lines if line not in text.splitlines()]
        if missing:
            hosts.write_text(text + "".join(f"{line}\n" for line in missing))

    def _new_pod_folders(self, role: str) -> None:
        """A new pod's emptyDir folders are empty: slurmctld's /run/slurmctld (a primary that
        stopped left its standby mark there, SlurmctldPrimaryOffProg, which the next primary would
        read as a takeover and ask for a reconfigure)."""
        if role == "slurmctld":
            run = self.slurm.role_root(role) / "run/slurmctld"
            for path in run.glob("*"):
                if path.is_file() or path.is_symlink():
                    path.unlink()

    def _munge_key(self) -> bytes | None:
        if self.slurm.spec.auth.type != "munge":
            return None
        return (self.slurm.role_root("login") / "etc/munge/munge.key").read_bytes()

    # -- the database --------------------------------------------------------------------
    def database(self) -> scripts.Database:
        conf = self.slurm.files["slurmdbd.conf"]
        return scripts.Database(
            host=directive(conf, "StorageHost") or "127.0.0.1",
            port=int(directive(conf, "StoragePort") or 3306),
            name=directive(conf, "StorageLoc") or "slurm_acct_db",
            user=directive(conf, "StorageUser") or "slurm",
            password_file=self._db_password_file(),
        )

    def _db_password_file(self) -> str:
        """The database password where the backup Job's pod mounts its Secret (in the mariadb
        root here, a copy of slurmdbd's)."""
        target = "/etc/slurm-db-backup/password"
        source = self.slurm.role_root("slurmdbd") / "etc/slurm-db/password"
        path = self.slurm.role_root("mariadb") / target.lstrip("/")
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(source.read_bytes())
            path.chmod(0o400)
        return target

    @property
    def dump_name(self) -> str:
        return naming.database_dump(self.database().name, self.source)

    def _guard(self, spec: ClusterSpec, mode: str) -> str:
        """db-guard.sh as slurmdbd's pod for `spec` runs it (sunk.dbguard), `mode` start or watch."""
        return scripts.db_guard(spec, "", mode, db=self.database())

    def _backup(self) -> None:
        # The database guard of slurmdbd's new pod, before slurmdbd starts: the schema recorded
        # and the dump taken (once).
        self._bind_backup("mariadb")
        script = self._guard(self.target_spec, "start")
        self._timed(
            "backup",
            "db-guard: schema recorded, mariadb-dump",
            "mariadb-dump",
            lambda: self._in("mariadb", script),
        )

    def schema(self) -> str:
        """The accounting database's schema, as the database guard records it."""
        return self._in("mariadb", scripts.db_schema(self.database())).strip()

    def _slurmdbd(self) -> None:
        jail = self.slurm.jail
        password = (self.slurm.role_root("slurmdbd") / "etc/slurm-db/password").read_text()
        self._timed("slurmdbd", f"slurmdbd {self.source} stopped", "slurmdbd exit", lambda: jail.stop("slurmdbd", 30))
        if "slurmdbd" in self.faults:
            self._grant("REVOKE ALTER")
        self._timed(
            "slurmdbd",
            f"root on the {self.target} image",
            "munged",
            lambda: self._move_root("slurmdbd", []),
        )
        self._bind_backup("slurmdbd")
        try:
            self._timed(
                "slurmdbd",
                f"slurmdbd {self.target} converts the schema",
                "slurmdbd listening, sacctmgr answers",
                lambda: self._start_slurmdbd(password),
            )
        except (RuntimeError, TimeoutError) as failed:
            log = self.slurm.log("slurmdbd", 40)
            self.slurm.jail.stop("slurmdbd", 30)
            self._guard_after_failure()
            self._timed(
                "slurmdbd",
                f"stack set back: slurmdbd {self.source} on the restored database",
                "db-guard, slurmdbd listening",
                lambda: self._back_slurmdbd(password),
            )
            raise UpgradeStopped(
                "slurmdbd",
                str(failed).splitlines()[0],
                f"database restored from {self.dump_name}.sql by the db-guard; slurmdbd {self.source} runs",
                log,
            ) from failed

    def _start_slurmdbd(self, password: str) -> None:
        daemons.start_slurmdbd(
            self.slurm.jail,
            self.slurm.ports.slurmdbd,
            password,
            timeout=self.gate_timeout,
            script=self._slurmdbd_script(self.target_spec),
        )
        self._gate_version("slurmdbd", SLURMDBD_VERSION)
        wait_until(
            "sacctmgr through slurmdbd",
            lambda: self.slurm.run("sacctmgr", "-n", "show", "cluster", "format=cluster").returncode == 0,
            timeout=self.gate_timeout,
            interval=0.2,
        )

    def _guard_after_failure(self) -> None:
        """What slurmdbd's pod does by itself after the conversion failed, the cause still in
        place: the start script has marked the failure; the db-guard sidecar's next look restores
        the dump; slurmdbd started again by the kubelet refuses, and so does the guard of any new
        pod on the new release."""
        jail = self.slurm.jail
        failed = self.backup / f"{self.dump_name}.failed"
        self.db_guard["failed"] = failed.read_text() if failed.exists() else ""

        def restore() -> None:
            self.db_guard["restore"] = self._in("mariadb", self._guard(self.target_spec, "watch"))

        self._timed("slurmdbd", "db-guard restores the dump", "its next look (10 s in a pod)", restore)

        def refused() -> None:
            again = jail.run(
                ["/bin/sh", "-c", self._slurmdbd_script(self.target_spec)],
                role="slurmdbd",
                user=f"{SLURM_UID}:{SLURM_UID}",
                timeout=60,
            )
            self.db_guard["refused"] = f"exit {again.returncode}: {again.stdout}{again.stderr}"
            new_pod = jail.run(["/bin/sh", "-c", self._guard(self.target_spec, "start")], role="mariadb", timeout=120)
            self.db_guard["new pod"] = f"exit {new_pod.returncode}: {new_pod.stdout}{new_pod.stderr}"

        self._timed("slurmdbd", f"slurmdbd {self.target} started again: refused", "start script, db-guard", refused)

    def _back_slurmdbd(self, password: str) -> None:
        """The operator's answer to the refusal: the cause fixed and slurm.version set back. The
        old release's pod: its guard sets the dump and the marks aside, slurmdbd starts."""
        jail = self.slurm.jail
        if "slurmdbd" in self.faults:
            self._grant("GRANT ALTER")
        self.db_guard["schema before"] = (self.backup / f"{self.dump_name}.schema").read_text().strip()
        jail.stop("munged-slurmdbd")
        jail.replace_lower("slurmdbd", self.images_before["slurmdbd"])
        prepare_role(jail.root("slurmdbd"), "slurmdbd", host=self.slurm.host, munge_key=self._munge_key())
        self.db_guard["back"] = self._in("mariadb", self._guard(self.back_spec, "start"))
        self.db_guard["schema after"] = self.schema()
        daemons.start_munged(jail, "slurmdbd")
        daemons.start_slurmdbd(jail, self.slurm.ports.slurmdbd, password, script=self._slurmdbd_script(self.back_spec))

    def _slurmdbd_script(self, spec: ClusterSpec) -> str:
        """slurmdbd's start script as the pod for `spec` has it: while it converts, marking the
        outcome beside the dump."""
        converting = spec.slurm.version != spec.slurm.upgrade_from
        guard = f"{scripts.BACKUP_DIR}/{self.dump_name}" if converting else ""
        return slurmdbd_start(guard=guard, release=spec.slurm.version)

    def _grant(self, verb: str) -> None:
        """GRANT or REVOKE ALTER on the accounting database for slurmdbd's user, as MariaDB's root
        (its password where the StatefulSet mounts its Secret)."""
        db = self.database()
        root = self.slurm.role_root("mariadb")
        password = (root / daemons.mariadb_env(self.slurm.spec)["MARIADB_ROOT_PASSWORD_FILE"].lstrip("/")).read_text()
        to = "TO" if verb == "GRANT ALTER" else "FROM"
        sql = f"{verb} ON `{db.name}`.* {to} '{db.user}'@'%'; FLUSH PRIVILEGES;"
        client = "[client]\nuser=root\npassword=" + password + "\n"
        cnf = root / "tmp-grant.cnf"
        cnf.write_text(client)
        cnf.chmod(0o600)
        try:
            argv = ["mariadb", "--defaults-extra-file=/tmp-grant.cnf", f"--socket={MARIADB_SOCKET}", "-e", sql]
            done = self.slurm.jail.run(argv, role="mariadb", timeout=60)
        finally:
            cnf.unlink()
        if done.returncode != 0:
            raise RuntimeError(f"{sql}: {done.stdout}{done.stderr}")

    # -- the controller ------------------------------------------------------------------
    @property
    def snapshot_name(self) -> str:
        return naming.state_snapshot(self.source)

    @property
    def backups(self) -> list[int]:
        """The backup controllers' indexes (controller.replicas 2-3), none with one slurmctld."""
        return list(range(1, len(self.slurm.controller_hosts)))

    def peers(self) -> list[str]:
        """Every slurmctld's address:port here (the guards' peers: SlurmctldHost names in a cluster)."""
        port = self.slurm.ports.slurmctld
        return [f"{LOOPBACK}:{port}", *(f"{backup_address(i)}:{port}" for i in self.backups)]

    def _state_guard(self, spec: ClusterSpec) -> str:
        return scripts.state_guard(spec, peers=self.peers())

    def _snapshot(self) -> None:
        jail = self.slurm.jail
        self.jobs_before = self.job_ids()
        self.nodes_before = sorted(self.slurm.node_ports)
        self._timed(
            "snapshot",
            f"slurmctld {self.source} stopped (saves state)",
            "slurmctld exit",
            lambda: jail.stop("slurmctld", 60),
        )
        self._bind_backup("slurmctld")
        # The state guard slurmctld's pod of the new release runs first (sunk.manifests.upgrade):
        # it finds state of the source release and copies it (state-snapshot.sh). With backups
        # it starts as pod 0's would, once pod 0 alone is deleted: the backups still run (the
        # StatefulSet is OnDelete, deleted one by one), and it must not copy until they stop.
        script = self._state_guard(self.target_spec)
        if not self.backups:
            self._timed(
                "snapshot", "StateSaveLocation copied, sha256", "cp + sha256sum", lambda: self._record("0", script)
            )
            return
        guard = threading.Thread(target=self._record, args=("0", script))
        started = time.monotonic()
        guard.start()
        time.sleep(self.peer_delay)
        self.copied_while_a_peer_ran = (self.backup / f"{self.snapshot_name}.sha256").exists()
        for index in self.backups:
            self._timed(
                "snapshot",
                f"{self.slurm.controller_process(index)} {self.source} stopped",
                "slurmctld exit",
                partial(jail.stop, self.slurm.controller_process(index), 60),
            )
        guard.join(self.gate_timeout)
        if guard.is_alive() or "0" not in self.guard_logs:
            raise RuntimeError(f"pod 0's state guard did not finish: {self.guard_logs}")
        self.timeline.add(
            "snapshot",
            "pod 0's state guard: waited, then copied",
            "every slurmctld stopped",
            time.monotonic() - started,
        )
        # Pod 1's guard takes its turn after pod 0's: it finds the copy and writes nothing.
        self._timed("snapshot", "pod 1's state guard", "its turn", lambda: self._record("1", script))

    peer_delay: float = 5
    """With backups: seconds pod 0's state guard runs while the old backups still answer."""
    copied_while_a_peer_ran: bool = False
    """With backups: a snapshot existed before the old backups were stopped (the hazard)."""

    def _record(self, pod: str, script: str) -> None:
        self.guard_logs[pod] = self._in("slurmctld", script, timeout=self.gate_timeout)

    def job_ids(self) -> set[str]:
        out = self.slurm.run("squeue", "-h", "-a", "-r", "-o", "%i", check=True).stdout
        return set(out.split())

    def _slurmctld(self) -> None:
        self._timed("slurmctld", f"root on the {self.target} image", "munged", lambda: self._move_root("slurmctld", []))
        self._write_target_files()
        try:
            self._timed(
                "slurmctld",
                f"slurmctld {self.target} from the state files",
                "ping UP, every job and node known",
                self._start_slurmctld,
            )
        except (RuntimeError, TimeoutError) as failed:
            log = self.slurm.log("slurmctld", 40)
            self._timed("slurmctld", "rollback", "state restore", self._rollback_slurmctld)
            raise UpgradeStopped(
                "slurmctld",
                str(failed).splitlines()[0],
                f"StateSaveLocation restored from {self.snapshot_name}; slurmctld {self.source} runs",
                log,
            ) from failed

    def _write_target_files(self) -> None:
        """The target release's rendered files into the shared /etc/slurm (the ConfigMaps a
        stack change rewrites). slurmd already running keep their own copies."""
        self._write_files(self.target_spec)

    def _write_files(self, spec: ClusterSpec) -> None:
        """`spec`'s Slurm files, localized for the harness, into the shared /etc/slurm."""
        files = local_files(
            render_slurm_files(spec, []),
            host=self.slurm.host,
            ports=self.slurm.ports,
            accounting=self.slurm.accounting,
            exists=lambda path: (self.slurm.role_root("slurmd") / path.lstrip("/")).exists(),
            node_ports=self.slurm.node_ports,
        )
        write_slurm_files(self.slurm.etc, files)
        self.slurm.files = files

    def _start_slurmctld(self) -> None:
        jail = self.slurm.jail
        if "slurmctld" in self.faults:
            self._crash_after_conversion()
        daemons.start_slurmctld(jail, self.slurm.ports.slurmctld)
        for index in self.backups:
            self.slurm.start_backup(index)
        self._gate_version("slurmctld", ["slurmctld", "-V"])
        missing = self.jobs_before - self.job_ids()
        if missing:
            raise RuntimeError(f"slurmctld {self.target} lost jobs {sorted(missing)}")
        daemons.wait_nodes_idle(jail, [n.name for n in self.slurm.nodes], allow_busy=True, timeout=self.gate_timeout)

    def _crash_after_conversion(self) -> None:
        """The injected failure: slurmctld on the new release starts from the state files and
        rewrites some of them in its own format, then dies (SIGABRT, as a crash would) before its
        gate passes."""
        jail = self.slurm.jail
        proc = jail.spawn("slurmctld", ["slurmctld", "-D"], role="slurmctld")
        wait_until(
            "slurmctld rewrites a state file",
            lambda: bool(self.state_changes()),
            timeout=self.gate_timeout,
            alive=proc,
            interval=0.2,
        )
        proc.send_signal(signal.SIGABRT)  # slurmctld saves all its state on the way out
        proc.wait(30)
        jail.stop("slurmctld")
        self.rewritten = self.state_changes()
        raise RuntimeError(f"slurmctld {self.target} exited with {proc.returncode} (injected crash)")

    def state_changes(self, manifest: Path | None = None) -> list[str]:
        """Files of StateSaveLocation that differ from the snapshot (changed, new or gone), by
        the snapshot's checksums (`manifest`: those of a snapshot set aside). The controllers' lock,
        which the state guard creates and the snapshot leaves out, is not state."""
        manifest = manifest or self.backup / f"{self.snapshot_name}.sha256"
        recorded: dict[str, str] = {}
        for line in manifest.read_text().splitlines():
            digest, _, path = line.partition("  ")
            recorded[path] = digest
        state = self.slurm.role_root("slurmctld") / naming.STATE_SAVE.lstrip("/")
        now = {
            f"./{path.relative_to(state)}": hashlib.sha256(path.read_bytes()).hexdigest()
            for path in state.rglob("*")
            if path.is_file() and path.name != naming.CONTROLLER_LOCK
        }
        return sorted(p for p in recorded.keys() | now.keys() if recorded.get(p) != now.get(p))

    def _replace_lower_when_free(self, role: str, lower: Path) -> None:
        """replace_lower once the root's mount is free: a crashed slurmctld's helpers (slurmscriptd,
        a primary mark's background reconfigure) may outlive it for a moment, as in a container
        whose PID 1 died."""
        deadline = time.monotonic() + 30
        while True:
            try:
                self.slurm.jail.replace_lower(role, lower)
                return
            except RuntimeError as busy:
                if "target is busy" not in str(busy):
                    raise
                if time.monotonic() > deadline:
                    ps = subprocess.run(["ps", "-eo", "pid,ppid,etimes,args"], capture_output=True, text=True)
                    left = [line for line in ps.stdout.splitlines() if "slurm" in line or "scontrol" in line]
                    raise RuntimeError(f"{busy}; still running:\n" + "\n".join(left)) from busy
                time.sleep(0.5)

    def _rollback_slurmctld(self) -> None:
        jail = self.slurm.jail
        for index in [0, *self.backups]:
            jail.stop(self.slurm.controller_process(index), 30)
        jail.stop("munged-slurmctld")
        self._replace_lower_when_free("slurmctld", self.images_before["slurmctld"])
        self._new_pod_folders("slurmctld")
        prepare_role(jail.root("slurmctld"), "slurmctld", host=self.slurm.host, munge_key=self._munge_key())
        self._backup_names("slurmctld")
        # The old release's pod (the stack set back to it): its state guard finds state the new
        # release wrote, restores the snapshot (state-restore.sh) and sets the snapshot aside.
        self._bind_backup("slurmctld")
        self.guard_log = self._in("slurmctld", self._state_guard(self.back_spec))
        self.guard_logs["back"] = self.guard_log
        [aside] = sorted(self.backup.glob(f"{self.snapshot_name}.restored-*.sha256"))[-1:]
        self.restored = not self.state_changes(aside)
        daemons.start_munged(jail, "slurmctld")
        self._write_files(self.slurm.spec)
        daemons.start_slurmctld(jail, self.slurm.ports.slurmctld)
        for index in self.backups:
            self.slurm.start_backup(index)
        daemons.wait_nodes_idle(jail, [n.name for n in self.slurm.nodes], allow_busy=True, timeout=self.gate_timeout)

    # -- the nodes -----------------------------------------------------------------------
    def _slurmd(self) -> None:
        slurm, jail = self.slurm, self.slurm.jail
        names = [n.name for n in slurm.nodes]
        reason = f"{DRAIN_REASON}: to Slurm {self.target}"
        self._timed(
            "slurmd",
            f"drain {','.join(names)}",
            "scontrol update",
            lambda: slurm.run(
                "scontrol", "update", f"nodename={','.join(names)}", "state=drain", f"reason={reason}", check=True
            ),
        )
        self._timed("slurmd", f"{self.new_slurmd} root", "overlay mount", self._new_slurmd_root)
        pending = list(slurm.nodes)
        slurm.spec = self.target_spec  # NodeSets are read from here for the new slurmd
        started = since = time.monotonic()
        while pending:
            for node in list(pending):
                state = daemons.node_states(jail).get(node.name, "")
                if "DRAINED" not in state.split("+") and not state.startswith("IDLE+DRAIN"):
                    continue
                self.timeline.add(
                    "slurmd", f"{node.name} drained (no job left)", "its jobs to end", time.monotonic() - since
                )
                self._timed(
                    "slurmd", f"{node.name} on slurmd {self.target}", "registration", partial(self._replace, node)
                )
                pending.remove(node)
                hook = self.hooks.pop("node replaced", None)
                if hook is not None:
                    hook()
                since = time.monotonic()
            if pending and time.monotonic() - started > self.job_wait:
                raise TimeoutError(
                    f"nodes {[n.name for n in pending]} still run jobs after {self.job_wait:.0f} s: "
                    f"{daemons.node_states(jail)}\n{slurm.run('squeue', '-a').stdout}"
                )
            time.sleep(0.2)

    job_wait: float = 600
    """How long the drill waits for running jobs (the plan itself waits as long as they run)."""

    def _new_slurmd_root(self) -> None:
        jail = self.slurm.jail
        jail.add_root(self.new_slurmd, self.images["slurmd"])
        jail.bind(self.new_slurmd, self.slurm.etc, "/etc/slurm")
        jail.bind(self.new_slurmd, self.slurm.jail.workdir / "shared" / "tmp", "/tmp")
        jail.mount_tmpfs(self.new_slurmd, "/sys/fs/cgroup")
        prepare_role(jail.root(self.new_slurmd), "slurmd", host=self.slurm.host, munge_key=self._munge_key())
        self._backup_names(self.new_slurmd)
        if self.slurm.spec.auth.type == "munge":
            daemons.start_munged(jail, self.new_slurmd)

    def _replace(self, node: SimNode) -> None:
        slurm = self.slurm
        slurm.stop_slurmd(node.name)
        slurm._spawn_slurmd(node, role=self.new_slurmd)
        wait_until(
            f"{node.name} registers with slurmd {self.target}",
            lambda: self.node_version(node.name) == release_of(self.target).slurm,
            timeout=self.gate_timeout,
            interval=0.2,
        )
        slurm.run("scontrol", "update", f"nodename={node.name}", "state=resume", check=True)

    def node_version(self, name: str) -> str:
        out = self.slurm.run("scontrol", "show", "node", "-o", name).stdout
        for word in out.split():
            if word.startswith("Version="):
                return word.removeprefix("Version=")
        return ""

    # -- clients -------------------------------------------------------------------------
    def _clients(self) -> None:
        slurm = self.slurm
        self._timed("clients", f"login on {self.target}", "munged", lambda: self._move_root("login", []))
        self._gate_version("login", ["sinfo", "-V"])
        if "slurmrestd" in slurm.roles:
            running = "slurmrestd" in slurm.jail.processes

            def restd() -> None:
                self._move_root("slurmrestd", ["slurmrestd"])
                if running:
                    slurm.start_slurmrestd()

            self._timed("clients", f"slurmrestd on {self.target}", "listening", restd)
            self._gate_version("slurmrestd", ["slurmrestd", "-V"])

    def _gate_version(self, role: str, argv: list[str]) -> None:
        done = self.slurm.jail.run(argv, role=role, timeout=30)
        out = (done.stdout + done.stderr).strip()
        wanted = release_of(self.target).slurm
        if wanted not in out:
            raise RuntimeError(f"{role}: {' '.join(argv)} says {out!r}, not {wanted}")


def reported_versions(slurm: LocalSlurm) -> dict[str, str]:
    """What every daemon and the clients say they are: the binaries (-V) and, for each node, the
    slurmd version slurmctld recorded at registration."""
    out: dict[str, str] = {}
    for role, argv in (
        ("slurmctld", ["slurmctld", "-V"]),
        ("slurmdbd", SLURMDBD_VERSION),
        ("slurmrestd", ["slurmrestd", "-V"]),
        ("login", ["scontrol", "version"]),
    ):
        if role in slurm.roles:
            done = slurm.jail.run(argv, role=role, timeout=30)
            out[role] = (done.stdout + done.stderr).strip().rsplit(" ", 1)[-1]
    nodes = slurm.run("scontrol", "show", "nodes", "-o", check=True).stdout
    for line in nodes.splitlines():
        words = dict(w.split("=", 1) for w in shlex.split(line) if "=" in w)
        out[f"slurmd {words.get('NodeName')}"] = words.get("Version", "")
    ping = slurm.run("scontrol", "ping").stdout
    out["scontrol ping"] = " ".join(ping.split())
    return out
