"""The Slurm 24.11 -> 26.05 upgrade on a local cluster, applied as a GitOps tool would (`sunk local
apply`: the whole render at once), so the order is the pods' own (sunk.manifests.upgrade): a live
24.11 cluster with a two-node job running, a job pending for nodes, a held job, a job array and a
QOS limit. One cluster boot for the module, its tests in order (each leaves the cluster on 24.11
with those jobs as they were, which the next expects):

0. the stack without slurm.version applied after the default moved to 26.05: both guards of the
   26.05 pods refuse, neither daemon starts, and the stack pinned back finds every job as it was;
1. slurmdbd 26.05's conversion fails (its database user refused ALTER in MariaDB, from outside):
   the db-guard sidecar restores the dump, nothing after slurmdbd moves, and the stack set back
   brings slurmdbd 24.11 up on the restored database with sacct and the QOS as before;
2. slurmctld 26.05 crashes at its start (SIGABRT through `kubectl exec`, once it has rewritten
   the state files): the stack set back, the 24.11 pod's state-guard restores the snapshot and
   slurmctld 24.11 starts from it with every job as it was;
3. the upgrade itself: the running job completes on its old slurmd, the pending ones start, sacct
   keeps every old job, the QOS refuses what it refused, and every daemon reports 26.05;
4. a plain set-back after 26.05 took a job: the state guard refuses the stale snapshot, the
   database guard the converted database.

Each prints its timeline: when each step was seen, and what each pod's upgrade containers did."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk import naming
from sunk.images import release_of
from tests.support.localcluster import LocalCluster, booted, sunk

pytestmark = pytest.mark.slurm

SOURCE, TARGET = "24.11", "26.05"
NS = "acme-drill"
STACK: dict[str, Any] = {
    "config": {
        "sunk:operator": True,
        "sunk:cluster": {
            "name": "drill",
            "tenant": "acme",
            "slurm": {"version": SOURCE},
            "login": {"serviceType": "ClusterIP"},
            "nodesets": [{"name": "cpu", "replicas": 3, "cpus": 2, "memoryMib": 2048}],
            "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
            "qos": [{"name": "capped", "maxTresPerJob": {"cpu": 1}}],
            "accounts": [{"name": "lab", "users": ["root"], "qos": ["normal", "capped"]}],
        },
    }
}
# A two-node job that spans the upgrade: its steps end once slurmctld answers at 26.05 and the
# test has set the job's comment to `release` (slurmctld 26.05 answers for a moment in the second
# failure too, and the job must outlive that).
RUNNING_JOB = (
    "cat > /tmp/upgrade-job.sh <<'EOF'\n"
    "#!/bin/bash\n"
    'step=\'until scontrol show config | grep -q "^SLURM_VERSION *= *26.05" '
    "&& scontrol show job $SLURM_JOB_ID | grep -q Comment=release; do sleep 2; done'\n"
    'srun bash -c "$step"\n'
    "EOF\n"
    "sbatch --parsable -A lab -N2 --exclusive -t 45 -o /dev/null /tmp/upgrade-job.sh"
)

UPGRADE_INIT = ("db-guard", "wait-slurmdbd", "state-guard", "wait-slurmctld")
"""The init containers an upgrade adds (sunk.manifests.upgrade); db-guard is a native sidecar."""


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class Drill(LocalCluster):
    interval = 2.0

    def __init__(self, env: dict[str, str], kubeconfig: str, folder: Path) -> None:
        super().__init__(env, kubeconfig)
        self.folder = folder
        self.started = time.monotonic()
        self.timeline: list[tuple[float, str]] = []

    def mark(self, what: str) -> None:
        self.timeline.append((time.monotonic() - self.started, what))

    def begin(self) -> None:
        """A new timeline (one per test), its seconds counted from here."""
        self.started, self.timeline = time.monotonic(), []

    def print_timeline(self, title: str) -> None:
        print(f"\n{title}:")
        for seconds, what in self.timeline:
            print(f"  {seconds:7.1f} s  {what}")

    def apply(self, version: str, upgrade_from: str) -> None:
        """The stack with slurm: {version, upgradeFrom}, applied with `sunk local apply`."""
        what = "set back" if version == upgrade_from else "upgrade"
        self.apply_slurm({"version": version, "upgradeFrom": upgrade_from}, what)

    def apply_slurm(self, slurm: dict[str, str], what: str) -> None:
        """The stack with `slurm` as its slurm: mapping, applied with `sunk local apply`."""
        cluster = {**STACK["config"]["sunk:cluster"], "slurm": slurm}
        stack = {**STACK, "config": {**STACK["config"], "sunk:cluster": cluster}}
        path = self.folder / "Pulumi.acme-drill.yaml"
        path.write_text(yaml.safe_dump(stack, sort_keys=False))
        self.mark(f"apply ({what}): slurm {slurm}")
        applied = sunk("local", "apply", str(path), env=self.env)
        assert applied.returncode == 0, applied.stderr
        self.mark("apply returned")

    def pods(self, component: str) -> list[dict[str, Any]]:
        """The component's pods not being deleted, oldest first."""
        listed = self.kubectl("get", "pods", "-n", NS, "-l", f"app.kubernetes.io/component={component}", "-o", "json")
        live = [p for p in json.loads(listed.stdout)["items"] if not p["metadata"].get("deletionTimestamp")]
        return sorted(live, key=lambda p: (p["metadata"]["creationTimestamp"], p["metadata"]["name"]))

    def newest(self, component: str) -> dict[str, Any]:
        pods = self.pods(component)
        assert pods, f"no {component} pod"
        return pods[-1]

    def logs(self, pod: str, container: str, previous: bool = False) -> str:
        args = ["logs", "-n", NS, pod, "-c", container, *(["-p"] if previous else [])]
        return self.kubectl(*args, check=False).stdout

    def exec(self, pod: str, container: str, script: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.kubectl("exec", "-n", NS, pod, "-c", container, "--", "sh", "-c", script, check=check)

    def mariadb(self, sql: str) -> None:
        """`sql` run by MariaDB's root, inside its pod (the root password from the file its
        container has, passed to the client in its environment)."""
        pod = self.newest("mariadb")["metadata"]["name"]
        script = f'MYSQL_PWD="$(cat "$MARIADB_ROOT_PASSWORD_FILE")" mariadb -uroot -e "{sql}"'
        self.exec(pod, "mariadb", script)

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        return super().kubectl(*args, stdin=stdin, check=check, timeout=timeout)

    def login(self, script: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`script` in a login pod that serves (while an upgrade holds the new one in its init
        containers, the old one serves)."""
        serving = [
            p["metadata"]["name"]
            for p in self.pods("login")
            if any(c["name"] == "sshd" and c.get("ready") for c in p["status"].get("containerStatuses") or [])
        ]
        if not serving:
            assert not check, "no login pod serves"
            return subprocess.CompletedProcess([], 1, "", "no login pod serves")
        return self.kubectl("exec", "-n", NS, serving[-1], "-c", "sshd", "--", "bash", "-c", script, check=check)

    def waited(self, what: str) -> None:
        self.mark(what)

    def sbatch(self, options: str) -> str:
        done = self.wait(
            f"sbatch {options}",
            lambda: self.login(f"sbatch --parsable -o /dev/null {options}", check=False),
            lambda d: d.returncode == 0,
            120,
        )
        return str(done.stdout.strip())

    def states(self) -> dict[str, str]:
        out = self.login("squeue -h -a -r -o '%i %T'", check=False).stdout
        return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)

    def sacct(self) -> dict[str, str]:
        out = self.login(
            "sacct -a -X -n -P -S 2000-01-01 -o JobID,JobName,Account,QOS,State,Submit,NNodes", check=False
        )
        return {line.split("|", 1)[0]: line for line in out.stdout.splitlines()}

    def versions(self) -> dict[str, str]:
        """What each daemon reports, asked through login's clients."""
        ctld = self.login("scontrol show config | sed -n 's/^SLURM_VERSION *= *//p'", check=False).stdout.strip()
        dbd = self.login("sacctmgr -n show config | sed -n 's/^SLURMDBD_VERSION *= *//p'", check=False).stdout.strip()
        nodes = self.login("sinfo -h -N -o '%N %v'", check=False).stdout.splitlines()
        out = {"slurmctld": ctld, "slurmdbd": dbd}
        out |= {f"slurmd {n.split()[0]}": n.split()[1] for n in nodes if len(n.split()) == 2}
        return out

    def slurmd_images(self) -> dict[str, str]:
        listed = self.kubectl("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=slurmd", "-o", "json")
        return {
            p["metadata"]["name"]: p["spec"]["containers"][0]["image"]
            for p in json.loads(listed.stdout)["items"]
            if not p["metadata"].get("deletionTimestamp")
        }

    def init_containers(self, component: str) -> dict[str, tuple[float, str]]:
        """The upgrade's init containers of the component's newest pod: name -> (seconds it held the pod,
        its log). A sidecar still running held it until the main container started."""
        pod = self.newest(component)
        main = (pod["status"].get("containerStatuses") or [{}])[0].get("state") or {}
        main_started = (main.get("running") or main.get("terminated") or {}).get("startedAt")
        out = {}
        for status in pod["status"].get("initContainerStatuses") or []:
            ended = (status.get("state") or {}).get("terminated")
            running = (status.get("state") or {}).get("running")
            if status["name"] in UPGRADE_INIT and (ended or running):
                if ended:
                    seconds = _seconds(ended["finishedAt"]) - _seconds(ended["startedAt"])
                elif running and main_started:
                    seconds = _seconds(main_started) - _seconds(running["startedAt"])
                else:
                    seconds = 0.0
                log = self.kubectl("logs", "-n", NS, pod["metadata"]["name"], "-c", status["name"]).stdout
                out[status["name"]] = (seconds, log)
        return out

    def refusal(self) -> str:
        done = self.login("sbatch -A lab -q capped -n 2 -o /dev/null --wrap true", check=False)
        assert done.returncode != 0, done.stdout
        return done.stderr.strip()


@pytest.fixture(scope="module")
def drill(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drill]:
    folder = tmp_path_factory.mktemp("local-upgrade")
    builds = [("--slurm", release) for release in (SOURCE, TARGET)]
    with booted(folder, STACK, stack_name="acme-drill", builds=builds, up=("--no-wait",)) as boot:
        assert boot.up.returncode == 0, boot.up.stderr + boot.up.stdout
        running = Drill(boot.env, boot.kubeconfig, folder)
        running.wait(
            "3 nodes idle on 24.11",
            lambda: running.login("sinfo -h -N -o '%T %v'", check=False).stdout.splitlines(),
            lambda lines: sorted(lines) == [f"idle {release_of(SOURCE).slurm}"] * 3,
            600,
        )
        yield running


@dataclass
class Live:
    """What the cluster runs before any upgrade attempt, and what each attempt must keep."""

    history: str
    running: str
    pending: str
    held: str
    array: str
    before: dict[str, str]
    """sacct's line per job, as on 24.11 before any attempt."""
    refusal: str
    queue: dict[str, str]
    """squeue's state per job (array tasks one by one)."""
    converted: list[str] = field(default_factory=list)
    """Set by the slurmctld failure: slurmdbd 26.05 converted the database and served from it."""


@pytest.fixture(scope="module")
def live(drill: Drill) -> Live:
    drill.begin()
    history = drill.sbatch("-A lab --array=1-20 --wrap true")
    drill.wait("the history done", drill.states, lambda q: not any(j.split("_")[0] == history for j in q), 180)
    drill.wait(  # slurmdbd records the ends shortly after slurmctld lets the tasks go
        "the history COMPLETED in sacct",
        drill.sacct,
        lambda s: sum(1 for j, line in s.items() if j.split("_")[0] == history and "|COMPLETED|" in line) >= 20,
        120,
    )
    running = drill.login(RUNNING_JOB).stdout.strip()
    drill.wait(f"job {running} running", drill.states, lambda q: q.get(running) == "RUNNING", 120)
    pending = drill.sbatch("-A lab -N3 --exclusive --wrap true")
    held = drill.sbatch("-A lab --hold --wrap true")
    array = drill.sbatch(f"-A lab --array=1-4 --dependency=afterok:{running} --wrap true")
    before = drill.sacct()
    assert sum(1 for line in before.values() if "|COMPLETED|" in line) >= 20
    queue = drill.states()
    assert queue[pending] == "PENDING" and queue[held] == "PENDING" and queue[running] == "RUNNING"
    return Live(history, running, pending, held, array, before, drill.refusal(), queue)


def _queue_as_before(drill: Drill, live: Live) -> None:
    """Every job slurmctld had before the attempts, in the same state; the held one still held."""
    queue = drill.states()
    assert {j: queue.get(j) for j in live.queue} == live.queue, queue
    assert drill.login(f"squeue -h -j {live.held} -o '%T %r'").stdout.split() == ["PENDING", "JobHeldUser"]


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    """The status of the pod's container or init container `name` ({} before it has one)."""
    statuses = [*(pod["status"].get("initContainerStatuses") or []), *(pod["status"].get("containerStatuses") or [])]
    return next((c for c in statuses if c["name"] == name), {})


def _image_of(pod: dict[str, Any], container: str) -> str:
    return str(next(c["image"] for c in pod["spec"]["containers"] if c["name"] == container))


def _refused(drill: Drill, component: str, container: str) -> tuple[str, str]:
    """The newest pod of `component` once its guard `container` exited 1: (pod, the guard's log)."""

    def seen() -> tuple[str, str, int]:
        pod = drill.newest(component)
        status = _container(pod, container)
        ends = [(status.get(k) or {}).get("terminated") or {} for k in ("state", "lastState")]
        code = next((e["exitCode"] for e in ends if "exitCode" in e), -1)
        name = pod["metadata"]["name"]
        return name, drill.logs(name, container) + drill.logs(name, container, previous=True), code

    name, log, _ = drill.wait(f"{component}'s {container} refused", seen, lambda s: s[2] == 1, 600)
    return name, log


def test_0_a_stack_that_never_pinned_its_release_is_refused_when_the_default_moves(drill: Drill, live: Live) -> None:
    """The stack without slurm.version, applied after sunk's default moved from 24.11 to 26.05 (a
    GitOps apply: no previous deployment to compare with): the 26.05 pods' guards refuse before
    slurmdbd or slurmctld touches anything (docs/upgrading.md, Every release change guarded); the
    stack pinned back to 24.11 brings both back, every job as it was."""
    old = release_of(SOURCE).slurm
    drill.begin()
    drill.apply_slurm({}, "the default release, unpinned")
    dbd, db_log = _refused(drill, "accounting", "db-guard")
    ctld, state_log = _refused(drill, "controller", "state-guard")
    assert "the accounting database last ran Slurm 24.11 (sunk's record in the database); this slurmdbd is 26.05" in (
        db_log
    )
    assert "slurm.upgradeFrom announces no change" in db_log
    assert "slurm.upgradeFrom is unset: nobody announced the upgrade" in state_log
    assert 'to upgrade, announce it: slurm: {version: "26.05", upgradeFrom: "24.11"}' in state_log
    # Neither daemon of 26.05 ran: the database and the state are 24.11's.
    assert not (_container(drill.newest("accounting"), "slurmdbd").get("state") or {}).get("running")
    assert not (_container(drill.newest("controller"), "slurmctld").get("state") or {}).get("running")
    drill.mark("26.05's db-guard and state-guard refused; neither slurmdbd nor slurmctld 26.05 started")

    drill.apply_slurm({"version": SOURCE}, "pinned back")
    drill.kubectl("delete", "pod", "-n", NS, ctld, "--wait=false")  # never Ready: a forced rollback
    drill.wait("slurmdbd answers at 24.11", lambda: drill.versions().get("slurmdbd"), lambda v: v == old, 600)
    drill.wait("slurmctld answers at 24.11", lambda: drill.versions().get("slurmctld"), lambda v: v == old, 600)
    drill.wait("sacct as before", drill.sacct, lambda s: s == live.before, 120)
    _queue_as_before(drill, live)
    drill.print_timeline("local cluster, the stack without slurm.version after the default moved to 26.05")
    print(f"  db-guard ({dbd}): {[line for line in db_log.splitlines() if 'db-guard:' in line][:2]}")
    print(f"  state-guard ({ctld}): {[line for line in state_log.splitlines() if 'state-guard:' in line][:1]}")


def test_a_failed_slurmdbd_conversion_is_restored_and_nothing_after_it_moves(drill: Drill, live: Live) -> None:
    """slurmdbd 26.05 converts a database its user may not ALTER (revoked in MariaDB by its root,
    as an operator's mistake would): the conversion fails in the middle, the db-guard sidecar
    restores the dump taken on 24.11, slurmctld's pod stays held by wait-slurmdbd (its state
    untouched), and no slurmd pod is replaced. The stack set back (24.11, upgradeFrom 24.11)
    brings slurmdbd 24.11 up on the restored database, every job as it was."""
    old, new = release_of(SOURCE).slurm, release_of(TARGET).slurm
    drill.begin()
    slurmd = drill.slurmd_images()
    db, user = "slurm_acct_db", "slurm"
    drill.mariadb(f"REVOKE ALTER ON {db}.* FROM '{user}'@'%'; FLUSH PRIVILEGES;")
    drill.mark("MariaDB: ALTER revoked from slurmdbd's user")
    try:
        drill.apply(TARGET, SOURCE)

        def accounting() -> tuple[str, str]:
            pod = drill.newest("accounting")
            name = pod["metadata"]["name"]
            return name, drill.logs(name, "db-guard")

        name, guard = drill.wait(
            "db-guard restored the dump after slurmdbd 26.05's failed conversion",
            accounting,
            lambda seen: "the database's schema is the one recorded before the dump" in seen[1],
            600,
        )
        failed = drill.exec(name, "db-guard", "cat /backup/slurm_acct_db-24.11.failed", check=False).stdout
        refused = drill.wait(
            "slurmdbd 26.05 started again: refused by its start script",
            lambda: drill.logs(name, "slurmdbd") + drill.logs(name, "slurmdbd", previous=True),
            lambda log: "not started again" in log,
            300,
        )
        # Nothing after slurmdbd moved: slurmctld's new pod is held by wait-slurmdbd (its state
        # guard, which copies the state before a conversion, never ran), no slurmd pod replaced.
        # The old slurmctld pod may still be terminating (its grace period is 120 s): wait for the
        # StatefulSet's new one, of 26.05, to come up to its wait-slurmdbd.
        controller = drill.wait(
            "slurmctld's 26.05 pod in wait-slurmdbd",
            lambda: drill.newest("controller"),
            lambda pod: (
                TARGET in _image_of(pod, "slurmctld")
                and "running" in (_container(pod, "wait-slurmdbd").get("state") or {})
            ),
            300,
        )
        assert not _container(controller, "state-guard").get("state", {}).get("terminated"), controller["status"]
        assert not (_container(controller, "slurmctld").get("state") or {}).get("running"), controller["status"]
        assert drill.slurmd_images() == slurmd
        drill.mark("slurmctld's 26.05 pod held by wait-slurmdbd; no slurmd pod replaced")
        waited = drill.logs(controller["metadata"]["name"], "wait-slurmdbd").strip().splitlines()
    finally:
        drill.mariadb(f"GRANT ALTER ON {db}.* TO '{user}'@'%'; FLUSH PRIVILEGES;")
        drill.mark("MariaDB: ALTER granted again")

    drill.apply(SOURCE, SOURCE)
    # A StatefulSet replaces a pod of an old template only once it is Ready: slurmctld's pod held by
    # wait-slurmdbd never will be, so it is deleted (Kubernetes' forced rollback; docs/upgrading.md).
    drill.kubectl("delete", "pod", "-n", NS, controller["metadata"]["name"], "--wait=false")
    drill.mark("slurmctld's held pod deleted (StatefulSet forced rollback)")
    drill.wait("slurmdbd answers at 24.11", lambda: drill.versions().get("slurmdbd"), lambda v: v == old, 600)
    drill.wait("slurmctld answers at 24.11", lambda: drill.versions().get("slurmctld"), lambda v: v == old, 600)
    back = drill.logs(drill.newest("accounting")["metadata"]["name"], "db-guard")
    after = drill.wait("sacct as before", drill.sacct, lambda s: s == live.before, 120)
    _queue_as_before(drill, live)
    assert drill.refusal() == live.refusal
    assert drill.slurmd_images() == slurmd

    drill.print_timeline("local cluster, slurmdbd 26.05's conversion fails (ALTER revoked), then the stack set back")
    print(f"  db-guard (26.05 pod): {[line for line in guard.splitlines() if 'db-guard:' in line][-3:]}")
    print(f"  slurmdbd 26.05's failure, as its start script marked it: {failed.strip()}")
    print(
        f"  slurmdbd 26.05 started again: {[line for line in refused.splitlines() if 'not started' in line][-1][:160]}"
    )
    print(f"  wait-slurmdbd (26.05 slurmctld pod, deleted at the set back): {waited[-1] if waited else ''}")
    print(f"  db-guard (24.11 pod): {[line for line in back.splitlines() if 'db-guard:' in line]}")
    print(f"  sacct: {len(after)} jobs, every line as before; queue: {drill.states()}")
    assert "before it served" in failed
    assert "set aside" in back and "slurmdbd 24.11 starts on it" in back
    assert not any(line.endswith(new) for line in waited)


def test_b_slurmctld_failing_at_its_start_is_rolled_back_by_the_snapshot(drill: Drill, live: Live) -> None:
    """slurmdbd 26.05 converts the database, slurmctld 26.05 starts from the state its pod's
    state-guard copied, rewrites state files, and crashes (SIGABRT sent through `kubectl exec`
    once a state file carries 26.05's protocol version, at every start until the stack is set
    back: a crash loop). The stack set back (24.11, upgradeFrom 24.11): the 24.11 pod's state-guard
    finds state 26.05 wrote, restores the snapshot (checksums), and slurmctld 24.11 starts from
    it with every job as it was. slurmdbd stays down meanwhile: the 24.11 pod's db-guard refuses
    to start slurmdbd 24.11 on the database 26.05 converted and served from (the product's
    documented behaviour: a per-daemon release is not a stack field)."""
    old, new = release_of(SOURCE).slurm, release_of(TARGET).slurm
    drill.begin()
    protocol = release_of(TARGET).protocol
    headed = " ".join(f"{naming.STATE_SAVE}/{f}_state" for f in ("job", "node", "part", "resv", "trigger"))
    # The crash: once slurmctld 26.05 has rewritten a state file in its own format (node_state,
    # once the nodes registered: it rewrites job_state only when a job changes), SIGABRT; its
    # handler saves the state and aborts. Two execs: the first says which files 26.05 wrote (the
    # second's shell dies with the container).
    rewritten = (
        f"for i in $(seq 600); do for f in {headed}; do "
        f'[ "$(od -An -tu1 -j21 -N1 "$f" 2>/dev/null | tr -d " ")" = {protocol} ] && echo "${{f##*/}}"; done '
        "| grep . && exit 0; sleep 0.1; done; exit 1"
    )
    abort = (
        'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = slurmctld ] && pid=${p#/proc/}; done; '
        'while kill -ABRT "$pid" 2>/dev/null; do sleep 0.2; done'
    )
    stop = threading.Event()
    errors: list[str] = []
    aborted: list[tuple[str, int, str]] = []
    """(pod, restartCount when SIGABRT was sent, the state files 26.05 had written)."""
    crashes: list[str] = []
    """The last lines of each ended run of slurmctld 26.05."""

    def crash_loop() -> None:
        seen: set[str] = set()
        while not stop.is_set():
            try:
                for pod in drill.pods("controller"):
                    name, status = pod["metadata"]["name"], _container(pod, "slurmctld")
                    started = ((status.get("state") or {}).get("running") or {}).get("startedAt")
                    if not started or TARGET not in _image_of(pod, "slurmctld") or f"{name} {started}" in seen:
                        continue
                    seen.add(f"{name} {started}")
                    if status.get("restartCount"):
                        crashes.append(" | ".join(drill.logs(name, "slurmctld", previous=True).splitlines()[-3:]))
                    files = drill.exec(name, "slurmctld", rewritten, check=False)
                    if files.returncode == 0:
                        aborted.append((name, int(status.get("restartCount") or 0), " ".join(files.stdout.split())))
                        drill.exec(name, "slurmctld", abort, check=False)
            except Exception as error:  # reported by the test; the loop goes on
                errors.append(repr(error))
            stop.wait(0.5)

    def crashed() -> dict[str, Any] | None:
        """slurmctld 26.05's run that was sent SIGABRT, once it has ended."""
        if not aborted:
            return None
        name, restarts, _ = aborted[0]
        [pod] = [p for p in drill.pods("controller") if p["metadata"]["name"] == name]
        status = _container(pod, "slurmctld")
        ended = (status.get("lastState") or {}).get("terminated")
        return {"pod": pod, **ended} if ended and int(status.get("restartCount") or 0) > restarts else None

    thread = threading.Thread(target=crash_loop, daemon=True)
    thread.start()
    try:
        drill.apply(TARGET, SOURCE)
        drill.wait("slurmdbd answers at 26.05 (it converted)", lambda: drill.versions().get("slurmdbd"),
                   lambda v: v == new, 600)  # fmt: skip
        live.converted.append(new)
        found = drill.wait("slurmctld 26.05 crashed after rewriting its state", crashed, bool, 600)
        assert found is not None
        ended: dict[str, Any] = found
        controller = ended["pod"]
        snapshot = drill.logs(controller["metadata"]["name"], "state-guard")
        ran = _seconds(ended["finishedAt"]) - _seconds(ended["startedAt"])
        drill.apply(SOURCE, SOURCE)
        # slurmctld's crash-looping pod is never Ready: the StatefulSet needs it deleted to roll back.
        drill.kubectl("delete", "pod", "-n", NS, controller["metadata"]["name"], "--wait=false")
        drill.mark("slurmctld's crash-looping pod deleted (StatefulSet forced rollback)")
    finally:
        stop.set()
        thread.join(200)
    restarts = _container(controller, "slurmctld").get("restartCount")
    drill.wait("slurmctld answers at 24.11", lambda: drill.versions().get("slurmctld"), lambda v: v == old, 600)
    drill.wait("every job as before", drill.states, lambda q: {j: q.get(j) for j in live.queue} == live.queue, 120)
    _queue_as_before(drill, live)
    back = drill.newest("controller")
    # Every run of the 24.11 pod's state-guard (an init container that failed is run again).
    guard_runs = _container(back, "state-guard").get("restartCount") or 0
    restored = drill.logs(back["metadata"]["name"], "state-guard", previous=True) if guard_runs else ""
    restored += drill.logs(back["metadata"]["name"], "state-guard")
    nodes = drill.wait(
        "3 nodes on slurmd 24.11",
        lambda: sorted(drill.login("sinfo -h -N -o '%N %T %v'", check=False).stdout.splitlines()),
        lambda lines: len(lines) == 3 and all(line.split()[-1] == old for line in lines),
        600,
    )
    refused = drill.wait(
        "db-guard of slurmdbd's 24.11 pod refuses (26.05 converted the database and served from it)",
        lambda: drill.logs(drill.newest("accounting")["metadata"]["name"], "db-guard"),
        lambda log: "can't read it" in log,
        300,
    )

    drill.print_timeline("local cluster, slurmctld 26.05 crashes at its start (SIGABRT), then the stack set back")
    print(f"  state-guard (26.05 pod): {snapshot.strip().splitlines()}")
    print(f"  slurmctld 26.05 ran {ran:.1f} s until SIGABRT (exit {ended.get('exitCode')}); restarts: {restarts}")
    print(f"  state files 26.05 had rewritten when SIGABRT was sent: {aborted[0][2]}")
    print(f"  slurmctld 26.05's runs that ended, their last lines: {crashes}")
    print(f"  state-guard (24.11 pod, {guard_runs} restarts): {restored.strip().splitlines()}")
    print(f"  nodes: {nodes}; queue: {drill.states()}")
    print(f"  db-guard (24.11 pod): {refused.strip().splitlines()[-1][:200]}")
    assert "state-snapshot: " in snapshot and f"slurmctld {TARGET} converts the state of {SOURCE}" in snapshot
    assert not errors, errors
    assert "state-restore: " in restored and "checksums match" in restored
    assert f"is the copy taken on {SOURCE} again" in restored
    assert f"written by Slurm {TARGET}, newer than this slurmctld in " in restored
    assert aborted[0][2], aborted


def test_the_upgrade_applied_at_once_loses_nothing(drill: Drill, live: Live) -> None:
    new = release_of(TARGET).slurm
    drill.begin()
    running, pending, held, array, before = live.running, live.pending, live.held, live.array, live.before
    # The running job's steps may end once slurmctld answers at 26.05.
    drill.login(f"scontrol update jobid={running} comment=release")
    drill.apply(TARGET, SOURCE)

    drill.wait("slurmdbd at 26.05 (after its dump)", lambda: drill.versions().get("slurmdbd"), lambda v: v == new, 600)
    drill.wait("slurmctld at 26.05", lambda: drill.versions().get("slurmctld"), lambda v: v == new, 600)
    drill.wait(f"job {running} completed", drill.sacct, lambda s: "|COMPLETED|" in s.get(running, ""), 600)
    drill.wait(f"pending job {pending} completed", drill.sacct, lambda s: "|COMPLETED|" in s.get(pending, ""), 600)
    drill.wait(
        "every slurmd pod on the 26.05 image",
        drill.slurmd_images,
        lambda images: len(images) == 3 and all(new in image for image in images.values()),
        900,
    )
    versions = drill.wait(
        "every daemon reports 26.05", drill.versions, lambda v: len(v) == 5 and set(v.values()) == {new}, 300
    )
    pods = {c: drill.init_containers(c) for c in ("accounting", "controller", "login")}
    drill.print_timeline("local cluster upgrade, Slurm 24.11 -> 26.05 (kubectl apply of the whole render)")
    print("what the pods' upgrade init containers did, and how long each held its pod:")
    for component, containers in pods.items():
        for name, (seconds, log) in containers.items():
            last = log.strip().splitlines()[-1] if log.strip() else ""
            print(f"  {component:<10} {name:<14} {seconds:5.1f} s  {last}")
    print(f"  versions: {versions}")

    # The copies were taken in the cluster, before each conversion, and each wait ended on 26.05.
    assert set(pods["accounting"]) == {"db-guard"} and set(pods["login"]) == {"wait-slurmctld"}
    dbguard = pods["accounting"]["db-guard"][1]
    if live.converted:  # the slurmctld failure before: slurmdbd 26.05 had converted the database then
        assert f"slurmdbd {TARGET} has converted the database already: nothing to do" in dbguard
    else:
        assert "db-guard: schema before the conversion: 16:" in dbguard
        assert "db-backup: /backup/slurm_acct_db-24.11.sql " in dbguard
    assert set(pods["controller"]) == {"wait-slurmdbd", "state-guard"}
    assert pods["controller"]["wait-slurmdbd"][1].strip().endswith(f"slurmdbd answers at Slurm {new}")
    guard = pods["controller"]["state-guard"][1]
    assert "state-snapshot: " in guard and "slurmctld 26.05 converts the state of 24.11" in guard
    assert pods["login"]["wait-slurmctld"][1].strip().endswith(f"slurmctld answers at Slurm {new}")

    # The running job's step ran to its end (on the slurmd it started on: the operator replaces a
    # slurmd pod only once its node runs no job).
    steps = drill.login(f"sacct -n -P -j {running} -o JobID,State").stdout.split()
    assert f"{running}.0|COMPLETED" in steps, steps
    assert drill.login(f"squeue -h -j {held} -o '%T %r'").stdout.split() == ["PENDING", "JobHeldUser"]
    drill.login(f"scontrol release {held}")
    drill.wait("the held job and the array done", drill.sacct,
               lambda s: all("|COMPLETED|" in s.get(j, "") for j in [held, *(f"{array}_{t}" for t in range(1, 5))]),
               300)  # fmt: skip
    after = drill.sacct()
    changed_lines = {
        j: (line, after.get(j)) for j, line in before.items() if "|COMPLETED|" in line and after.get(j) != line
    }
    assert not changed_lines, changed_lines
    assert drill.refusal() == live.refusal


def test_z_a_plain_set_back_with_a_stale_snapshot_is_refused(drill: Drill, live: Live) -> None:
    """After the upgrade, slurmctld 26.05 takes a job; then the stack is set back (24.11,
    upgradeFrom 24.11): the 24.11 pod's state-guard refuses the snapshot taken before the
    upgrade (restoring it would lose that job), and its db-guard refuses the database 26.05
    converted and served from."""
    drill.begin()
    job = drill.sbatch("-A lab --wrap true")
    ctld = drill.newest("controller")["metadata"]["name"]
    read = "od -An -tu4 --endian=big -j31 -N4 /var/spool/slurmctld/job_state | tr -d ' '"
    drill.wait(
        f"job {job} in slurmctld 26.05's saved state",
        lambda: drill.exec(ctld, "slurmctld", read, check=False).stdout.strip(),
        lambda next_id: next_id.isdigit() and int(next_id) > int(job),
        180,
    )
    drill.apply(SOURCE, SOURCE)
    name, log = _refused(drill, "controller", "state-guard")
    _, db_log = _refused(drill, "accounting", "db-guard")
    drill.print_timeline("local cluster, a plain set-back after 26.05 took a job")
    print(f"  state-guard ({name}): {[line for line in log.splitlines() if 'state-guard:' in line][-1:]}")
    assert "jobs were submitted after the copy was taken" in log and "slurm.acceptJobLoss: true" in log
    assert "Slurm can't be downgraded" in db_log
