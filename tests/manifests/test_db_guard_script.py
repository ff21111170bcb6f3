"""db-guard.sh and slurmdbd-start.sh's marks, run here on a folder for the backup volume and
stand-in MariaDB clients whose "database" is one line, its schema, beside a second, the release
sunk recorded in it (the drill,
tests/slurm/test_upgrade_drill.py, runs them on real MariaDB and slurmdbd of both releases)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from sunk.manifests import scripts, upgrade
from tests.support.specs import build_spec

OLD, HALF, NEW = "16:24.11-tables", "16:half-converted", "16:26.05-tables"

MARIADB = """#!/bin/sh
query=
while [ $# -gt 0 ]; do
  if [ "$1" = -e ]; then query=$2; shift; fi
  shift
done
case "$query" in
  *"table_name = 'sunk_release'"*) if [ -s "$FAKE_RELEASE" ]; then echo 1; else echo 0; fi ;;
  *"table_name = 'cluster_table'"*) if [ -n "${FAKE_RPC:-}" ]; then echo 1; else echo 0; fi ;;
  *information_schema*) if [ "$(cat "$FAKE_DB")" = none ]; then echo 0; else echo 2; fi ;;
  *"SELECT slurm_release"*) cat "$FAKE_RELEASE" ;;
  *rpc_version*) echo "$FAKE_RPC" ;;
  *"CREATE TABLE IF NOT EXISTS sunk_release"*)
    echo "$query" | sed -n "s/.*VALUES (1, '\\([^']*\\)'.*/\\1/p" > "$FAKE_RELEASE" ;;
  *CONCAT*) cat "$FAKE_DB" ;;
  *DROP\\ DATABASE*) echo none > "$FAKE_DB"; : > "$FAKE_RELEASE" ;;
  '')
    dump=$(cat)
    printf '%s\\n' "$dump" | sed -n 's/^-- schema: //p' > "$FAKE_DB"
    printf '%s\\n' "$dump" | sed -n 's/^-- release: //p' > "$FAKE_RELEASE" ;;
esac
"""
MARIADB_DUMP = """#!/bin/sh
printf -- '-- schema: %s\\n-- release: %s\\n-- Dump completed\\n' "$(cat "$FAKE_DB")" "$(cat "$FAKE_RELEASE")"
"""


class Pod:
    """slurmdbd's pod for a stack's release: its guard and its start script's marks."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.backup = tmp_path / "backup"
        self.db = tmp_path / "db"
        self.db.write_text(OLD + "\n")
        self.release = tmp_path / "release"
        self.release.write_text("24.11\n")
        (tmp_path / "password").write_text("pw\n")
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        for name, body in (("mariadb", MARIADB), ("mariadb-dump", MARIADB_DUMP)):
            (bin_dir / name).write_text(body)
            (bin_dir / name).chmod(0o755)
        self.env = {
            **os.environ,
            "PATH": f"{bin_dir}:{os.environ['PATH']}",
            "FAKE_DB": str(self.db),
            "FAKE_RELEASE": str(self.release),
        }

    def guard(
        self, mode: str, version: str, timeout: float = 60, upgrade_from: str | None = "24.11"
    ) -> subprocess.CompletedProcess[str]:
        """The guard of the pod for `version`; without `upgrade_from` its folder is scratch space
        (no backup volume), as the render has it."""
        slurm = {"version": version} | ({"upgradeFrom": upgrade_from} if upgrade_from else {})
        spec = build_spec(slurm=slurm)
        ready = str(self.tmp / "db-guard.ready")
        folder = str(self.backup) if upgrade_from else str(self.tmp / "scratch")
        alive = str(self.tmp / "db-guard.alive")
        script = upgrade.db_guard(spec, str(self.tmp / "password"), mode, folder, ready=ready, alive=alive)
        return subprocess.run(["sh", "-c", script], env=self.env, capture_output=True, text=True, timeout=timeout)

    @property
    def base(self) -> Path:
        return self.backup / "slurm_acct_db-24.11"

    def mark(self, suffix: str) -> Path:
        return self.backup / f"slurm_acct_db-24.11.{suffix}"


def test_the_upgrade_records_and_dumps_once(tmp_path: Path) -> None:
    pod = Pod(tmp_path)
    first = pod.guard("start", "26.05")
    assert first.returncode == 0, first.stderr
    assert pod.mark("schema").read_text().strip() == OLD
    assert pod.mark("sql").read_text().startswith(f"-- schema: {OLD}\n-- release: 24.11\n")
    # Recorded after the dump: the dump keeps 24.11's record, the database says 26.05 runs.
    assert pod.release.read_text().strip() == "26.05"
    assert "last ran Slurm 24.11 (sunk's record in the database)" in first.stdout
    # slurmdbd 26.05 converts and serves; a later start takes nothing again.
    pod.db.write_text(NEW + "\n")
    pod.mark("served").write_text("slurmdbd 26.05 listened\n")
    again = pod.guard("start", "26.05")
    assert again.returncode == 0 and "converted the database already" in again.stdout
    assert pod.mark("sql").read_text().startswith(f"-- schema: {OLD}")
    assert pod.guard("watch", "26.05").stdout == ""


