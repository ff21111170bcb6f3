"""What slurm.upgradeFrom adds to the render (sunk.manifests.upgrade): each daemon's pod takes
its copy before converting anything and waits for what must move first, whatever applies the
render; and the state guard and the release waits run here on plain folders and stand-in
clients (the drill, tests/slurm/test_upgrade_drill.py, runs the copy scripts on real daemons; the
local cluster, tests/runtime/local/test_local_upgrade.py, the whole upgrade)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from sunk import naming
from sunk.manifests import upgrade
from sunk.manifests.cluster import cluster_manifests
from sunk.spec.errors import SpecError
from tests.support.specs import build_spec
from tests.support.statefiles import state_file

UPGRADE = {"slurm": {"version": "26.05", "upgradeFrom": "24.11"}}


def _workloads(spec_changes: dict[str, Any]) -> dict[str, dict[str, Any]]:
    manifests = cluster_manifests(build_spec("acme-dev", spec_changes))
    return {f"{m['kind']}/{m['metadata']['name']}": m for m in manifests}


def _init(objects: dict[str, dict[str, Any]], key: str) -> list[str]:
    return [c["name"] for c in objects[key]["spec"]["template"]["spec"].get("initContainers") or []]


def test_without_upgrade_from_the_guards_check_but_nothing_copies_or_waits() -> None:
    """The guards are in every render (a release change nobody announced is refused by the pods
    themselves, whatever applies the render), with no backup volume: nothing to copy."""
    objects = _workloads({})
    assert not any("-backup" in key for key in objects)
    assert _init(objects, "StatefulSet/research-controller") == ["munge", "state-guard", "wait-qos"]
    assert _init(objects, "Deployment/research-accounting") == ["db-guard", "munge"]
    assert _init(objects, "Deployment/research-login") == ["munge"]
    ctld = objects["StatefulSet/research-controller"]["spec"]["template"]["spec"]
    guard = ctld["initContainers"][1]
    assert [m["name"] for m in guard["volumeMounts"]] == ["state"]
    assert "announced=''" in guard["command"][2] and "accept_loss=no" in guard["command"][2]
    assert guard["terminationMessagePolicy"] == "FallbackToLogsOnError"
    dbd = objects["Deployment/research-accounting"]["spec"]["template"]["spec"]
    db_guard = dbd["initContainers"][0]
    assert "backup" not in {m["name"] for m in db_guard["volumeMounts"]}
    assert "dir=/tmp/db-guard" in db_guard["command"][2] and "release=26.05" in db_guard["command"][2]
    assert db_guard["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert "backup" not in {v["name"] for v in dbd["volumes"] + ctld["volumes"]}
    assert "guard=''" in dbd["containers"][0]["command"][2]


def test_upgrading_each_pod_copies_first_and_waits_for_what_moves_before_it() -> None:
    objects = _workloads(UPGRADE)
    assert {
        "PersistentVolumeClaim/research-accounting-backup-24.11",
        "PersistentVolumeClaim/research-controller-backup-24.11",
    } <= set(objects)
    # slurmdbd: the database guard dumps before slurmdbd of the new release starts (it converts
    # the database), and restores if that conversion fails; slurmdbd marks how it went.
    dbd = objects["Deployment/research-accounting"]["spec"]["template"]["spec"]
    assert _init(objects, "Deployment/research-accounting") == ["db-guard", "munge"]
    guard = dbd["initContainers"][0]
    assert guard["image"].startswith("ghcr.io/") and "mariadb" in guard["image"]
    assert guard["restartPolicy"] == "Always" and guard["startupProbe"]["exec"]["command"][0] == "test"
    assert "mode=sidecar" in guard["command"][2] and "name=slurm_acct_db-24.11" in guard["command"][2]
    assert {"name": "backup", "persistentVolumeClaim": {"claimName": "research-accounting-backup-24.11"}} in dbd[
        "volumes"
    ]
    slurmdbd = dbd["containers"][0]
    assert {"name": "backup", "mountPath": "/backup"} in slurmdbd["volumeMounts"]
    assert "guard=/backup/slurm_acct_db-24.11" in slurmdbd["command"][2] and "release=26.05" in slurmdbd["command"][2]
    # slurmctld: slurmdbd at 26.05 first, then the state guard, then the QOS.
    assert _init(objects, "StatefulSet/research-controller") == ["munge", "wait-slurmdbd", "state-guard", "wait-qos"]
    ctld = objects["StatefulSet/research-controller"]["spec"]["template"]["spec"]
    wait = ctld["initContainers"][1]["command"][2]
    assert "daemon=slurmdbd" in wait and "release=26.05" in wait
    guard = ctld["initContainers"][2]
    assert {m["name"] for m in guard["volumeMounts"]} == {"state", "backup"}
    assert "source=24.11" in guard["command"][2] and "'45=26.05 42=24.11'" in guard["command"][2]
    # login: slurmctld at 26.05 (a client may not be newer than slurmctld).
    assert _init(objects, "Deployment/research-login") == ["munge", "wait-slurmctld"]


def test_going_back_keeps_the_guards_and_the_volumes_but_nothing_waits() -> None:
    """slurm.version set back to the release upgradeFrom names: the guards restore the state and
    check the database."""
    objects = _workloads({"slurm": {"version": "24.11", "upgradeFrom": "24.11"}})
    assert "PersistentVolumeClaim/research-controller-backup-24.11" in objects
    assert "PersistentVolumeClaim/research-accounting-backup-24.11" in objects
    assert _init(objects, "StatefulSet/research-controller") == ["munge", "state-guard", "wait-qos"]
    assert _init(objects, "Deployment/research-accounting") == ["db-guard", "munge"]
    slurmdbd = objects["Deployment/research-accounting"]["spec"]["template"]["spec"]["containers"][0]
    assert "guard=''" in slurmdbd["command"][2]  # nothing to mark: no conversion


def _guard(
    tmp_path: Path, version: str, source: str | None, *, accept_loss: bool = False
) -> subprocess.CompletedProcess[str]:
    slurm: dict[str, Any] = {"version": version}
    if source is not None:
        slurm["upgradeFrom"] = source
    if accept_loss:
        slurm["acceptJobLoss"] = True
    spec = build_spec(slurm=slurm)
    script = upgrade.state_guard(spec, str(tmp_path / "backup"), str(tmp_path / "state"))
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)


def test_the_guard_copies_older_state_once_and_restores_it_when_going_back(tmp_path: Path) -> None:
    state, backup = tmp_path / "state", tmp_path / "backup"
    state.mkdir()
    (state / "job_state").write_bytes(state_file(42, b"24.11 jobs"))
    first = _guard(tmp_path, "26.05", "24.11")
    assert first.returncode == 0, first.stderr
    assert (backup / "statesave-24.11" / "job_state").read_bytes() == state_file(42, b"24.11 jobs")
    # The controllers' lock the guard held while it copied (slurmctld-start.sh) is not state.
    assert (state / naming.CONTROLLER_LOCK).exists()
    assert sorted(os.listdir(backup / "statesave-24.11")) == ["job_state"]
    assert naming.CONTROLLER_LOCK not in (backup / "statesave-24.11.sha256").read_text()
    # The pod starts again before slurmctld converted anything: the copy is kept, not retaken.
    (state / "job_state").write_bytes(state_file(42, b"24.11 jobs, later"))
    again = _guard(tmp_path, "26.05", "24.11")
    assert again.returncode == 0 and "kept as it is" in again.stdout, again.stdout + again.stderr
    assert (backup / "statesave-24.11" / "job_state").read_bytes() == state_file(42, b"24.11 jobs")
    # slurmctld 26.05 converts the state: from then on there is nothing to do.
    (state / "job_state").write_bytes(state_file(45, b"26.05 jobs"))
    (state / "new_26.05_file").write_bytes(b"x")
    assert "nothing to do" in _guard(tmp_path, "26.05", "24.11").stdout
    # The stack goes back to 24.11: its slurmctld finds state newer than it reads, and the copy.
    back = _guard(tmp_path, "24.11", "24.11")
    assert back.returncode == 0, back.stderr
    assert sorted(os.listdir(state)) == [naming.CONTROLLER_LOCK, "job_state"]  # the lock kept, not restored
    assert (state / "job_state").read_bytes() == state_file(42, b"24.11 jobs")
    # The copy is set aside: a later upgrade takes a fresh one.
    assert not (backup / "statesave-24.11").exists()
    assert any(p.name.startswith("statesave-24.11.restored-") for p in backup.iterdir())
    assert "nothing to do" in _guard(tmp_path, "24.11", "24.11").stdout


def test_the_guard_restores_when_any_state_file_is_newer_not_only_job_state(tmp_path: Path) -> None:
    """slurmctld rewrites a state file only when what it holds changes: 26.05 that registered the
    nodes and then crashed leaves node_state in its format beside job_state of 24.11 (measured on
    a local cluster), which 24.11 can't read. Going back restores the copy all the same."""
    state = tmp_path / "state"
    state.mkdir()
    for name in ("job_state", "node_state", "part_state"):
        (state / name).write_bytes(state_file(42, f"24.11 {name}".encode()))
    (state / "assoc_usage").write_bytes(b"\x2a\x00 no header")  # other files: not read
    assert _guard(tmp_path, "26.05", "24.11").returncode == 0
    (state / "node_state").write_bytes(state_file(45, b"26.05 nodes"))
    (state / "node_state.old").write_bytes(state_file(42, b"24.11 node_state"))
    assert "nothing to do" in _guard(tmp_path, "26.05", "24.11").stdout
    back = _guard(tmp_path, "24.11", "24.11")
    assert back.returncode == 0, back.stderr
    assert "written by Slurm 26.05, newer than this slurmctld in node_state:" in back.stdout
    assert (state / "node_state").read_bytes() == state_file(42, b"24.11 node_state")
    assert sorted(os.listdir(state)) == [naming.CONTROLLER_LOCK, "assoc_usage", "job_state", "node_state", "part_state"]
    # Without the copy, the same state is refused, naming the file.
    (state / "part_state").write_bytes(state_file(45))
    refused = _guard(tmp_path, "24.11", "24.11")
    assert refused.returncode == 1 and "(24.11) in part_state, and" in refused.stderr, refused.stderr


