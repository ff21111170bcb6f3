"""The upgrade drill with a primary and a backup slurmctld (controller.replicas 2), on real daemons:
Slurm 24.11 -> 26.05 by sunk.upgrade's plan (runtime/harness/upgrade.py), both controllers on one
state folder (the harness's stand-in for the ReadWriteMany claims is a host folder, no NFS
behaviour). With backups the controller StatefulSet is OnDelete, so its pods are replaced only
once deleted; the drill deletes pod 0 first and the backup a few seconds later, and pod 0's state
guard must not copy the folder while the old backup still answers (it could take over and write
it mid-copy). The same guarantees as tests/slurm/test_upgrade_drill.py: the snapshot before the
conversion, the database guard's dump, the set-back after a crash of the new release, no job lost.

One cluster for the module, its tests in order: slurmctld 26.05 crashes after rewriting the state
and the 24.11 guard's restore brings both controllers back on 24.11; then the whole upgrade, after
which the backup still takes over from a dead primary, on 26.05."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.harness.upgrade import Upgrade, UpgradeStopped, reported_versions, target_images

from sunk.images import release_of
from sunk.spec.cluster import ClusterSpec

pytestmark = pytest.mark.slurm

SOURCE, TARGET = "24.11", "26.05"
SPEC = ClusterSpec.model_validate(
    {
        "name": "drill",
        "tenant": "acme",
        "slurm": {"version": SOURCE},
        "controller": {"replicas": 2, "stateStorage": {"accessMode": "ReadWriteMany", "storageClass": "nfs-client"}},
        "nodesets": [{"name": "cpu", "replicas": 3, "cpus": 8, "memoryMib": 2048}],
        "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
    }
)
RELEASE = "/tmp/drill-release"
"""The running job ends once this file exists."""
FIELDS = "JobID,State"


@dataclass
class Live:
    slurm: LocalSlurm
    running: int
    wide: int
    held: int
    finished: list[int]
    images: dict[str, Path]


def wait_until(what: str, ready: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"{what}: not after {timeout} s"
        time.sleep(0.5)


def _queue(slurm: LocalSlurm) -> dict[str, str]:
    out = slurm.run("squeue", "-h", "-a", "-r", "-o", "%i %T", check=True).stdout
    return dict(line.split() for line in out.splitlines())


def _accounted(slurm: LocalSlurm, jobs: list[int]) -> dict[str, str]:
    ids = ",".join(map(str, jobs))
    out = slurm.run("sacct", "-X", "-n", "-P", "-o", FIELDS, "-j", ids, check=True).stdout
    return dict(line.split("|", 1) for line in out.splitlines())


def _release(slurm: LocalSlurm) -> None:
    """The running job's steps end (it ends in the mixed window, on its old slurmd)."""
    (slurm.root / RELEASE.lstrip("/")).write_text("go\n")


def _controllers(slurm: LocalSlurm) -> list[str]:
    """`scontrol ping`'s verdict per SlurmctldHost, in order (26.05 adds a summary below them)."""
    lines = slurm.run("scontrol", "ping", timeout=120).stdout.splitlines()
    return [line.rsplit(" ", 1)[-1] for line in lines if line.startswith("Slurmctld(")]


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    nodes = [SimNode(f"cpu-{i}", "cpu") for i in range(3)]
    with LocalSlurm.start(SPEC, nodes) as slurm:
        assert len(slurm.controller_hosts) == 2
        finished = [slurm.sbatch("#!/bin/sh\ntrue\n", "-o", "/dev/null") for _ in range(3)]
        for job in finished:
            assert slurm.wait_accounted(job) == "COMPLETED"
        running = slurm.sbatch(
            f"#!/bin/sh\nsrun -N2 sh -c 'while [ ! -e {RELEASE} ]; do sleep 0.5; done'\n",
            "-N2",
            "--exclusive",
            "-o",
            "/dev/null",
        )
        slurm.wait_job(running, ("RUNNING",))
        wide = slurm.sbatch("#!/bin/sh\nsrun true\n", "-N3", "-o", "/dev/null")
        held = slurm.sbatch("#!/bin/sh\ntrue\n", "-H", "-o", "/dev/null")
        yield Live(slurm, running, wide, held, finished, target_images(TARGET, slurm.roles))