def test_a_failed_conversion_is_restored_refused_and_undone_by_going_back(tmp_path: Path) -> None:
    pod = Pod(tmp_path)
    assert pod.guard("start", "26.05").returncode == 0
    pod.db.write_text(HALF + "\n")
    pod.mark("failed").write_text("slurmdbd 26.05 exited with 1 before it served\n")
    watched = pod.guard("watch", "26.05")
    assert watched.returncode == 0, watched.stderr
    assert pod.db.read_text().strip() == OLD
    assert pod.release.read_text().strip() == "24.11"  # the dump's record came back with it
    assert "the one recorded before the dump" in watched.stdout
    assert "exited with 1" in pod.mark("restored").read_text()
    # The pod starts again on 26.05: refused, naming the way back.
    refused = pod.guard("start", "26.05")
    assert refused.returncode == 1
    assert 'Set the stack back: slurm: {version: "24.11", upgradeFrom: "24.11"}' in refused.stderr
    # The stack set back: 24.11 starts on the restored database, the copies set aside.
    back = pod.guard("start", "24.11")
    assert back.returncode == 0, back.stderr
    assert pod.db.read_text().strip() == OLD
    assert not pod.mark("sql").exists() and not pod.mark("failed").exists()
    [aside] = [p for p in pod.backup.iterdir() if ".aside-" in p.name]
    assert {p.name for p in aside.iterdir()} == {
        f"slurm_acct_db-24.11.{s}" for s in ("sql", "sql.sha256", "schema", "failed", "restored")
    }
    again = pod.guard("start", "24.11")  # nothing left to do but say what runs
    assert again.returncode == 0 and "set aside" not in again.stdout and "restored" not in again.stdout
    assert pod.release.read_text().strip() == "24.11"


def test_a_restore_that_gives_another_schema_fails(tmp_path: Path) -> None:
    pod = Pod(tmp_path)
    assert pod.guard("start", "26.05").returncode == 0
    pod.mark("schema").write_text("16:something else\n")
    pod.mark("failed").write_text("slurmdbd 26.05 exited with 1\n")
    watched = pod.guard("watch", "26.05")
    assert watched.returncode == 1
    assert "is not the one recorded before the dump" in watched.stderr
    assert not pod.mark("restored").exists()


def test_the_sidecar_restarted_in_its_pod_leaves_a_conversion_under_way_alone(tmp_path: Path) -> None:
    """The schema moving while slurmdbd converts is not an interrupted conversion: only a new
    pod (no `ready` in its emptyDir) runs the start phase that would restore over it."""
    pod = Pod(tmp_path)
    assert pod.guard("start", "26.05").returncode == 0
    pod.db.write_text(HALF + "\n")  # slurmdbd 26.05 converting, not yet listening
    (tmp_path / "db-guard.ready").write_text("")
    with pytest.raises(subprocess.TimeoutExpired):
        pod.guard("sidecar", "26.05", timeout=3)
    assert pod.db.read_text().strip() == HALF
    # A new pod (the old one gone mid-conversion): the conversion starts over from the dump.
    (tmp_path / "db-guard.ready").unlink()
    assert pod.guard("start", "26.05").returncode == 0
    assert pod.db.read_text().strip() == OLD


def test_going_back_after_the_new_release_served_is_refused(tmp_path: Path) -> None:
    pod = Pod(tmp_path)
    assert pod.guard("start", "26.05").returncode == 0
    pod.db.write_text(NEW + "\n")
    pod.mark("served").write_text("x\n")
    refused = pod.guard("start", "24.11")
    assert refused.returncode == 1 and "Slurm can't be downgraded" in refused.stderr
    assert pod.db.read_text().strip() == NEW  # no record lost without the operator's word


def _slurmdbd_start(tmp_path: Path, body: str, guard: Path, port: int = 1) -> subprocess.CompletedProcess[str]:
    etc, run = tmp_path / "etc", tmp_path / "run"
    etc.mkdir(exist_ok=True)
    run.mkdir(exist_ok=True)
    (etc / "slurm.conf").write_text("ClusterName=c\n")
    (etc / "slurmdbd.conf").write_text(f"DbdHost=x\nDbdPort={port}\n")
    (tmp_path / "password").write_text("pw\n")
    bin_dir = tmp_path / "dbdbin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "slurmdbd").write_text(f"#!/bin/sh\n{body}\n")
    (bin_dir / "slurmdbd").chmod(0o755)
    script = scripts.slurmdbd_start(str(etc), str(tmp_path / "password"), str(run), guard=str(guard), release="26.05")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("body", "failed"), [("exit 3", True), ("exit 0", False)])
