"""`squeue` read with a JWT (SqueueJobs) against REAL slurmctld 24.11: every job record reads as
slurmrestd's `GET /jobs/` reports it, and the exporter's job families are the same series either
way, for a workload with running, pending (resources, dependency, begin time, a description
instead of a reason code, a state flag instead of the base state), held (user and admin),
completed, failed and cancelled jobs, pending arrays (one with a task split into a record of its
own) and running array tasks, two partitions, a job in both and one in a hidden partition, four
accounts (one never set) and two users; and it runs from the runtime image as its unprivileged
user with nothing but slurm.conf and a token."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sunk.runtime.exporter.collect import job_families
from sunk.runtime.exporter.loop import Exporter
from sunk.runtime.exporter.slurm import TextJobReads
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.harness.image_process import RuntimeImage
from sunk.runtime.slurmrest import JwtMinter, SlurmRestClient
from sunk.runtime.slurmrest.jobtext import JobRow, SqueueError, SqueueJobs, job_row

from sunk.spec.cluster import ClusterSpec

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

SPEC = ClusterSpec.model_validate(
    {
        "name": "jobs",
        "tenant": "acme",
        "nodesets": [{"name": "cpu", "replicas": 2, "cpus": 2, "memoryMib": 1024}],
        "partitions": [
            {"name": "batch", "nodesets": ["cpu"], "default": True},
            {"name": "debug", "nodesets": ["cpu"]},
        ],
        "login": {"enabled": False},
    }
)
SLEEP = "#!/bin/sh\nexec sleep 600\n"
NOW = 2_000_000_000
"""A fixed clock for both exporters' families (wait ages are `now - submit_time`)."""
WORKLOAD: dict[str, int] = {}
"""Job ids of the current cluster's workload, by what they are."""


def _wait(slurm: LocalSlurm, job: int, state: str, reason: str = "") -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out = slurm.run("squeue", "-h", "-t", "all", "-j", str(job), "-o", "%T|%r").stdout.strip()
        if out.startswith(f"{state}|") and reason in out:
            return
        time.sleep(0.3)
    raise AssertionError(f"job {job} never reached {state} {reason}: {out!r}")


@pytest.fixture(scope="module", params=["munge", "slurm"])
def slurm(request: pytest.FixtureRequest) -> Iterator[LocalSlurm]:
    """Both auth types: squeue loads the cluster's AuthType plugin even when SLURM_JWT makes it
    authenticate with auth/jwt, and the runtime image has neither key."""
    spec = SPEC.model_copy(update={"auth": SPEC.auth.model_copy(update={"type": request.param})})
    with LocalSlurm.start(spec, accounting=False, nodes=[SimNode("cpu-0", "cpu"), SimNode("cpu-1", "cpu")]) as cluster:
        done = cluster.sbatch("#!/bin/sh\ntrue\n", "-w", "cpu-1", "-A", "physics")
        failed = cluster.sbatch("#!/bin/sh\nexit 3\n", "-w", "cpu-1", "-p", "debug")
        running = cluster.sbatch(SLEEP, "-w", "cpu-0", "--exclusive", "-A", "physics")
        _wait(cluster, running, "RUNNING")
        # Requeued and held with a state flag: squeue's State says SPECIAL_EXIT, slurmrestd's
        # job_state ["PENDING", "SPECIAL_EXIT"] (read again as JSON).
        special = cluster.sbatch(SLEEP, "-w", "cpu-1", "-A", "bio")
        _wait(cluster, special, "RUNNING")
        cluster.run("scontrol", "requeuehold", "State=SpecialExit", str(special), check=True)
        _wait(cluster, special, "SPECIAL_EXIT")
        WORKLOAD["special"] = special
        # Two tasks of a throttled array run on cpu-1, the other four wait as one record.
        cluster.sbatch(SLEEP, "-w", "cpu-1", "-p", "debug", "--array=0-5%2", "-A", "bio")
        cluster.sbatch(SLEEP, "-w", "cpu-0", "-A", "physics")  # Resources
        cluster.sbatch(SLEEP, f"--dependency=afterok:{running}", "-A", "bio")  # Dependency
        cluster.sbatch(SLEEP, "-H", "-p", "debug")  # JobHeldUser
        cluster.sbatch(SLEEP, "-H", "-p", "batch,debug")  # two partitions: "batch,debug" both ways
        # A hidden partition's job (squeue -a, slurmrestd SHOW_ALL).
        cluster.run("scontrol", "create", "PartitionName=secret", "Nodes=cpu-0", "Hidden=YES", check=True)
        cluster.sbatch(SLEEP, "-H", "-p", "secret", "-A", "ops")
        admin = cluster.sbatch(SLEEP, "--begin=now+1hour", "-A", "bio")
        cluster.run("scontrol", "hold", str(admin), check=True)  # JobHeldAdmin, with an eligible time
        cluster.sbatch(SLEEP, "--begin=now+1hour")  # BeginTime
        cancelled = cluster.sbatch(SLEEP, "-H")
        cluster.run("scancel", str(cancelled), check=True)
        # A pending array on cpu-0, one task split into a record of its own (squeue merges it
        # back without -r; slurmrestd lists the two records).
        array = cluster.sbatch(SLEEP, "-w", "cpu-0", "--array=0-9", "-A", "bio")
        cluster.run("scontrol", "update", f"JobId={array}_3", "Comment=split", check=True)
        WORKLOAD["array"] = array
        # squeue prints a description for this one ("ReqNodeNotAvail, UnavailableNodes:cpu-1"):
        # read again as JSON.
        cluster.run("scontrol", "update", "NodeName=cpu-1", "State=DRAIN", "Reason=test", check=True)
        described = cluster.sbatch(SLEEP, "-w", "cpu-1", "-n", "2", "-A", "physics")
        # Another user's job (games: every image has it; Slurm 26.05 resolves no user named nobody).
        other = cluster.jail.run(["sbatch", "--parsable", "-p", "debug", "-w", "cpu-0"], input=SLEEP, user="games")
        assert other.returncode == 0, other.stderr
        assert cluster.wait_job(done) == "COMPLETED" and cluster.wait_job(failed, ("FAILED",)) == "FAILED"
        _wait(cluster, described, "PENDING", "ReqNodeNotAvail")
        yield cluster


