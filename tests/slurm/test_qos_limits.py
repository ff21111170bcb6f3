"""QOS limits, a partition's QOS and per-GPU defaults on real slurmdbd and slurmctld: each limit
the spec sets refuses a job at submission (DenyOnLimit) or holds it pending, with Slurm's own
reason; a limit the spec drops is cleared in slurmdbd."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from sunk.runtime.harness import LocalSlurm

from sunk.render.sacctmgr import render_sacctmgr_script
from sunk.spec.cluster import ClusterSpec
from sunk.spec.scheduling import AccountSpec, PartitionSpec, QosSpec
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

pytestmark = pytest.mark.slurm

ACME = load_stack("acme-dev", FIXTURE_STACKS).spec


def _spec(**limited: Any) -> ClusterSpec:
    """acme-dev with QOS `limited` (the test's limits, held pending unless denyOnLimit), QOS
    `capped` (one CPU per job) as partition `capped`'s QOS, per-GPU defaults on partition gpu,
    and account lab (user games) that may use `limited`."""
    qos = [*ACME.qos, QosSpec(**{"name": "limited", "deny_on_limit": False, **limited})]
    qos.append(QosSpec(name="capped", max_tres_per_job={"cpu": 1}))
    partitions = [
        p.model_copy(update={"def_cpu_per_gpu": 2, "def_mem_per_gpu": 1024}) if p.name == "gpu" else p
        for p in ACME.partitions
    ]
    partitions.append(PartitionSpec(name="capped", nodesets=["cpu"], qos="capped"))
    # games, not nobody: Slurm 26.05 resolves no user of that name.
    lab = AccountSpec(name="lab", users=["games"], qos=["normal", "limited"])
    return ACME.model_copy(update={"qos": qos, "partitions": partitions, "accounts": [lab]})


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    with LocalSlurm.start(_spec(), restapi=False) as cluster:
        yield cluster


def _apply(slurm: LocalSlurm, spec: ClusterSpec) -> None:
    (slurm.root / "tmp/qos.sh").write_text(render_sacctmgr_script(spec))
    done = slurm.run("sh", "/tmp/qos.sh", role="slurmdbd", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def _submit(slurm: LocalSlurm, *args: str) -> tuple[int, str]:
    """sbatch as games (account lab): (exit code, output)."""
    words = " ".join(args)
    done = slurm.run("su", "-s", "/bin/sh", "games", "-c", f"cd /tmp && sbatch --parsable -A lab {words}")
    return done.returncode, (done.stdout + done.stderr).strip()


def _reason(slurm: LocalSlurm, job: int, timeout: float = 120) -> str:
    """The pending job's reason once the scheduler has looked at it (`None` until then)."""
    deadline = time.monotonic() + timeout
    while True:
        reason = slurm.run("squeue", "-h", "-j", str(job), "-o", "%r", check=True).stdout.strip()
        if reason != "None" or time.monotonic() > deadline:
            return reason
        time.sleep(0.5)


def _second_job_waits(slurm: LocalSlurm, **limits: Any) -> str:
    """With `limits` on QOS limited: one job runs, a second like it pends; its reason."""
    _apply(slurm, _spec(**limits))
    try:
        code, out = _submit(slurm, "-q limited -n 1 --wrap 'sleep 300'")
        assert code == 0, out
        slurm.wait_job(int(out.split(";")[0]), ("RUNNING",))
        code, out = _submit(slurm, "-q limited -n 1 --wrap true")
        assert code == 0, out
        second = int(out.split(";")[0])
        slurm.wait_job(second, ("PENDING",))
        return _reason(slurm, second)
    finally:
        slurm.cancel_all()
        _apply(slurm, _spec())


@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        ({"max_tres_per_user": {"cpu": 1}}, "QOSMaxCpuPerUserLimit"),
        ({"max_tres_per_account": {"cpu": 1}}, "MaxCpuPerAccount"),
        ({"grp_tres": {"cpu": 1}}, "QOSGrpCpuLimit"),
        ({"max_jobs_per_user": 1}, "QOSMaxJobsPerUserLimit"),
    ],
    ids=lambda v: str(v),
)
def test_a_limit_holds_the_next_job_with_slurms_reason(slurm: LocalSlurm, limits: dict[str, Any], reason: str) -> None:
    assert _second_job_waits(slurm, **limits) == reason