def test_a_restore_stopped_midway_is_finished_at_the_next_start(tmp_path: Path) -> None:
    """The pod deleted (or its Node lost) while state-restore.sh ran: StateSaveLocation is part
    emptied, part copied. Without the restore's mark that reads as a new cluster (nothing left) or
    as the old release's own state (only old files left), and slurmctld would start from it."""
    state, backup = tmp_path / "state", tmp_path / "backup"
    state.mkdir()
    jobs, nodes = state_file(42, b"24.11 jobs"), state_file(42, b"24.11 nodes")
    (state / "job_state").write_bytes(jobs)
    (state / "node_state").write_bytes(nodes)
    assert _guard(tmp_path, "26.05", "24.11").returncode == 0  # the copy, before the conversion
    (state / "job_state").write_bytes(state_file(45, b"26.05 jobs"))
    # The restore going back marks itself, then empties the state... and is stopped there.
    (backup / "statesave-24.11.restoring").touch()
    for f in state.iterdir():
        f.unlink()
    again = _guard(tmp_path, "24.11", "24.11")
    assert again.returncode == 0, again.stderr
    assert "stopped before it finished: it runs again" in again.stdout, again.stdout
    assert {f.name: f.read_bytes() for f in state.iterdir() if f.name != naming.CONTROLLER_LOCK} == {
        "job_state": jobs,
        "node_state": nodes,
    }
    assert not (backup / "statesave-24.11.restoring").exists() and not (backup / "statesave-24.11").exists()
    assert "nothing to do" in _guard(tmp_path, "24.11", "24.11").stdout
    # Stopped later, with only some of the old files back: finished all the same.
    assert "statesave-24.11" in _guard(tmp_path, "26.05", "24.11").stdout  # a fresh copy, next attempt
    assert (backup / "statesave-24.11" / "node_state").read_bytes() == nodes
    (state / "node_state").write_bytes(state_file(45, b"26.05 nodes"))
    (backup / "statesave-24.11.restoring").touch()
    (state / "node_state").unlink()  # job_state copied back (24.11's), node_state not yet
    assert "nothing to do" not in (finished := _guard(tmp_path, "24.11", "24.11")).stdout, finished.stdout
    assert finished.returncode == 0 and (state / "node_state").read_bytes() == nodes
    # A mark left after the copy was set aside: the restore had finished; only the mark goes.
    (backup / "statesave-24.11.restoring").touch()
    done = _guard(tmp_path, "24.11", "24.11")
    assert done.returncode == 0 and "had finished before it was stopped" in done.stdout, done.stdout
    assert not (backup / "statesave-24.11.restoring").exists()
    assert {f.name: f.read_bytes() for f in state.iterdir() if f.name != naming.CONTROLLER_LOCK} == {
        "job_state": jobs,
        "node_state": nodes,
    }


