"""The upgrade's copy scripts, run here on plain folders (the database ones need MariaDB: the
real-Slurm drill, tests/slurm/test_upgrade_drill.py, runs all four)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from sunk.manifests import upgrade


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)


def test_snapshot_then_restore_gives_back_exactly_the_files(tmp_path: Path) -> None:
    state, backup = tmp_path / "state", tmp_path / "backup"
    (state / "hash.1").mkdir(parents=True)
    (state / "job_state").write_bytes(b"old jobs")
    (state / "hash.1" / "job.1").write_bytes(b"script")
    done = _run(upgrade.state_snapshot("statesave-24.11", str(backup), str(state)))
    assert done.returncode == 0, done.stderr
    assert "2 files" in done.stdout
    # What a failed start on the new release does: rewrite one file, add another.
    (state / "job_state").write_bytes(b"new format")
    (state / "extra").write_bytes(b"x")
    done = _run(upgrade.state_restore("statesave-24.11", str(backup), str(state)))
    assert done.returncode == 0, done.stderr
    assert (state / "job_state").read_bytes() == b"old jobs"
    assert sorted(p.name for p in state.rglob("*")) == ["hash.1", "job.1", "job_state"]


def test_a_snapshot_that_no_longer_matches_its_checksums_is_not_restored(tmp_path: Path) -> None:
    state, backup = tmp_path / "state", tmp_path / "backup"
    state.mkdir()
    (state / "job_state").write_bytes(b"old jobs")
    assert _run(upgrade.state_snapshot("s", str(backup), str(state))).returncode == 0
    (backup / "s" / "job_state").write_bytes(b"bit rot")
    (state / "job_state").write_bytes(b"new format")
    done = _run(upgrade.state_restore("s", str(backup), str(state)))
    assert done.returncode != 0
    assert "does not match its checksums; not restoring it" in done.stderr
    assert (state / "job_state").read_bytes() == b"new format"  # left alone


def test_the_database_scripts_keep_the_password_off_the_command_line() -> None:
    db = upgrade.Database("127.0.0.1", 3306, "slurm_acct_db", "slurm", "/etc/slurm-db/password")
    for script in (upgrade.db_backup(db, "dump"), upgrade.db_restore(db, "dump")):
        assert "password_file='/etc/slurm-db/password'" in script or "password_file=/etc/slurm-db/password" in script
        assert "--password" not in script
        assert "--defaults-extra-file" in script


def test_backup_once_keeps_the_dump_taken_before_the_conversion(tmp_path: Path) -> None:
    """slurmdbd's pod runs the dump at each start while an upgrade is under way: once the dump
    exists it is kept, never replaced by one of the converted database (no mariadb-dump runs)."""
    password = tmp_path / "password"
    password.write_text("secret\n")
    db = upgrade.Database("127.0.0.1", 3306, "slurm_acct_db", "slurm", str(password))
    (tmp_path / "slurm_acct_db-24.11.sql").write_text("-- the dump before\n")
    (tmp_path / "slurm_acct_db-24.11.sql.sha256").write_text("x  slurm_acct_db-24.11.sql\n")
    kept = _run(upgrade.db_backup(db, "slurm_acct_db-24.11", str(tmp_path), keep=True))
    assert kept.returncode == 0, kept.stderr
    assert "kept as it is" in kept.stdout
    assert (tmp_path / "slurm_acct_db-24.11.sql").read_text() == "-- the dump before\n"
    # Without `keep` the dump is taken again: here that means running mariadb-dump, which this
    # machine lacks, so the script fails before touching the existing dump.
    again = _run(upgrade.db_backup(db, "slurm_acct_db-24.11", str(tmp_path)))
    assert again.returncode != 0
    assert (tmp_path / "slurm_acct_db-24.11.sql").read_text() == "-- the dump before\n"


def test_the_restore_fills_the_state_folder_without_touching_the_folder_itself(tmp_path: Path) -> None:
    """In a pod StateSaveLocation is its volume's root, owned by root (setgid, the pod's fsGroup),
    and the restore runs as slurmctld's user, who may not set that folder's times or mode: on the
    local cluster `cp -a SNAPSHOT/. STATE/` failed there. The folder keeps its own mode."""
    state, backup = tmp_path / "state", tmp_path / "backup"
    state.mkdir()
    (state / "job_state").write_bytes(b"old jobs")
    state.chmod(0o2777)
    assert _run(upgrade.state_snapshot("s", str(backup), str(state))).returncode == 0
    (state / "job_state").write_bytes(b"new format")
    state.chmod(0o2775)
    done = _run(upgrade.state_restore("s", str(backup), str(state)))
    assert done.returncode == 0, done.stderr
    assert state.stat().st_mode & 0o7777 == 0o2775
    assert (state / "job_state").read_bytes() == b"old jobs"