def test_slurmdbd_exiting_before_it_listens_is_marked_failed_and_not_started_again(
    tmp_path: Path, body: str, failed: bool
) -> None:
    guard = tmp_path / "slurm_acct_db-24.11"
    done = _slurmdbd_start(tmp_path, body, guard)
    assert done.returncode == (3 if failed else 0)
    assert Path(f"{guard}.failed").exists() == failed
    if failed:
        assert "exited with 3" in Path(f"{guard}.failed").read_text()
        again = _slurmdbd_start(tmp_path, "echo started; exit 0", guard)
        assert again.returncode == 1 and "started" not in again.stdout
        assert "set slurm.version back to slurm.upgradeFrom's release" in again.stderr


def test_slurmdbd_that_served_is_not_marked_failed_when_it_stops(tmp_path: Path) -> None:
    guard = tmp_path / "slurm_acct_db-24.11"
    Path(f"{guard}.served").write_text("slurmdbd 26.05 listened\n")
    done = _slurmdbd_start(tmp_path, "exit 1", guard)
    assert done.returncode == 1
    assert not Path(f"{guard}.failed").exists()


def test_slurmdbd_that_listened_is_marked_served_and_not_failed(tmp_path: Path) -> None:
    """A stand-in slurmdbd listens on DbdPort for 3 s, then exits 1 (a crash after it served)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    listen = (
        f"exec {sys.executable} -c 'import socket, time; s = socket.socket(); "
        f's.bind(("127.0.0.1", {port})); s.listen(); time.sleep(3); raise SystemExit(1)\''
    )
    guard = tmp_path / "slurm_acct_db-24.11"
    done = _slurmdbd_start(tmp_path, listen, guard, port)
    assert done.returncode == 1, done.stderr
    assert "slurmdbd 26.05 listened" in Path(f"{guard}.served").read_text()
    assert not Path(f"{guard}.failed").exists()


def test_without_upgrade_from_the_release_is_checked_and_recorded_and_nothing_copied(tmp_path: Path) -> None:
    pod = Pod(tmp_path)
    same = pod.guard("start", "24.11", upgrade_from=None)
    assert same.returncode == 0, same.stderr
    assert pod.release.read_text().strip() == "24.11" and pod.db.read_text().strip() == OLD
    assert not pod.backup.exists() and not any((tmp_path / "scratch").iterdir())
    assert pod.guard("watch", "24.11", upgrade_from=None).stdout == ""
    # The default moved to 26.05 under a stack that never pinned 24.11: refused, nothing touched.
    moved = pod.guard("start", "26.05", upgrade_from=None)
    assert moved.returncode == 1
    assert "last ran Slurm 24.11 (sunk's record in the database); this slurmdbd is 26.05" in moved.stdout
    assert "slurm.upgradeFrom announces no change" in moved.stderr
    assert pod.release.read_text().strip() == "24.11" and pod.db.read_text().strip() == OLD
    # The database ran 26.05 (an upgrade done), and the stack is set back plainly: refused.
    pod.release.write_text("26.05\n")
    back = pod.guard("start", "24.11", upgrade_from=None)
    assert back.returncode == 1 and 'upgradeFrom: "24.11"}' in back.stderr


def test_a_database_from_before_the_record_is_judged_by_the_last_slurmctld(tmp_path: Path) -> None:
    """No sunk_release yet (deployed by an earlier sunk): cluster_table's rpc_version, the
    protocol of the slurmctld that registered last (42 << 8: 24.11)."""
    pod = Pod(tmp_path)
    pod.release.write_text("")
    pod.env["FAKE_RPC"] = str(42 << 8)
    moved = pod.guard("start", "26.05", upgrade_from=None)
    assert moved.returncode == 1, moved.stdout
    assert "last ran Slurm 24.11 (cluster_table's rpc_version (nothing recorded yet))" in moved.stdout
    assert pod.release.read_text() == ""
    kept = pod.guard("start", "24.11", upgrade_from=None)
    assert kept.returncode == 0, kept.stderr
    assert pod.release.read_text().strip() == "24.11"
    # The watch writes the row too (a pod that started before slurmctld registered).
    pod.release.write_text("")
    assert pod.guard("watch", "24.11", upgrade_from=None).returncode == 0
    assert pod.release.read_text().strip() == "24.11"


def test_a_new_database_is_recorded_once_slurmdbd_made_its_tables(tmp_path: Path) -> None:
    pod = Pod(tmp_path)
    pod.db.write_text("none\n")
    pod.release.write_text("")
    first = pod.guard("start", "26.05", upgrade_from=None)
    assert first.returncode == 0, first.stderr
    assert pod.release.read_text() == ""  # no Slurm tables: the database may not exist yet
    pod.db.write_text(NEW + "\n")  # slurmdbd 26.05 created them
    watched = pod.guard("watch", "26.05", upgrade_from=None)
    assert watched.returncode == 0 and pod.release.read_text().strip() == "26.05"
    assert pod.guard("watch", "26.05", upgrade_from=None).stdout == ""  # once