@pytest.fixture(scope="module")
def rest(slurm: LocalSlurm) -> Iterator[SlurmRestClient]:
    with SlurmRestClient(
        slurm.rest_url, user="slurm", token=JwtMinter.from_file(slurm.jwt_key_path, "slurm")
    ) as client:
        yield client


def same_as_rest(reader: SqueueJobs, rest: SlurmRestClient) -> dict[int, JobRow]:
    """Both reads, retried if a job changed between them (the scheduler moves on its own)."""
    for _ in range(20):
        text, json = reader.jobs(), [job_row(j) for j in rest.list_jobs()]
        if sorted(text, key=lambda r: r.job_id) == sorted(json, key=lambda r: r.job_id):
            return {r.job_id: r for r in text}
        time.sleep(1)
    assert sorted(text, key=lambda r: r.job_id) == sorted(json, key=lambda r: r.job_id)
    return {}


def test_every_job_reads_as_slurmrestd_reports_it(slurm: LocalSlurm, rest: SlurmRestClient) -> None:
    # squeue from the slurmrestd image's root (the Slurm clients), authenticated only by SLURM_JWT.
    reader = SqueueJobs(
        JwtMinter.from_file(slurm.jwt_key_path, "slurm"),
        "/etc/slurm/slurm.conf",
        command=slurm.jail.command(["squeue"], role="slurmrestd", inherit=True),
    )
    rows = same_as_rest(reader, rest)
    # The workload is what the test meant, so the equality above covers every case it names.
    assert {r.state for r in rows.values()} == {"COMPLETED", "FAILED", "CANCELLED", "RUNNING", "PENDING"}
    assert {r.partition for r in rows.values()} == {"batch", "debug", "batch,debug", "secret"}
    assert {r.account for r in rows.values()} >= {"physics", "bio", "ops"} and {r.user_name for r in rows.values()} == {
        "root",
        "games",
    }
    pending = {r.state_reason for r in rows.values() if r.state == "PENDING"}
    assert {"Resources", "Dependency", "JobHeldUser", "JobHeldAdmin", "BeginTime", "ReqNodeNotAvail"} <= pending
    assert {"JobArrayTaskLimit"} & pending or {"Resources", "Priority"} & pending
    held = [r for r in rows.values() if r.state_reason in ("JobHeldUser", "JobHeldAdmin")]
    assert all(r.hold for r in held) and not any(r.hold for r in rows.values() if r.state == "RUNNING")
    assert [r.eligible_time for r in rows.values() if r.state_reason == "Dependency"] == [0]
    assert reader.json_rows >= 2  # the described and the flagged job went through squeue --json
    # The newest data_parser this release's squeue has (24.11's has no v0.0.45).
    assert reader.data_parser == {"26.05": "v0.0.45", "24.11": "v0.0.42"}[slurm.spec.slurm.version]
    special = next(j for j in rest.list_jobs() if j.job_id == WORKLOAD["special"])
    assert special.job_state == ("PENDING", "SPECIAL_EXIT") and rows[special.job_id].state == "PENDING"
    # The pending array is two records (its split task has its own); plain squeue shows one row.
    array = WORKLOAD["array"]
    split = [j.job_id for j in rest.list_jobs() if j.job_id != array and j.comment == "split"]
    assert len(split) == 1 and split[0] in rows and array in rows
    plain = slurm.run("squeue", "-h", "-a", "-t", "PD", "-j", str(array), "-o", "%A").stdout.split()
    assert plain == [str(array)]

    # The exporter's job families are the same series through either reader.
    via_squeue, via_rest = Exporter(TextJobReads(rest, reader)), Exporter(rest)
    for _ in range(5):
        text = job_families(via_squeue.slurm.list_jobs(), NOW, per_user=True)
        json = job_families(via_rest.slurm.list_jobs(), NOW, per_user=True)
        if text == json:
            break
        time.sleep(1)
    assert text == json
    assert sum(len(f.samples) for f in text) > 20


def test_from_the_runtime_image_with_a_token_only(
    slurm: LocalSlurm, rest: SlurmRestClient, runtime_image: RuntimeImage
) -> None:
    """The exporter's container: the runtime image's squeue as its user (no Slurm or munge key in
    the image), slurm.conf as the Deployment mounts it, SLURM_JWT minted from the JWT key."""
    assert f"AuthType=auth/{slurm.spec.auth.type}\n" in (slurm.etc / "slurm.conf").read_text()
    conf = runtime_image.secret_file(slurm.etc / "slurm.conf")
    command = runtime_image.jail.command(["squeue"], role="runtime", user=runtime_image.user, inherit=True)
    assert not (runtime_image.jail.root("runtime") / "etc/munge/munge.key").exists()
    reader = SqueueJobs(JwtMinter.from_file(slurm.jwt_key_path, "slurm"), conf, command=command)
    assert len(same_as_rest(reader, rest)) >= 12
    assert reader.json_rows >= 1  # the image's squeue has Slurm's JSON serialiser too
    # A token slurmctld can't verify is refused: the read fails (and the exporter falls back).
    forged = SqueueJobs(JwtMinter(b"x" * 32, "slurm"), conf, command=command)
    with pytest.raises(SqueueError, match=r"exit 1: .*authentication"):
        forged.jobs()
