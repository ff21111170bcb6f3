"""A primary and a backup slurmctld (controller.replicas 2) on real daemons: two slurmctld, each
under its pod's hostname on its own address, sharing one StateSaveLocation (the harness's stand-in
for the ReadWriteMany claim is one folder; no NFS behaviour). The primary is SIGKILLed, as when
its Node loses power: the backup takes control, the jobs it had run on, and clients follow the
SlurmctldHost list with no change. Then the primary comes back and takes control again.

The release is the stack's (the default), or the one SUNK_HARNESS_SLURM_VERSION names (the
`acme_spec` fixture): failover
on 24.11 is this module with SUNK_HARNESS_SLURM_VERSION=24.11, on demand (the local cluster's HA
module fails over on 26.05 only; docs/how-to/ha.md).

One cluster boot for the module; the tests run in order and each starts from the state the one
before left. Times are printed, never asserted (bench/ha_bench.py measures them)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sunk.runtime.harness import LocalSlurm

from sunk import naming
from sunk.manifests import scripts
from sunk.render.slurm_conf import SLURMCTLD_TIMEOUT_HA
from sunk.spec.cluster import ClusterSpec
from tests.support.slurmrelease import slurmctld_release

pytestmark = pytest.mark.slurm

BACKUP = LocalSlurm.controller_process(1)


@pytest.fixture(scope="module")
def ha(acme_spec: ClusterSpec) -> Iterator[LocalSlurm]:
    data = acme_spec.model_dump(mode="json", by_alias=True, exclude_unset=True)
    controller = data.setdefault("controller", {})
    controller["replicas"] = 2
    controller["stateStorage"] = {"accessMode": "ReadWriteMany", "storageClass": "nfs-client"}
    with LocalSlurm.start(ClusterSpec.model_validate(data)) as slurm:
        yield slurm


def ping(slurm: LocalSlurm) -> list[str]:
    return slurm.run("scontrol", "ping", timeout=120).stdout.splitlines()[:2]


def is_primary(slurm: LocalSlurm, index: int) -> bool:
    """The pod's readiness probe, run as the kubelet runs it: in that slurmctld's namespaces."""
    probe = scripts.sh(scripts.primary_probe())
    name = slurm.controller_process(index)
    if index == 0:
        done = slurm.jail.run(probe, role="slurmctld", timeout=60)
    else:
        done = slurm.jail.run_beside(name, probe, timeout=60)
    return done.returncode == 0


def state_saved(slurm: LocalSlurm, since: float) -> None:
    """Wait until slurmctld has written its job state after `since`: a job accepted in the last
    seconds before a hard crash is in no state file yet (Slurm writes them every ~3 s, measured)
    and is lost with the crashed primary, HA or not."""
    path = slurm.role_root("slurmctld") / naming.STATE_SAVE.lstrip("/") / "job_state"
    deadline = time.monotonic() + 60
    while not (path.exists() and path.stat().st_mtime > since):
        assert time.monotonic() < deadline, "slurmctld wrote no job state"
        time.sleep(0.05)


def until_accepted(slurm: LocalSlurm, script: str) -> tuple[int, float]:
    """sbatch from the login root, retried until accepted: (job id, seconds it took)."""
    started = time.monotonic()
    while True:
        done = slurm.run("sbatch", "--parsable", "--wrap", script, timeout=300)
        if done.returncode == 0:
            return int(done.stdout.strip().split(";")[0]), time.monotonic() - started
        if time.monotonic() - started > 120:
            states = {name: proc.poll() for name, proc in slurm.jail.processes.items() if name.startswith("slurmctld")}
            raise AssertionError(f"{done.stderr}\n{states}\n{slurm.log(BACKUP)}")


def test_two_controllers_one_primary(ha: LocalSlurm) -> None:
    assert ha.controller_hosts[1] == naming.controller_host(ha.spec, 1)
    # Both answer pings: `scontrol ping` labels them by place in the list, so it can't say
    # which one is in control; the primary's mark (SlurmctldPrimaryOnProg) does.
    assert [line.rsplit(" ", 1)[-1] for line in ping(ha)] == ["UP", "UP"]
    running = slurmctld_release(ha)
    assert running.startswith(ha.spec.slurm.version + "."), (running, ha.spec.slurm.version)
    assert is_primary(ha, 0)
    assert not is_primary(ha, 1)


def test_backup_takes_over_when_the_primary_dies(ha: LocalSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    cpus = str(len([n for n in ha.nodes if n.nodeset == "cpu"]))
    out = Path("/tmp")
    running = ha.sbatch("#!/bin/sh\nsleep 20\necho ran >> /tmp/ha-$SLURM_JOB_ID\n", "-C", "cpu", "-N", cpus)
    ha.wait_job(running, {"RUNNING"})
    pending = ha.sbatch("#!/bin/sh\necho ran >> /tmp/ha-$SLURM_JOB_ID\n", "-C", "cpu", "-N", cpus)
    assert ha.job_state(pending) == "PENDING"
    state_saved(ha, time.time())

    ha.kill_slurmctld(0)
    arriving, outage = until_accepted(ha, "echo ran >> /tmp/ha-$SLURM_JOB_ID")

    with capsys.disabled():
        print(
            f"\nSIGKILL of the primary to sbatch accepted by the backup: {outage:.1f} s (SlurmctldTimeout={SLURMCTLD_TIMEOUT_HA})"
        )
    assert ping(ha)[0].endswith("is DOWN") and ping(ha)[1].endswith("is UP")
    assert is_primary(ha, 1)
    # The running job kept running on slurmd and completes; the pending one starts after it and
    # the one that arrived during the takeover after that: each ran exactly once.
    for job in (running, pending, arriving):
        assert ha.wait_job(job, timeout=180) == "COMPLETED"
        assert ha.wait_accounted(job) == "COMPLETED"
        assert (ha.root / out.relative_to("/") / f"ha-{job}").read_text() == "ran\n"
    records = ha.run("sacct", "-X", "-n", "-P", "-o", "JobID", "-j", f"{running},{pending},{arriving}").stdout.split()
    assert sorted(records) == sorted(str(j) for j in (running, pending, arriving))


def test_the_primary_takes_control_back(ha: LocalSlurm, capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    ha.jail.spawn("slurmctld", ["slurmctld", "-D"], role="slurmctld")
    # The returning primary asks the backup for control (REQUEST_CONTROL); the backup saves its
    # state and stands by, then the primary loads it: clients wait meanwhile.
    while not (is_primary(ha, 0) and not is_primary(ha, 1)):
        assert time.monotonic() - started < 300, ha.log("slurmctld") + ha.log(BACKUP)
        time.sleep(0.5)
    job, _ = until_accepted(ha, "true")
    with capsys.disabled():
        print(f"\nprimary restarted to sbatch accepted by it again: {time.monotonic() - started:.1f} s")
    assert ha.wait_job(job, timeout=120) == "COMPLETED"
    assert [line.rsplit(" ", 1)[-1] for line in ping(ha)] == ["UP", "UP"]


def test_the_fences_stop_file_stops_the_primary_and_the_backup_takes_over(
    ha: LocalSlurm, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fence's way of stopping slurmctld (docs/how-to/ha.md, the fence), on a real slurmctld:
    the watcher SlurmctldPrimaryOnProg started sends SIGTERM to its parent, which must be the
    primary slurmctld itself, once the stop file appears in its /run/slurmctld."""
    assert is_primary(ha, 0)
    started = time.monotonic()
    ha.jail.run(["/bin/sh", "-c", f"echo 'the Lease is held by another' > {naming.FENCE_STOP}"], role="slurmctld")
    primary = ha.jail.processes[ha.controller_process(0)]
    while primary.poll() is None:
        assert time.monotonic() - started < 30, ha.log("slurmctld")
        time.sleep(0.2)
    stopped = time.monotonic() - started
    assert "Terminate signal SIGTERM received" in ha.log("slurmctld", lines=1000)  # the watcher's, not a crash
    job, outage = until_accepted(ha, "true")
    with capsys.disabled():
        print(
            f"\nfence stop file to the primary's exit: {stopped:.1f} s; sbatch accepted by the backup after {outage:.1f} s"
        )
    assert is_primary(ha, 1)
    assert ha.wait_job(job, timeout=120) == "COMPLETED"