def test_the_guard_refuses_newer_state_without_a_copy_and_a_wrong_upgrade_from(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "job_state").write_bytes(state_file(45))
    refused = _guard(tmp_path, "24.11", "24.11")
    assert refused.returncode == 1
    assert "written by Slurm 26.05, newer than this slurmctld (24.11)" in refused.stderr
    assert (state / "job_state").read_bytes() == state_file(45)
    (state / "job_state").write_bytes(state_file(43))  # 25.05: sunk doesn't ship it
    refused = _guard(tmp_path, "26.05", "24.11")
    assert refused.returncode == 1
    assert "not 24.11 as slurm.upgradeFrom says" in refused.stderr


def test_the_guard_leaves_a_new_cluster_and_foreign_files_alone(tmp_path: Path) -> None:
    assert "a new cluster" in _guard(tmp_path, "26.05", "24.11").stdout
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "job_state").write_bytes(b"\0\0\0\x05other")
    refused = _guard(tmp_path, "26.05", "24.11")
    assert refused.returncode == 1 and "not touching it" in refused.stderr


def test_wait_release_holds_until_the_daemon_answers_at_the_release(tmp_path: Path) -> None:
    """A stand-in scontrol answers nothing, then 24.11, then 26.05."""
    answers = tmp_path / "answers"
    answers.write_text("\n24.11.5\n26.05.5\n")
    fake = tmp_path / "scontrol"
    fake.write_text(
        "#!/bin/sh\n"
        f"v=$(head -n 1 {answers}); sed -i 1d {answers}\n"
        '[ -n "$v" ] || exit 1\n'
        'echo "SLURM_VERSION           = $v"\n'
    )
    fake.chmod(0o755)
    done = subprocess.run(
        ["sh", "-c", upgrade.wait_release("slurmctld", "26.05", period=0)],
        capture_output=True,
        text=True,
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "waiting for slurmctld at Slurm 26.05; it answers nothing yet",
        "waiting for slurmctld at Slurm 26.05; it answers 24.11.5",
        "slurmctld answers at Slurm 26.05.5",
    ]


