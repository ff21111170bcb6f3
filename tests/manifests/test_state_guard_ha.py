"""An upgrade of a controller with backups (controller.replicas 2-3 with slurm.upgradeFrom): the
state guards of the controller pods share one StateSaveLocation and one backup volume, so they
take turns, and the first waits until no controller of the old template answers before the
state is copied and converted. Here on plain folders, with listening sockets standing in for
the controllers; real daemons in tests/slurm/test_upgrade_drill_ha.py."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sunk import naming
from sunk.manifests import upgrade
from sunk.manifests.cluster import cluster_manifests
from sunk.upgrade import plan_text, upgrade_plan
from tests.support.specs import build_spec
from tests.support.statefiles import free_port, state_file

RWX = {"accessMode": "ReadWriteMany", "storageClass": "nfs-client"}
HA_UPGRADE: dict[str, Any] = {
    "slurm": {"version": "26.05", "upgradeFrom": "24.11"},
    "controller": {"replicas": 2, "stateStorage": RWX},
}


@pytest.fixture
def controller() -> Iterator[socket.socket]:
    """A slurmctld that answers: a socket listening on a free loopback port."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener


def _guard(tmp_path: Path, peers: list[str], version: str = "26.05", source: str = "24.11") -> subprocess.Popen[str]:
    spec = build_spec(
        slurm={"version": version, "upgradeFrom": source}, controller={"replicas": 2, "stateStorage": RWX}
    )
    script = upgrade.state_guard(spec, str(tmp_path / "backup"), str(tmp_path / "state"), peers=peers)
    return subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _done(guard: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        out, err = guard.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        guard.kill()
        out, err = guard.communicate()
        pytest.fail(f"the guard did not end: {out}{err}")
    return guard.returncode, out + err


def _older_state(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    (state / "job_state").write_bytes(state_file(42, b"24.11 jobs"))
    return state


def test_an_upgrade_with_backups_is_valid_and_every_controller_pod_mounts_the_backup_volume() -> None:
    spec = build_spec("acme-dev", HA_UPGRADE)
    objects = {f"{m['kind']}/{m['metadata']['name']}": m for m in cluster_manifests(spec)}
    claim = objects[f"PersistentVolumeClaim/{naming.backup_claim(spec.name, 'controller', '24.11')}"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == "nfs-client"
    sts = objects[f"StatefulSet/{naming.controller(spec)}"]["spec"]
    assert sts["updateStrategy"] == {"type": "OnDelete"}
    guard = next(c for c in sts["template"]["spec"]["initContainers"] if c["name"] == "state-guard")
    assert {"name": "backup", "mountPath": "/backup"} in guard["volumeMounts"]
    # The guard's peers: every SlurmctldHost at slurmctld's port.
    assert upgrade.controller_peers(spec) == [
        f"{naming.controller_fqdn(spec, i)}:{naming.SLURMCTLD_PORT}" for i in range(2)
    ]


def test_one_controller_and_a_release_without_upgrade_from_have_no_peers() -> None:
    assert upgrade.controller_peers(build_spec("acme-dev", {"slurm": HA_UPGRADE["slurm"]})) == []
    ha = build_spec("acme-dev", {"controller": HA_UPGRADE["controller"]})
    assert upgrade.controller_peers(ha) == []
    one = build_spec("acme-dev", {"slurm": HA_UPGRADE["slurm"]})
    claim = next(
        m
        for m in cluster_manifests(one)
        if m["metadata"]["name"].endswith("-backup-24.11")
        and m["metadata"]["labels"]["app.kubernetes.io/component"] == "controller"
    )
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_the_plan_stops_every_controller_before_the_snapshot() -> None:
    spec = build_spec("acme-dev", HA_UPGRADE)
    plan = upgrade_plan(spec, "24.11")
    snapshot = plan.step("snapshot").does
    assert snapshot.startswith("delete every controller pod (kubectl delete pod -n ")
    assert "app.kubernetes.io/component=controller" in snapshot and "OnDelete" in snapshot
    assert "every slurmctld 24.11 (the primary and its backup) stops" in snapshot
    assert "once every slurmctld has exited and no controller answers" in snapshot
    assert plan.step("slurmctld").does.startswith("every slurmctld 26.05")
    assert "start every slurmctld 24.11 (the primary and its backup)" in plan.step("slurmctld").rollback
    three = build_spec("acme-dev", {**HA_UPGRADE, "controller": {"replicas": 3, "stateStorage": RWX}})
    assert "(the primary and its 2 backups)" in plan_text(upgrade_plan(three, "24.11"))
    one = upgrade_plan(build_spec("acme-dev", {"slurm": HA_UPGRADE["slurm"]}), "24.11")
    assert one.step("snapshot").does.startswith("stop slurmctld 24.11 (it saves its state)")


def test_the_first_guard_copies_only_once_no_old_controller_answers(tmp_path: Path, controller: socket.socket) -> None:
    """Pod 0 deleted and replaced while the old backup still runs: its guard waits for it."""
    state = _older_state(tmp_path)
    backup = tmp_path / "backup"
    backup.mkdir()
    old_backup = f"127.0.0.1:{controller.getsockname()[1]}"
    guard = _guard(tmp_path, [f"127.0.0.1:{free_port()}", old_backup])
    deadline = time.monotonic() + 30
    while not (backup / ".state-guard.lock").exists():
        assert time.monotonic() < deadline and guard.poll() is None, _done(guard)
        time.sleep(0.1)
    time.sleep(3)  # a connection and a wait round
    assert guard.poll() is None
    assert not (backup / "statesave-24.11").exists()
    # The old backup's pod deleted (its slurmctld saves its state and exits): the copy follows.
    (state / "job_state").write_bytes(state_file(42, b"24.11 jobs, saved at exit"))
    controller.close()
    code, out = _done(guard)
    assert code == 0, out
    assert f"a slurmctld still answers at {old_backup}" in out and "no slurmctld answers any more" in out
    assert (backup / "statesave-24.11" / "job_state").read_bytes() == state_file(42, b"24.11 jobs, saved at exit")
    assert (backup / ".controllers-moved-24.11-26.05").exists()
    assert not (backup / ".state-guard.lock").exists()


def test_the_guards_that_follow_do_not_wait_on_the_new_controllers(tmp_path: Path, controller: socket.socket) -> None:
    """Pod 1's guard after pod 0's: pod 0's slurmctld 26.05 answers by then, and it has not
    rewritten job_state yet (slurmctld rewrites a file only when what it holds changes)."""
    _older_state(tmp_path)
    code, out = _done(_guard(tmp_path, [f"127.0.0.1:{free_port()}"]))
    assert code == 0, out
    new_primary = f"127.0.0.1:{controller.getsockname()[1]}"
    code, out = _done(_guard(tmp_path, [new_primary, f"127.0.0.1:{free_port()}"]))
    assert code == 0, out
    assert "had stopped before" in out and "kept as it is" in out and "still answers" not in out


def test_going_back_waits_for_every_controller_and_clears_the_mark(tmp_path: Path, controller: socket.socket) -> None:
    state = _older_state(tmp_path)
    assert _done(_guard(tmp_path, [f"127.0.0.1:{free_port()}"]))[0] == 0
    (state / "job_state").write_bytes(state_file(45, b"26.05 jobs"))
    alive = f"127.0.0.1:{controller.getsockname()[1]}"
    back = _guard(tmp_path, [alive], version="24.11", source="24.11")
    time.sleep(3)
    assert back.poll() is None
    assert (state / "job_state").read_bytes() == state_file(45, b"26.05 jobs")  # not restored yet
    controller.close()
    code, out = _done(back)
    assert code == 0, out
    assert (state / "job_state").read_bytes() == state_file(42, b"24.11 jobs")
    assert not (tmp_path / "backup" / ".controllers-moved-24.11-26.05").exists()


def test_the_guards_take_turns_and_a_restarted_pod_takes_its_own_turn_back(tmp_path: Path) -> None:
    _older_state(tmp_path)
    lock = tmp_path / "backup" / ".state-guard.lock"
    lock.mkdir(parents=True)
    (lock / "holder").write_text("drill-controller-1\n")
    waiting = _guard(tmp_path, [f"127.0.0.1:{free_port()}"])
    time.sleep(3)
    assert waiting.poll() is None and not (tmp_path / "backup" / "statesave-24.11").exists()
    (lock / "holder").unlink()
    lock.rmdir()  # the holder's turn ended
    code, out = _done(waiting)
    assert code == 0 and "waiting for the state-guard of drill-controller-1" in out, out
    # A holder of this pod's own name is an earlier start of it, killed in its turn.
    lock.mkdir()
    me = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    (lock / "holder").write_text(f"{me}\n")
    code, out = _done(_guard(tmp_path, [f"127.0.0.1:{free_port()}"]))
    assert code == 0 and "left by an earlier start of this pod: taken back" in out, out
    assert not lock.exists()
