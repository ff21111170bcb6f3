"""The upgrade drill on real daemons: a live Slurm 24.11 cluster moved to 26.05 by sunk.upgrade's
plan (runtime/harness/upgrade.py), losing nothing; and the two failures its rollbacks exist for.

One cluster for the module, in order (each test leaves it as the next expects): slurmdbd's
conversion fails and the dump restores the 24.11 database; slurmctld 26.05 crashes after it has
rewritten its state and the snapshot restores the files 24.11 starts from; then the whole upgrade
runs. Live throughout: a two-node job running (it ends only when the drill lets it, in the mixed
window, on its 24.11 slurmd), a job pending for resources, a held job, a job array waiting on the
running job, accounts, a user and a QOS limit, and 200 finished jobs in the accounting history.
"""

from __future__ import annotations

import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.harness.upgrade import Upgrade, UpgradeStopped, reported_versions, target_images

from sunk import naming
from sunk.images import release_of
from sunk.manifests import upgrade as scripts
from sunk.spec.cluster import ClusterSpec

pytestmark = pytest.mark.slurm

SOURCE, TARGET = "24.11", "26.05"
HISTORY = 200
"""Finished jobs in the accounting history before the upgrade (one array of `true`)."""

SPEC = ClusterSpec.model_validate(
    {
        "name": "drill",
        "tenant": "acme",
        "slurm": {"version": SOURCE},
        # Eight CPUs per node (claimed, config_overrides): the history's tasks run 24 at a time.
        "nodesets": [{"name": "cpu", "replicas": 3, "cpus": 8, "memoryMib": 2048}],
        "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
        "qos": [{"name": "capped", "maxTresPerJob": {"cpu": 1}}],
        "accounts": [{"name": "lab", "users": ["games"], "qos": ["normal", "capped"]}],
    }
)
FIELDS = "JobID,JobName,User,Account,Partition,QOS,State,ExitCode,Submit,Start,End,Elapsed,NNodes,NodeList,AllocTRES"
RELEASE = "/tmp/drill-release"
"""The running job ends once this file exists."""


@dataclass
class Live:
    slurm: LocalSlurm
    running: int
    held: int
    wide: int
    array: int
    refusal: str
    finished: dict[str, str]
    images: dict[str, Path]
    """26.05's unpacked images, looked up once for the three upgrades."""
    """sacct's line per job finished before the upgrade, by job id."""


def _games(slurm: LocalSlurm, command: str) -> tuple[int, str]:
    done = slurm.run("su", "-s", "/bin/sh", "games", "-c", f"cd /tmp && {command}")
    return done.returncode, (done.stdout + done.stderr).strip()


def _refusal(slurm: LocalSlurm) -> str:
    """What QOS capped (one CPU per job, DenyOnLimit) says to a two-CPU job."""
    code, out = _games(slurm, "sbatch -A lab -q capped -n 2 --wrap true")
    assert code != 0, out
    return out


def _sacct(slurm: LocalSlurm) -> dict[str, str]:
    out = slurm.run("sacct", "-a", "-X", "-n", "-P", "-S", "2000-01-01", "-o", FIELDS, check=True).stdout
    return {line.split("|", 1)[0]: line for line in out.splitlines()}


def _completed(slurm: LocalSlurm) -> int:
    return sum(1 for line in _sacct(slurm).values() if "|COMPLETED|" in line)


def _queue(slurm: LocalSlurm) -> dict[str, str]:
    """Job (array task) id -> state, as slurmctld has them."""
    out = slurm.run("squeue", "-h", "-a", "-r", "-o", "%i %T", check=True).stdout
    return dict(line.split() for line in out.splitlines())