def test_wait_release_ends_on_sigterm(tmp_path: Path) -> None:
    """It is its container's PID 1, which ignores a signal it has no handler for: a deleted pod
    would wait out its grace period. It exits 143 on SIGTERM (after its current sleep)."""
    fake = tmp_path / "scontrol"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    proc = subprocess.Popen(
        ["sh", "-c", upgrade.wait_release("slurmctld", "26.05", period=0.2)],
        stdout=subprocess.PIPE,
        text=True,
        env={"PATH": f"{tmp_path}:/usr/bin:/bin"},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("waiting for slurmctld at Slurm 26.05")
    proc.terminate()
    assert proc.wait(timeout=60) == 143


def test_without_upgrade_from_the_guard_refuses_state_another_release_wrote(tmp_path: Path) -> None:
    """The default moved under a stack that never pinned its release (24.11 state, a 26.05 pod),
    or a plain set-back (26.05 state, a 24.11 pod): refused, each naming the way that is."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "job_state").write_bytes(state_file(42))
    assert "nothing to do" in _guard(tmp_path, "24.11", None).stdout  # the same release: two reads
    moved = _guard(tmp_path, "26.05", None)
    assert moved.returncode == 1
    assert "slurm.upgradeFrom is unset: nobody announced the upgrade" in moved.stderr
    assert 'slurm: {version: "26.05", upgradeFrom: "24.11"}' in moved.stderr
    assert (state / "job_state").read_bytes() == state_file(42) and not (tmp_path / "backup").exists()
    (state / "job_state").write_bytes(state_file(45))
    back = _guard(tmp_path, "24.11", None)
    assert back.returncode == 1
    assert 'say so: slurm: {version: "24.11", upgradeFrom: "24.11"}' in back.stderr


def test_going_back_to_a_snapshot_older_than_jobs_is_refused_unless_the_loss_is_accepted(tmp_path: Path) -> None:
    state, backup = tmp_path / "state", tmp_path / "backup"
    state.mkdir()
    (state / "job_state").write_bytes(state_file(42, next_job=1000))
    assert _guard(tmp_path, "26.05", "24.11").returncode == 0  # the snapshot: next job 1000
    # slurmctld 26.05 ran on and took jobs 1000 to 1041; then the stack is set back.
    (state / "job_state").write_bytes(state_file(45, next_job=1042))
    refused = _guard(tmp_path, "24.11", "24.11")
    assert refused.returncode == 1, refused.stdout
    assert "the next job id is 1042 in" in refused.stderr and "and 1000 in the copy" in refused.stderr
    assert "restoring it loses every job from 1000 on" in refused.stderr
    assert "slurm.acceptJobLoss: true" in refused.stderr and "saved 2026-11-30T00:53:20Z" in refused.stderr
    assert (state / "job_state").read_bytes() == state_file(45, next_job=1042)  # untouched
    assert (backup / "statesave-24.11").is_dir()
    accepted = _guard(tmp_path, "24.11", "24.11", accept_loss=True)
    assert accepted.returncode == 0, accepted.stderr
    assert "slurm.acceptJobLoss is set: restoring all the same" in accepted.stdout
    assert (state / "job_state").read_bytes() == state_file(42, next_job=1000)


def test_accept_job_loss_is_only_for_going_back() -> None:
    for slurm in ({"version": "26.05"}, {"version": "26.05", "upgradeFrom": "24.11"}):
        with pytest.raises(SpecError, match=r"slurm\.acceptJobLoss: is only for going back after an upgrade"):
            build_spec(slurm={**slurm, "acceptJobLoss": True})
    assert build_spec(slurm={"version": "24.11", "upgradeFrom": "24.11", "acceptJobLoss": True})