def test_max_tres_per_job_refuses_at_submission_and_clears(slurm: LocalSlurm) -> None:
    _apply(slurm, _spec(max_tres_per_job={"cpu": 1}, deny_on_limit=True))
    code, out = _submit(slurm, "-q limited -n 2 --wrap true")
    assert code != 0 and "QOSMaxCpuPerJobLimit" in out, out
    code, out = _submit(slurm, "-q limited -n 1 --wrap true")
    assert code == 0, out
    assert slurm.wait_job(int(out.split(";")[0])) == "COMPLETED"
    _apply(slurm, _spec())  # dropped from the spec: cleared in slurmdbd
    shown = slurm.run("sacctmgr", "-n", "-P", "show", "qos", "limited", "format=maxtres,maxtrespu", check=True)
    assert shown.stdout.strip() == "|"
    code, out = _submit(slurm, "-q limited -n 2 --wrap true")
    assert code == 0, out
    slurm.cancel_all()


def test_max_submit_jobs_per_user_refuses_the_next_submission(slurm: LocalSlurm) -> None:
    _apply(slurm, _spec(max_submit_jobs_per_user=1))
    try:
        code, out = _submit(slurm, "-q limited --wrap 'sleep 300'")
        assert code == 0, out
        code, out = _submit(slurm, "-q limited --wrap true")
        assert code != 0 and "QOSMaxSubmitJobPerUserLimit" in out, out
    finally:
        slurm.cancel_all()
        _apply(slurm, _spec())


def test_a_partitions_qos_limits_every_job_there(slurm: LocalSlurm) -> None:
    """slurmctld started (it waited for QOS capped, which the setup made first), and the
    partition's QOS holds beside the job's own: two CPUs are refused in capped, not in batch."""
    assert "QOS=capped" in (slurm.root / "etc/slurm/slurm.conf").read_text()
    code, out = _submit(slurm, "-p capped -n 2 --wrap true")
    assert code != 0 and "QOSMaxCpuPerJobLimit" in out, out
    code, out = _submit(slurm, "-p capped -n 1 --wrap true")
    assert code == 0, out
    code, out = _submit(slurm, "-p batch -n 2 --wrap true")
    assert code == 0, out
    slurm.cancel_all()


def _alloc(slurm: LocalSlurm, *args: str) -> dict[str, str]:
    """What a running job of `args` on partition gpu was given (AllocTRES)."""
    job = slurm.sbatch("#!/bin/sh\nsleep 60\n", "-p", "gpu", *args)
    slurm.wait_job(job, ("RUNNING",))
    shown = slurm.run("scontrol", "show", "job", "-o", str(job), check=True).stdout
    alloc = next(w for w in shown.split() if w.startswith("AllocTRES="))
    return dict(kv.split("=", 1) for kv in alloc.removeprefix("AllocTRES=").split(","))


def test_per_gpu_defaults_give_a_gpu_job_its_cpus_and_memory(slurm: LocalSlurm) -> None:
    """DefCpuPerGPU=2 and DefMemPerGPU=1024 for a GPU job; a job without GPUs there keeps the
    partition's DefMemPerCPU (65536 MiB / 16 CPUs of the gpu NodeSet: 4G for its one CPU)."""
    try:
        tres = _alloc(slurm, "--gpus=1")
        assert (tres["cpu"], tres["mem"], tres["gres/gpu"]) == ("2", "1G", "1"), tres
        tres = _alloc(slurm, "-n", "1")
        assert (tres["cpu"], tres["mem"], tres.get("gres/gpu")) == ("1", "4G", None), tres
    finally:
        slurm.cancel_all()