def test_a_crash_of_the_new_release_and_both_controllers_come_back_on_the_old(live: Live) -> None:
    slurm = live.slurm
    queue = _queue(slurm)
    upgrade = Upgrade(slurm, TARGET, faults=("slurmctld",), images=live.images)
    with pytest.raises(UpgradeStopped) as stopped:
        upgrade.run()
    print(f"\n{upgrade.timeline.text()}\n{stopped.value}")
    for pod, log in upgrade.guard_logs.items():
        print(f"state guard {pod}:\n{log}")
    assert stopped.value.step == "slurmctld"
    assert upgrade.done == ["backup", "slurmdbd", "snapshot"]
    # Pod 0's guard started while the old backup still answered: it waited, then copied once
    # every controller had stopped, and nothing wrote the folder after the copy.
    assert not upgrade.copied_while_a_peer_ran
    assert "a slurmctld still answers at" in upgrade.guard_logs["0"]
    assert "state-snapshot:" in upgrade.guard_logs["0"]
    assert "kept as it is" in upgrade.guard_logs["1"] and "state-snapshot:" not in upgrade.guard_logs["1"]
    # The crashed 26.05 had rewritten the state; the 24.11 guard restored the snapshot, and both
    # controllers run 24.11 again with every job as it was.
    assert "./job_state" in upgrade.rewritten
    assert upgrade.restored
    assert "is the copy taken on 24.11 again" in upgrade.guard_logs["back"]
    assert reported_versions(slurm)["slurmctld"] == release_of(SOURCE).slurm
    assert _controllers(slurm) == ["UP", "UP"]
    assert _queue(slurm) == queue


def test_the_upgrade_with_a_backup_loses_nothing(live: Live, capsys: pytest.CaptureFixture[str]) -> None:
    slurm = live.slurm
    upgrade = Upgrade(slurm, TARGET, images=live.images)
    upgrade.job_wait = 120
    upgrade.hooks["node replaced"] = lambda: _release(slurm)
    timeline = upgrade.run()
    with capsys.disabled():
        print(f"\nupgrade drill with a backup slurmctld, Slurm {SOURCE} -> {TARGET}:\n{timeline.text()}")
        for pod, log in upgrade.guard_logs.items():
            print(f"state guard {pod}:\n{log}")
    assert upgrade.done == list(upgrade.plan.names)
    # The restore had set the first attempt's copy aside: pod 0's guard waited on the old backup
    # again and took a fresh one; pod 1's found it.
    assert not upgrade.copied_while_a_peer_ran
    assert "a slurmctld still answers at" in upgrade.guard_logs["0"]
    assert "state-snapshot:" in upgrade.guard_logs["0"]
    assert "kept as it is" in upgrade.guard_logs["1"] and "still answers" not in upgrade.guard_logs["1"]
    new = release_of(TARGET).slurm
    versions = reported_versions(slurm)
    ping = versions.pop("scontrol ping")
    assert ping.count("is UP") == 2, ping
    assert versions == dict.fromkeys(versions, new), versions
    # Every job: the running one ends on its old slurmd, the others start and end; sacct has
    # each once, the ones finished before the upgrade included.
    assert slurm.wait_job(live.running, timeout=120) == "COMPLETED"
    slurm.run("scontrol", "release", str(live.held), check=True)
    for job in (live.wide, live.held):
        assert slurm.wait_job(job, timeout=120) == "COMPLETED"
    jobs = [*live.finished, live.running, live.wide, live.held]
    for job in jobs:
        assert slurm.wait_accounted(job) == "COMPLETED"
    assert _accounted(slurm, jobs) == {str(j): "COMPLETED" for j in jobs}
    # And the backup still takes over, now on 26.05.
    slurm.kill_slurmctld(0)
    started = time.monotonic()
    while slurm.run("sbatch", "--wrap", "true", "-o", "/dev/null", timeout=300).returncode != 0:
        assert time.monotonic() - started < 120, slurm.log(slurm.controller_process(1))
        time.sleep(0.2)
    with capsys.disabled():
        print(
            f"primary killed after the upgrade: sbatch accepted by the 26.05 backup in {time.monotonic() - started:.1f} s"
        )
    assert _controllers(slurm) == ["DOWN", "UP"]
