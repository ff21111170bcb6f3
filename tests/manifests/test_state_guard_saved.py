"""The state guard never takes a cluster for a new one while slurmctld is between the two renames
of its save (job_state.new written, job_state renamed to job_state.old, job_state.new not yet
renamed), or after a kill cut that save short: only a folder without job_state, job_state.old and
job_state.new is new. Seen in CI's upgrade drill: a 26.05 guard said "no saved state (a new
cluster)" and let slurmctld 26.05 start, where the unannounced release should have been refused."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from sunk.manifests import upgrade
from tests.support.specs import build_spec
from tests.support.statefiles import state_file


def _run(state: Path, backup: Path) -> subprocess.CompletedProcess[str]:
    spec = build_spec(slurm={"version": "26.05"})
    script = upgrade.state_guard(spec, str(backup), str(state))
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("left", ["job_state.old", "job_state.new"])
def test_a_save_between_its_renames_is_not_a_new_cluster(tmp_path: Path, left: str) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / left).write_bytes(state_file(42, b"24.11 jobs"))  # 24.11's protocol
    (state / "node_state").write_bytes(state_file(42, b"24.11 nodes"))
    done = _run(state, tmp_path / "backup")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "new cluster" not in done.stdout
    assert "slurm.upgradeFrom is unset: nobody announced the upgrade" in done.stderr


def test_an_empty_folder_is_a_new_cluster(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    done = _run(state, tmp_path / "backup")
    assert done.returncode == 0, done.stderr
    assert "no saved state" in done.stdout