def wait_until(what: str, ready: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"{what}: not after {timeout} s"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    nodes = [SimNode(f"cpu-{i}", "cpu") for i in range(3)]
    with LocalSlurm.start(SPEC, nodes) as slurm:
        code, out = _games(slurm, f"sbatch --parsable -A lab --array=1-{HISTORY} -o /dev/null --wrap true")
        assert code == 0, out
        wait_until("the history's jobs to end", lambda: not slurm.run("squeue", "-h", "-o", "%i").stdout.strip(), 300)
        wait_until("the history in sacct", lambda: _completed(slurm) >= HISTORY, 120)
        # Each step of the running job says which slurmd runs it and which slurmctld it sees.
        step = (
            "#!/bin/sh\n"
            f"while [ ! -e {RELEASE} ]; do sleep 0.5; done\n"
            "ctld=$(scontrol show config | sed -n 's/^SLURM_VERSION *= *//p')\n"
            'echo "$SLURMD_NODENAME slurmd=$(slurmd -V) slurmctld=$ctld"\n'
        )
        (slurm.root / "tmp/drill-step.sh").write_text(step)
        (slurm.root / "tmp/drill-step.sh").chmod(0o755)
        running = slurm.sbatch(
            "#!/bin/sh\nsrun -N2 /tmp/drill-step.sh\n", "-N2", "--exclusive", "-o", "/tmp/drill-run.out"
        )
        slurm.wait_job(running, ("RUNNING",))
        held = slurm.sbatch("#!/bin/sh\ntrue\n", "-H", "-o", "/dev/null")
        wide = slurm.sbatch("#!/bin/sh\nsrun true\n", "-N3", "-o", "/dev/null")
        array = slurm.sbatch("#!/bin/sh\ntrue\n", "--array=1-4", f"--dependency=afterok:{running}", "-o", "/dev/null")
        finished = _sacct(slurm)
        assert sum(1 for line in finished.values() if "|COMPLETED|" in line) >= HISTORY
        images = target_images(TARGET, slurm.roles)
        yield Live(slurm, running, held, wide, array, _refusal(slurm), finished, images)


def _release(live: Live) -> None:
    (live.slurm.root / RELEASE.lstrip("/")).write_text("go\n")


def _intact(live: Live) -> None:
    """Every job finished before the upgrade has its sacct line unchanged."""
    now = _sacct(live.slurm)
    changed = {
        job: (line, now.get(job))
        for job, line in live.finished.items()
        if "|COMPLETED|" in line and now.get(job) != line
    }
    assert not changed, changed


def _db_guard(live: Live, version: str, upgrade_from: str | None = None) -> subprocess.CompletedProcess[str]:
    """The start of slurmdbd's database guard as the pod of a stack on `version` runs it, on the
    real MariaDB (without upgradeFrom: no backup volume, its folder scratch space)."""
    slurm = {"version": version} | ({"upgradeFrom": upgrade_from} if upgrade_from else {})
    spec = ClusterSpec.model_validate({**SPEC.model_dump(by_alias=True, exclude_unset=True), "slurm": slurm})
    db = Upgrade(live.slurm, TARGET, images=live.images).database()
    script = scripts.db_guard(spec, "", "start", db=db, ready="/tmp/db-guard.ready")
    return live.slurm.jail.run(["/bin/sh", "-c", script], role="mariadb", timeout=120)


def _recorded(live: Live) -> str:
    """sunk's record of the release that runs on the accounting database."""
    db = Upgrade(live.slurm, TARGET, images=live.images).database()
    script = scripts.db_schema(db).replace("action=schema", "action=release")
    return live.slurm.jail.run(["/bin/sh", "-c", script], role="mariadb", timeout=60).stdout.strip()


def test_a_release_change_nobody_announced_is_refused_by_the_database_guard(live: Live) -> None:
    """The default moved to 26.05 under a stack that never pinned 24.11: the database of a cluster
    an earlier sunk deployed has no record of sunk's, and slurmctld 24.11 registered with it
    (cluster_table's rpc_version); the guard of a 26.05 pod refuses before slurmdbd starts."""
    assert _recorded(live).startswith("protocol ")
    moved = _db_guard(live, TARGET)
    print(f"\ndb-guard of an unannounced 26.05 pod (exit {moved.returncode}):\n{moved.stdout}{moved.stderr}")
    assert moved.returncode == 1
    assert "last ran Slurm 24.11 (cluster_table's rpc_version (nothing recorded yet)); this slurmdbd is 26.05" in (
        moved.stdout
    )
    assert "slurm.upgradeFrom announces no change" in moved.stderr
    assert _recorded(live) == f"protocol {42 << 8}"  # nothing written
    # The same release (a restart): one row written; then the record itself refuses the move.
    same = _db_guard(live, SOURCE)
    assert same.returncode == 0, same.stderr
    assert _recorded(live) == "release 24.11"
    again = _db_guard(live, TARGET)
    assert again.returncode == 1 and "last ran Slurm 24.11 (sunk's record in the database)" in again.stdout


def test_slurmdbd_conversion_fails_and_the_dump_restores_the_database(live: Live) -> None:
    slurm = live.slurm
    queue = _queue(slurm)
    tables = slurm.run("sacctmgr", "-n", "-P", "show", "qos", "format=name,maxtresperjob", check=True).stdout
    upgrade = Upgrade(slurm, TARGET, faults=("slurmdbd",), images=live.images)
    with pytest.raises(UpgradeStopped) as stopped:
        upgrade.run()
    print(f"\n{upgrade.timeline.text()}\n{stopped.value}")
    assert stopped.value.step == "slurmdbd"
    assert "ALTER command denied" in stopped.value.log  # the conversion itself failed
    assert upgrade.done == ["backup"]  # nothing after slurmdbd ran
    # The product's database guard, not the drill, did the rest: slurmdbd's start script marked
    # the failure, the db-guard restored the dump while the cause (ALTER refused) was still in
    # place, and checked the schema against the one recorded before the dump.
    guard = upgrade.db_guard
    print("\n".join(f"{k}: {v.strip()}" for k, v in guard.items()))
    assert "slurmdbd 26.05 exited with" in guard["failed"] and "before it served" in guard["failed"]
    assert "the one recorded before the dump" in guard["restore"]
    # Neither slurmdbd 26.05 started again nor a new pod of it starts until the stack goes back.
    assert guard["refused"].startswith("exit 1:") and "not started again" in guard["refused"]
    assert guard["new pod"].startswith("exit 1:")
    assert 'Set the stack back: slurm: {version: "24.11", upgradeFrom: "24.11"}' in guard["new pod"]
    # The stack set back: 24.11's guard set the copies aside, and 24.11 runs on the schema recorded.
    assert "set aside" in guard["back"]
    assert guard["schema after"] == guard["schema before"]
    # The guard had recorded 26.05 after the dump; the restore brought 24.11's row back with it.
    assert "recorded in the database: Slurm 24.11 runs on it" in guard["back"]
    assert _recorded(live) == "release 24.11"
    assert not (upgrade.backup / f"{upgrade.dump_name}.sql").exists()
    assert not (upgrade.backup / upgrade.snapshot_name).exists()
    versions = reported_versions(slurm)
    assert "is UP" in versions.pop("scontrol ping")
    assert versions == dict.fromkeys(versions, release_of(SOURCE).slurm), versions
    assert _queue(slurm) == queue
    _intact(live)
    assert slurm.run("sacctmgr", "-n", "-P", "show", "qos", "format=name,maxtresperjob", check=True).stdout == tables
    assert _refusal(slurm) == live.refusal


def test_slurmctld_crash_on_the_new_release_and_the_snapshot_restores_the_state(live: Live) -> None:
    slurm = live.slurm
    queue = _queue(slurm)
    upgrade = Upgrade(slurm, TARGET, faults=("slurmctld",), images=live.images)
    with pytest.raises(UpgradeStopped) as stopped:
        upgrade.run()
    print(f"\n{upgrade.timeline.text()}\n{stopped.value}\nrewritten by 26.05: {upgrade.rewritten}")
    assert stopped.value.step == "slurmctld"
    assert upgrade.done == ["backup", "slurmdbd", "snapshot"]
    # The crashed start had rewritten the job state in its own format; the restore put back
    # exactly the snapshot's files, and 24.11 started from them with every job as it was.
    assert "./job_state" in upgrade.rewritten
    assert upgrade.restored
    # Restored by the state guard of the old release's pod (the stack set back to 24.11), which
    # read the release that wrote the state from the files themselves.
    assert "is the copy taken on 24.11 again" in upgrade.guard_log, upgrade.guard_log
    assert reported_versions(slurm)["slurmctld"] == release_of(SOURCE).slurm
    assert _queue(slurm) == queue
    assert queue[str(live.running)] == "RUNNING"
    _intact(live)


def test_the_upgrade_loses_nothing(live: Live) -> None:
    slurm = live.slurm
    upgrade = Upgrade(slurm, TARGET, images=live.images)
    upgrade.job_wait = 120
    # The running job ends in the mixed window: slurmctld on 26.05, its own slurmd still 24.11.
    upgrade.hooks["node replaced"] = lambda: _release(live)
    timeline = upgrade.run()
    print(f"\nupgrade drill, Slurm {SOURCE} -> {TARGET}:\n{timeline.text()}")
    assert upgrade.done == list(upgrade.plan.names)
    # The schema the guard recorded before the conversion is 24.11's; the converted one differs
    # (same convert version, other table definitions).
    recorded = (upgrade.backup / f"{upgrade.dump_name}.schema").read_text().strip()
    converted = upgrade.schema()
    print(f"schema recorded on {SOURCE}: {recorded}; on {TARGET}: {converted}")
    assert recorded.split(":")[0] == converted.split(":")[0] and recorded != converted
    new = release_of(TARGET).slurm
    versions = reported_versions(slurm)
    assert "is UP" in versions.pop("scontrol ping")
    assert versions == dict.fromkeys(versions, new), versions
    assert {k for k in versions if k.startswith("slurmd ")} == {"slurmd cpu-0", "slurmd cpu-1", "slurmd cpu-2"}

    assert slurm.wait_job(live.running, timeout=120) == "COMPLETED"
    ran = (slurm.root / "tmp/drill-run.out").read_text().split("\n")
    steps = sorted(line for line in ran if line)
    assert len(steps) == 2
    for line in steps:  # on its old slurmd, under the new slurmctld
        assert f"slurmd=slurm-wlm {release_of(SOURCE).slurm}" in line and f"slurmctld={new}" in line, line
    reason = slurm.run("squeue", "-h", "-j", str(live.held), "-o", "%T %r", check=True).stdout.split()
    assert reason == ["PENDING", "JobHeldUser"]  # still held after the upgrade
    slurm.run("scontrol", "release", str(live.held), check=True)
    for job in (live.wide, live.held):
        assert slurm.wait_job(job, timeout=120) == "COMPLETED"
    wait_until("the array's tasks to end", lambda: not _queue(slurm), 120)

    def array_accounted() -> bool:  # slurmdbd records the ends shortly after slurmctld
        rows = _sacct(slurm)
        return all(rows.get(f"{live.array}_{task}", "").split("|")[6:7] == ["COMPLETED"] for task in range(1, 5))

    wait_until("the array's tasks COMPLETED in sacct", array_accounted, 120)
    accounted = _sacct(slurm)
    assert [accounted[f"{live.array}_{task}"].split("|")[6] for task in range(1, 5)] == ["COMPLETED"] * 4
    _intact(live)
    assert live.finished.keys() <= accounted.keys()
    assert _refusal(slurm) == live.refusal


def _next_job(job_state: Path) -> int:
    """The next job id slurmctld's job_state carries (after the packed "PROTOCOL_VERSION", the
    protocol version and the time saved: what state-guard.sh reads)."""
    head = job_state.read_bytes()[:35]
    assert head[4:20] == b"PROTOCOL_VERSION", head
    return int(struct.unpack(">I", head[31:35])[0])


def test_after_the_upgrade_a_plain_set_back_is_refused(live: Live) -> None:
    """On the cluster the drill moved to 26.05: the database guard of a 24.11 pod refuses the
    database 26.05 runs on; and the state guard of the stack set back refuses the snapshot taken
    before the upgrade once 26.05 has taken a job since (restoring it would lose that job)."""
    slurm = live.slurm
    assert _recorded(live) == "release 26.05"
    back = _db_guard(live, SOURCE)
    print(f"\ndb-guard of an unannounced 24.11 pod (exit {back.returncode}):\n{back.stdout}{back.stderr}")
    assert back.returncode == 1 and "last ran Slurm 26.05 (sunk's record in the database)" in back.stdout
    assert 'going back to 24.11 after an upgrade is announced too: slurm: {version: "24.11", upgradeFrom: "24.11"}' in (
        back.stderr
    )
    assert _db_guard(live, TARGET).returncode == 0  # the release it runs: nothing to say
    # The state: the snapshot the upgrade took (next job id as of 24.11), the live state of 26.05.
    state = slurm.role_root("slurmctld") / "var/spool/slurmctld"
    backup = slurm.jail.workdir / "shared" / "backup"  # the drill's backup volume
    snapshot = backup / naming.state_snapshot(SOURCE) / "job_state"
    kept = _next_job(snapshot)
    job = slurm.sbatch("#!/bin/sh\ntrue\n", "-o", "/dev/null")
    assert slurm.wait_job(job, timeout=120) == "COMPLETED"
    wait_until("slurmctld 26.05 to save the job's id", lambda: _next_job(state / "job_state") > job, 120)
    assert kept <= job < _next_job(state / "job_state")
    # The stack set back (24.11, upgradeFrom 24.11): its state guard, on a copy of the live state.
    copy = "/tmp/state-set-back"
    slurm.jail.run(
        ["/bin/sh", "-c", f"rm -rf {copy} && cp -a /var/spool/slurmctld {copy}"], role="slurmctld", timeout=60
    )
    set_back = {
        **SPEC.model_dump(by_alias=True, exclude_unset=True),
        "slurm": {"version": SOURCE, "upgradeFrom": SOURCE},
    }
    script = scripts.state_guard(ClusterSpec.model_validate(set_back), state=copy)
    refused = slurm.jail.run(["/bin/sh", "-c", script], role="slurmctld", timeout=60)
    print(f"state-guard of the set-back (exit {refused.returncode}):\n{refused.stdout}{refused.stderr}")
    assert refused.returncode == 1, refused.stdout
    assert f"the next job id is {_next_job(state / 'job_state')} in {copy} and {kept} in the copy" in refused.stderr
    assert "slurm.acceptJobLoss: true" in refused.stderr
    assert snapshot.exists()  # nothing restored, nothing set aside
