"""slurmctld with a backup (`controller.replicas: 2`) on the local cluster, driven only through
`sunk local`, the real kubectl and the login pod's Slurm clients, with jobs running, pending and
arriving at each outage:

1. the upgrade to the default release (Slurm 24.11 -> 26.05) as docs/how-to/ha.md says: the stack
   applied with slurm.upgradeFrom (`sunk local apply`), slurmdbd moves while both controllers stay
   on 24.11 (OnDelete), both controller pods deleted together with the docs' kubectl command, the
   state guards take turns (one copies, never while a 24.11 slurmctld runs; the other finds the
   copy or the state already converted); a job running across it completes, every job once in
   sacct, both controllers on 26.05. It is also "both controllers down, then one back": the one
   that comes back first resumes from the shared state, a held job still queued, the job ids
   going on;
2. the primary's Node loses power (`sunk local node stop`): the backup takes control, becomes
   the Ready pod, accepts `sbatch` from the login pod and a REST submission (slurmrestd through
   `kubectl port-forward`, root's `scontrol token`); the running job completes, the pending one
   starts, sacct has every job once;
   with controller-1 in control, the syncer mirrors a cordon into a drain and the scheduler
   places a pod, neither restarted;
3. the primary comes back (`sunk local node start`): it takes control back; the second, shorter
   outage is measured;
4. the primary's slurmctld process is killed (SIGKILL from the host: it is its pod's PID 1): the
   kubelet restarts it, the same guarantees;
5. a kubelet crash, then a force delete of the primary's pod: never two primaries.

The stack boots on 24.11 so that one boot shows the upgrade first, then every failover on the
default release. (Failover on 24.11 is the same slurmctld code path; it ran here too until the
module's time had to fit issue 36's 5 minutes: tests/slurm/test_controller_ha.py keeps both
releases' daemons.)

The stack's ReadWriteMany claim is, on the local cluster, a plain host folder that both
controller pods mount (claims are folders under the cluster's folder): it shows slurmctld's own
coordination through StateSaveLocation, with none of NFS's behaviour (no attribute caching, no
lost locks, no server to lose). The two controller pods run on two system Nodes because the
render's hard topology spread asks for them (minDomains 2) and kube-scheduler honours it.

One cluster for the module, its scenarios in order; the outages print their figures (never
asserted: a loaded machine stretches them)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from sunk.runtime.slurmrest import JobSubmit, SlurmRestClient, SlurmRestError, StaticToken

from sunk.images import release_of
from sunk.naming import PRIMARY_MARK, SLURMRESTD_PORT
from tests.support.localcluster import LocalCluster, booted, ready, sunk

pytestmark = pytest.mark.slurm

SOURCE, TARGET = "24.11", "26.05"
"""The stack boots on the release before the default, so that its first scenario upgrades it as
docs/how-to/ha.md says and the failovers run on the default release (one boot for both)."""
NS = "acme-ha"
CONTROLLERS = ("ha-controller-0", "ha-controller-1")
LEASE = "ha-controller-fence"
CONTROLLER_POOL = "node-role.acme.example/slurmctld"
STACK: dict[str, Any] = {
    "config": {
        "sunk:operator": True,
        "sunk:cluster": {
            "name": "ha",
            "tenant": "acme",
            "slurm": {"version": SOURCE},
            "controller": {
                "replicas": 2,
                # the local cluster binds any claim to a host folder: the class is a name only
                "stateStorage": {"accessMode": "ReadWriteMany", "storageClass": "local-rwx"},
                # Nodes of their own, as production gives slurmctld: a Node lost takes only a
                # controller (the login pod, MariaDB and the runtime stay on the system pool)
                "nodeSelector": {CONTROLLER_POOL: "true"},
                "tolerations": [{"key": CONTROLLER_POOL, "operator": "Exists", "effect": "NoSchedule"}],
            },
            "login": {"serviceType": "ClusterIP"},
            # shared: the scheduler's pods run there through Slurm (its placeholders ask for sunk_shared);
            # a pool of their own, as production gives a NodeSet: a shared slurmd pod requests only
            # slurmd's overhead, and without a nodeSelector it may land on a system Node that has no
            # room for the pods Slurm then places beside it (seen in CI: a 60 s reroute)
            "nodesets": [
                {
                    "name": "cpu",
                    "replicas": 2,
                    "cpus": 2,
                    "memoryMib": 2048,
                    "resourceMode": "shared",
                    "nodeSelector": {"node-role.acme.example/cpu": "true"},
                }
            ],
            "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
        },
    }
}


class Ha(LocalCluster):
    stack = Path()
    """The stack file `sunk local up` was given, which the upgrade writes and applies again."""

    def login(self, script: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A shell on the login pod, as root (an administrator's Slurm clients)."""
        return self.kubectl("exec", "-n", NS, "deploy/ha-login", "-c", "sshd", "--", "bash", "-c", script,
                            check=check, timeout=timeout)  # fmt: skip

    def lease_holder(self) -> str:
        """The holder of the fence's Lease (sunk.fence); empty while there is none."""
        got = self.kubectl("get", "lease", "-n", NS, LEASE, "-o", "jsonpath={.spec.holderIdentity}", check=False)
        return got.stdout.strip() if got.returncode == 0 else ""

    def identity(self, pod: str) -> str:
        """A fence's holderIdentity: the pod's name and uid."""
        return f"{pod}_{self.pod(pod)['metadata']['uid']}"

    def pod(self, name: str, namespace: str = NS) -> dict[str, Any]:
        return super().pod(name, namespace)

    def ready(self) -> list[str]:
        """The controller pods Ready: with backups, the readiness probe passes only on the primary."""
        return [name for name in CONTROLLERS if ready(self.pod(name))]

    def sbatch(self, options: str) -> str:
        done = self.wait("sbatch " + options, lambda: self.login(f"sbatch --parsable -o /dev/null {options}",
                         check=False), lambda d: d.returncode == 0, 300)  # fmt: skip
        return done.stdout.strip()

    def until_accepted(self, started: float) -> tuple[str, float]:
        """`sbatch` from the login pod, again and again, until one is accepted: its job id and the
        seconds since `started`."""
        while True:
            done = self.login("sbatch --parsable -o /dev/null --wrap true", check=False, timeout=180)
            if done.returncode == 0:
                return done.stdout.strip(), time.monotonic() - started
            assert time.monotonic() - started < 300, f"no sbatch accepted in 300 s: {done.stderr}"
            time.sleep(0.5)

    @contextlib.contextmanager
    def rest(self) -> Iterator[SlurmRestClient]:
        """slurmrestd as a REST user reaches it from outside: `kubectl port-forward` to the
        restapi Service, with root's token from `scontrol token` in the login pod (15 minutes)."""
        token = self.login("scontrol token username=root lifespan=900").stdout.strip().removeprefix("SLURM_JWT=")
        forward = subprocess.Popen(
            ["kubectl", "--kubeconfig", self.kubeconfig, "port-forward", "-n", NS, "svc/ha-restapi",
             f":{SLURMRESTD_PORT}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        try:
            assert forward.stdout is not None
            line = forward.stdout.readline()  # "Forwarding from 127.0.0.1:PORT -> 6820"
            found = re.search(r"127\.0\.0\.1:(\d+)", line)
            assert found, f"kubectl port-forward said {line!r}"
            with SlurmRestClient(f"http://127.0.0.1:{found[1]}", user="root", token=StaticToken(token)) as client:
                yield client
        finally:
            forward.terminate()
            forward.wait(10)

    def rest_until_accepted(self, rest: SlurmRestClient, started: float) -> tuple[str, float]:
        """POST /job/submit, again and again, until slurmrestd answers with a job id (it reaches
        slurmctld through slurm.conf's SlurmctldHost list, as sbatch does): the id and the seconds
        since `started`."""
        job = JobSubmit(script="#!/bin/sh\ntrue\n", name="rest-in-failover", standard_output="/dev/null")
        while True:
            try:
                return str(rest.submit_job(job)), time.monotonic() - started
            # SlurmUnavailable too: a submit whose reply timed out while slurmrestd waited on the
            # lost primary is not retried by the client (POST is not idempotent); a retry here
            # may make a second job, which the test never counts as this one.
            except (SlurmRestError, httpx.HTTPError) as error:
                assert time.monotonic() - started < 300, f"no REST submission accepted in 300 s: {error}"
                time.sleep(0.5)

    def states(self, jobs: list[str]) -> dict[str, str]:
        """sacct's state of each job, and how many records it has (-D: every requeue or
        duplicate too): {job: 'COMPLETED x1'}."""
        lines = self.login(f"sacct -D -X -n -P -o JobID,State -j {','.join(jobs)}", check=False).stdout.split()
        seen: dict[str, list[str]] = {}
        for line in lines:
            job, _, state = line.partition("|")
            seen.setdefault(job, []).append(state)
        return {job: f"{' '.join(states)} x{len(states)}" for job, states in seen.items()}

    def all_completed_once(self, jobs: list[str], timeout: float = 300) -> None:
        self.wait(f"jobs {jobs} COMPLETED once each in sacct", lambda: self.states(jobs),
                  lambda s: s == {job: "COMPLETED x1" for job in jobs}, timeout)  # fmt: skip

    def diagnose(self) -> str:
        controllers = "".join(
            f"--- {name}\n{self.kubectl('logs', '-n', NS, name, '-c', 'slurmctld', '--tail=30', check=False).stdout}"
            for name in CONTROLLERS
        )
        runtime = "".join(
            f"--- {name}\n{self.kubectl('logs', '-n', NS, f'deploy/{name}', '--tail=30', check=False).stdout}"
            for name in ("ha-scheduler", "ha-syncer")
        )
        return controllers + runtime


def state_saved(ha: Ha, job: str) -> None:
    """Until slurmctld's job_state on the shared claim (a host folder here) holds `job`. A job
    `sbatch` accepted is in slurmctld's memory at once and in its state files only at its next
    save, seconds later and longer on a loaded machine: a SIGKILL or a lost Node before that loses
    it and gives its id to the next job (Slurm's own window, seen in CI as a job id given twice
    after a 4 s sleep). The outages start from saved state.

    Read from the file, not its time: job_state carries the next job id slurmctld will give (4
    bytes, big-endian, after its header and save time: state-guard.sh reads it so on every
    release), above `job` once a save holds it. A time is wrong both ways: taken after `sbatch`
    returns it misses a save made while the reply came back, the last one when nothing changes
    after (CI waited 120 s); taken before it, a save just before slurmctld took the job passes
    (seen here: the pending job lost at a SIGKILL, its id given to the next job).

    The same window holds for a job's start: a save from before a job started, then the primary
    lost, and the backup recovers it as pending while its batch step runs; Slurm requeues it and it
    runs twice (seen once here: `REQUEUED PENDING x2`). So the scenarios submit their last job only
    once the running one runs, and wait for a save that holds the last job."""

    def next_id() -> int:
        found = 0
        for file in Path(ha.env["SUNK_LOCAL_DIR"]).glob(f"*/claims/{NS}/ha-controller-state/**/job_state"):
            try:
                found = max(found, int.from_bytes(file.read_bytes()[31:35], "big"))
            except OSError:  # renamed to job_state.old mid-save
                continue
        return found

    ha.wait(f"job {job} in slurmctld's saved job state", next_id, lambda next_job: next_job > int(job), 120)


def kill_slurmctld(ha: Ha, pod: str) -> int:
    """SIGKILL the slurmctld of one controller pod from the host (it is the pod's PID 1, which
    ignores SIGKILL sent from inside its namespace): the processes whose root is under that pod's
    folder (pods/<uid>) of this cluster. How many were killed."""
    mine = 0
    for pid in slurmctld_of(ha, [ha.pod(pod)["metadata"]["uid"]]):
        try:
            os.kill(pid, 9)
            mine += 1
        except OSError:  # gone meanwhile
            continue
    return mine


def slurmctld_of(ha: Ha, uids: list[str]) -> list[int]:
    """The slurmctld processes of this cluster whose root is under the folder (pods/<uid>) of one
    of these pods, read from the host: a pod the API no longer has counts too."""
    base, found = ha.env["SUNK_LOCAL_DIR"], []
    for proc in Path("/proc").iterdir():
        try:
            if not (proc.name.isdigit() and (proc / "comm").read_text().startswith("slurmctld")):
                continue
            root = os.readlink(proc / "root")
            if root.startswith(base) and any(f"/pods/{uid}/" in root + "/" for uid in uids):
                found.append(int(proc.name))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def primaries(ha: Ha) -> list[str]:
    """Every slurmctld of this cluster that holds the primary mark (SlurmctldPrimaryOnProg's), read
    from the host through /proc/PID/root: a process whose pod the API no longer has (force-deleted)
    counts too. Each as 'pid@pod-uid'."""
    base, seen = ha.env["SUNK_LOCAL_DIR"], []
    for proc in Path("/proc").iterdir():
        try:
            if not (proc.name.isdigit() and (proc / "comm").read_text().startswith("slurmctld")):
                continue
            root = os.readlink(proc / "root")
            if root.startswith(base) and (proc / "root" / PRIMARY_MARK.lstrip("/")).exists():
                seen.append(f"{proc.name}@{root.split('/pods/')[-1].split('/')[0]}")
        except OSError:
            continue
    return sorted(seen)


@pytest.fixture(scope="module")
def ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ha]:
    builds = [("--slurm", release) for release in (SOURCE, TARGET)]
    with booted(tmp_path_factory.mktemp("local-ha"), STACK, stack_name="acme-ha", builds=builds) as boot:
        running = Ha(boot.env, boot.kubeconfig)
        running.stack = boot.folder / "Pulumi.acme-ha.yaml"
        assert boot.up.returncode == 0, boot.up.stderr[-3000:] + boot.up.stdout[-3000:]
        old = release_of(SOURCE).slurm
        running.wait(f"2 nodes idle on {old}", lambda: running.login("sinfo -h -N -o '%T %v'", check=False).stdout.split(),
                     lambda states: states == ["idle", old, "idle", old], 300)  # fmt: skip
        yield running


def test_the_controllers_run_on_two_nodes_and_only_the_primary_is_ready(ha: Ha) -> None:
    nodes = {ha.pod(name)["spec"].get("nodeName") for name in CONTROLLERS}
    assert len(nodes) == 2 and None not in nodes, nodes
    assert ha.wait("controller-0 the one Ready pod", ha.ready, lambda r: r == [CONTROLLERS[0]], 120)
    claims = {v["persistentVolumeClaim"]["claimName"] for v in ha.pod(CONTROLLERS[0])["spec"]["volumes"]
              if "persistentVolumeClaim" in v}  # fmt: skip
    claim = json.loads(ha.kubectl("get", "pvc", "-n", NS, *claims, "-o", "json").stdout)
    modes = [item["spec"]["accessModes"] for item in claim.get("items", [claim])]
    assert ["ReadWriteMany"] in modes, modes
    # The fence: the primary's pod holds the cluster's Lease (docs/how-to/ha.md, the fence).
    assert ha.wait("controller-0 holds the Lease", ha.lease_holder, lambda h: h == ha.identity(CONTROLLERS[0]), 60)


SPANNING_JOB = "--wrap 'until scontrol show job $SLURM_JOB_ID | grep -q Comment=release; do sleep 2; done'"
"""A job that runs across the upgrade: it ends once the test sets its comment to `release`, which
it does only when slurmctld answers at the new release."""
DELETE_CONTROLLERS = (
    f"kubectl delete pod -n {NS} -l app.kubernetes.io/instance=ha,app.kubernetes.io/component=controller"
)
"""docs/how-to/ha.md's command, "Upgrades and template changes" step 2, for this stack."""


def versions(ha: Ha) -> dict[str, str]:
    """What each daemon reports, and the login clients' own release, asked from the login pod."""
    ctld = ha.login("scontrol show config | sed -n 's/^SLURM_VERSION *= *//p'", check=False).stdout.strip()
    dbd = ha.login("sacctmgr -n show config | sed -n 's/^SLURMDBD_VERSION *= *//p'", check=False).stdout.strip()
    login = ha.login("sinfo --version", check=False).stdout.split()
    nodes = [line.split() for line in ha.login("sinfo -h -N -o '%N %v'", check=False).stdout.splitlines()]
    return {"slurmctld": ctld, "slurmdbd": dbd, "login": login[-1] if login else ""} | {
        f"slurmd {node[0]}": node[1] for node in nodes if len(node) == 2
    }


def accounted(ha: Ha) -> dict[str, list[str]]:
    """Every job's sacct records (-D: a requeue or a second record shows), by job id."""
    lines = ha.login("sacct -a -D -X -n -P -S 2000-01-01 -o JobID,JobName,Submit,State", check=False).stdout
    records: dict[str, list[str]] = {}
    for line in lines.splitlines():
        records.setdefault(line.split("|", 1)[0], []).append(line)
    return records


def slurmctld_images(ha: Ha) -> dict[str, str]:
    """The slurmctld container's image of each controller pod."""
    return {
        name: next((c["image"] for c in ha.pod(name)["spec"].get("containers", []) if c["name"] == "slurmctld"), "")
        for name in CONTROLLERS
    }


def takeover_log(ha: Ha, name: str, since: float) -> str:
    """What a controller's slurmctld and fence said about control since `since` (a wall-clock
    time), each line led by its seconds after it: how a takeover went, printed beside its figure."""
    said = []
    for container in ("slurmctld", "fence"):
        for line in ha.kubectl("logs", "-n", NS, name, "-c", container, check=False).stdout.splitlines():
            found = re.match(r"\[?(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?)\]? ?(.*)", line)
            wanted = ("primary", "control", "backup", "lease", "standby", "reconfig", "terminate", "shutdown")
            if not found or not any(word in line.lower() for word in wanted):
                continue
            stamp = datetime.fromisoformat(found[1].replace(" ", "T").replace(",", ".")).replace(tzinfo=UTC).timestamp()
            if stamp >= since - 1:
                said.append((stamp - since, f"{container}: {found[2][:140]}"))
    return "\n".join(f"  {at:6.1f} s  {what}" for at, what in sorted(said))


def host_log(ha: Ha, uid: str, container: str) -> str:
    """A container's log as the node agent writes it on the host (every run of it, in order): what
    `kubectl logs` can't give while the pod's Node agent is stopped, or once the pod is gone."""
    base = Path(ha.env["SUNK_LOCAL_DIR"])
    files = [f for depth in ("*", "*/*", "*/*/*") for f in base.glob(f"{depth}/pods/{uid}/logs/{container}/*.log")]
    return "".join(f.read_text(errors="replace") for f in sorted(files, key=lambda f: int(f.stem)))


def guard_ended(ha: Ha, name: str) -> dict[str, Any] | None:
    """The pod's state-guard init container's `terminated` state, None while it waits or runs."""
    statuses = (ha.pod(name).get("status") or {}).get("initContainerStatuses") or []
    return next(((s.get("state") or {}).get("terminated") for s in statuses if s["name"] == "state-guard"), None)


class Copies(threading.Thread):
    """Read from the host every 0.2 s while the controllers are replaced: whether the state
    snapshot (its partial copy, or the copy) is on the backup claim (a host folder here), then
    whether a slurmctld of the old pods still runs. In that order a sample with both is a certain
    overlap: the copy, once begun, stays."""

    def __init__(self, ha: Ha, uids: list[str]) -> None:
        super().__init__(daemon=True)
        self.ha, self.uids, self.stop = ha, uids, threading.Event()
        self.samples: list[tuple[float, bool, bool]] = []
        """(time.monotonic(), the snapshot there, an old slurmctld running)."""

    def copied(self) -> bool:
        names = (f"statesave-{SOURCE}", f".statesave-{SOURCE}.partial")
        claims = Path(self.ha.env["SUNK_LOCAL_DIR"]).glob(f"*/claims/{NS}/ha-controller-backup-{SOURCE}")
        return any(any(claim.glob(f"**/{name}")) for claim in claims for name in names)

    def run(self) -> None:
        while not self.stop.is_set():
            copy = self.copied()
            self.samples.append((time.monotonic(), copy, bool(slurmctld_of(self.ha, self.uids))))
            self.stop.wait(0.2)


def test_the_upgrade_to_the_next_release_as_the_docs_say_keeps_every_job(
    ha: Ha, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/how-to/ha.md, "Upgrades and template changes", as a user takes it: the stack applied
    with `slurm: {version: 26.05, upgradeFrom: 24.11}` (`sunk local apply`); slurmdbd moves (its
    dump, its conversion) while both controller pods stay the same 24.11 pods (OnDelete) and no
    slurmd is replaced; both controller pods deleted together with the docs' command; the new pods'
    state guards take turns on the backup volume: one copies StateSaveLocation, never while a
    24.11 slurmctld runs (read from the host), the other finds the copy. A job runs across the
    upgrade and completes, a held one and one submitted while no controller answered complete, every
    job before is in sacct as it was and none twice; both controllers end on 26.05, pod 0 the one
    primary, every daemon and the login clients on 26.05."""
    old, new = release_of(SOURCE).slurm, release_of(TARGET).slurm
    begun, timeline = time.monotonic(), []

    def mark(what: str) -> None:
        timeline.append((time.monotonic() - begun, what))

    ha.wait("one primary", ha.ready, lambda r: len(r) == 1, 120)
    assert set(versions(ha).values()) == {old}, versions(ha)
    finished = ha.sbatch("--wrap true")  # its sacct record must come through as it was
    running = ha.sbatch(SPANNING_JOB)
    ha.wait(f"job {running} running", lambda: ha.login(f"squeue -h -j {running} -o %T", check=False).stdout.strip(),
            lambda s: s == "RUNNING", 120)  # fmt: skip
    held = ha.sbatch("--hold --wrap true")
    ha.all_completed_once([finished])
    before = accounted(ha)
    uids = [ha.pod(name)["metadata"]["uid"] for name in CONTROLLERS]
    slurmd = ha.login("sinfo -h -N -o '%N %v'").stdout
    stack = yaml.safe_load(ha.stack.read_text())
    stack["config"]["sunk:cluster"]["slurm"] = {"version": TARGET, "upgradeFrom": SOURCE}
    ha.stack.write_text(yaml.safe_dump(stack, sort_keys=False))
    mark(f"apply: slurm {{version: {TARGET}, upgradeFrom: {SOURCE}}}")
    applied = sunk("local", "apply", str(ha.stack), env=ha.env)
    assert applied.returncode == 0, applied.stderr
    mark("apply returned")

    ha.wait(f"slurmdbd answers at {new}", lambda: versions(ha)["slurmdbd"], lambda v: v == new, 600)
    mark(f"slurmdbd answers at {new} (dumped, converted)")
    # OnDelete: the StatefulSet has the new template and has replaced neither pod; slurmctld runs
    # 24.11 on the converted database, and the operator replaced no slurmd while it does.
    controllers = ha.get("statefulset", "-n", NS, "ha-controller")
    assert controllers["status"]["updateRevision"] != controllers["status"]["currentRevision"], controllers["status"]
    assert [ha.pod(name)["metadata"]["uid"] for name in CONTROLLERS] == uids
    assert all(f":{old}" in image for image in slurmctld_images(ha).values()), slurmctld_images(ha)
    assert versions(ha)["slurmctld"] == old
    assert ha.login("sinfo -h -N -o '%N %v'").stdout == slurmd

    copies = Copies(ha, uids)
    copies.start()
    deleted = time.monotonic()
    try:
        ha.kubectl(*DELETE_CONTROLLERS.split()[1:], timeout=300)
        mark("both controller pods deleted (the docs' kubectl delete returned)")
        arriving, outage = ha.until_accepted(deleted)
        mark(f"sbatch from login accepted (job {arriving})")
        ha.wait(f"both controller pods replaced, slurmctld {new}", lambda: (
            [ha.pod(name)["metadata"].get("uid") for name in CONTROLLERS], slurmctld_images(ha)),
            lambda s: not set(s[0]) & {*uids, None} and all(f":{new}" in i for i in s[1].values()), 300)  # fmt: skip
        # Pod 1's guard takes its turn after pod 0's, which may be well after pod 0 answers.
        ha.wait("both new pods' state guards ended", lambda: [guard_ended(ha, name) for name in CONTROLLERS],
                lambda ended: all(e is not None for e in ended), 300)  # fmt: skip
        mark("both state guards ended")
    finally:
        copies.stop.set()
        copies.join(10)
    guards = {name: ha.kubectl("logs", "-n", NS, name, "-c", "state-guard").stdout for name in CONTROLLERS}
    ha.wait("controller-0 the one Ready pod", ha.ready, lambda r: r == [CONTROLLERS[0]], 240)
    mark("controller-0 the one Ready pod")
    assert ha.wait("controller-0 holds the Lease", ha.lease_holder, lambda h: h == ha.identity(CONTROLLERS[0]), 60)
    ping = ha.login("scontrol ping").stdout
    assert [line.rsplit(" ", 1)[-1] for line in ping.splitlines() if line.startswith("Slurmctld(")] == ["UP", "UP"]

    # Both controllers were down, then one back before the other (pod 1's guard waits its turn):
    # it resumed from the shared state, the held job still queued, the job ids going on.
    assert ha.login(f"squeue -h -j {held} -o %T").stdout.strip() == "PENDING"
    assert int(arriving) > int(held) > int(running)
    ha.login(f"scontrol update jobid={running} comment=release")
    ha.login(f"scontrol release {held}")
    ha.all_completed_once([running, held, arriving])
    mark("the spanning job, the held one and the one submitted meanwhile COMPLETED, once each")
    final = ha.wait(f"every daemon and the login clients at {new}", lambda: versions(ha),
                    lambda v: len(v) == 5 and set(v.values()) == {new}, 600)  # fmt: skip
    mark(f"every daemon and the login clients at {new}")
    after = accounted(ha)

    with capsys.disabled():
        print(f"\nlocal cluster, HA upgrade Slurm {old} -> {new} (docs/how-to/ha.md, kubectl delete of both):")
        for seconds, what in timeline:
            print(f"  {seconds:6.1f} s  {what}")
        print(f"  sbatch accepted {outage:.1f} s after the delete began; versions: {final}")
        for name, log in guards.items():
            print(f"  state-guard {name}: {[line for line in log.splitlines() if line.strip()]}")
    snapshots = [samples for samples in copies.samples if samples[1]]
    alive = [samples for samples in copies.samples if samples[2]]
    assert snapshots and alive, "the watch saw neither the old slurmctld nor the copy"
    assert not [s for s in copies.samples if s[1] and s[2]], "the snapshot was taken while a 24.11 slurmctld ran"
    with capsys.disabled():
        print(f"  from the host: the last 24.11 slurmctld ran {alive[-1][0] - deleted:.1f} s after the delete began, "
              f"the snapshot appeared at {snapshots[0][0] - deleted:.1f} s")  # fmt: skip
    # The guards took turns: one copied and let slurmctld 26.05 convert. The other came either
    # before that slurmctld saved (it found the copy and the mark that every 24.11 controller had
    # stopped, and let its slurmctld convert too) or after (the state was 26.05's: nothing to do).
    # Both are safe; which one happens depends on how soon pod 1 starts after pod 0.
    copied = [name for name, log in guards.items() if "state-snapshot: " in log]
    assert len(copied) == 1, guards
    assert f"slurmctld {TARGET} converts the state of {SOURCE}" in guards[copied[0]], guards
    [other] = [name for name in CONTROLLERS if name not in copied]
    before_save = ("kept as it is" in guards[other] and f"every slurmctld {SOURCE} had stopped before" in guards[other]
                   and f"slurmctld {TARGET} converts the state of {SOURCE}" in guards[other])  # fmt: skip
    after_save = f"written by Slurm {TARGET}, this slurmctld's release: nothing to do" in guards[other]
    assert before_save != after_save, guards
    # sacct: every job of before the upgrade as it was, none twice; the new ones once each.
    ended = {job: records for job, records in before.items() if job not in (running, held)}
    assert finished in ended and {job: after.get(job) for job in ended} == ended
    assert all(len(records) == 1 for records in after.values()), after


def test_the_primarys_node_lost_the_backup_takes_over_and_every_job_runs_once(
    ha: Ha, capsys: pytest.CaptureFixture[str]
) -> None:
    running = ha.sbatch("--wrap 'sleep 18'")  # ends after the takeover (10-15 s after the stop)
    ha.wait(f"job {running} running", lambda: ha.login(f"squeue -h -j {running} -o %T", check=False).stdout.strip(),
            lambda s: s == "RUNNING", 120)  # fmt: skip
    # Submitted once the first runs: the save that holds it (state_saved) holds the first's start.
    # Pending until the first ends (a dependency, not a begin time: a job whose begin time passes
    # waits for slurmctld's next periodic pass, up to bf_interval's 30 s; one freed by a job's end
    # starts in the pass that end triggers).
    pending = ha.sbatch(f"--dependency=afterany:{running} --wrap true")
    node = ha.pod(CONTROLLERS[0])["spec"]["nodeName"]
    state_saved(ha, pending)
    with ha.rest() as rest:
        started = time.monotonic()
        done = sunk("local", "node", "stop", node, env=ha.env)
        assert done.returncode == 0 and f"node {node}: agent stopped" in done.stdout, done.stderr
        arriving, outage = ha.until_accepted(started)
        by_rest, rest_outage = ha.rest_until_accepted(rest, started)
    # controller-1's own readiness (its probe passes once it is in control). controller-0's pod
    # shows Ready until Kubernetes marks its Node NotReady (--node-monitor-grace-period, 50 s):
    # no client reads it (they use the SlurmctldHost names), so nothing waits for it here.
    ready = ha.wait("controller-1 Ready", ha.ready, lambda r: CONTROLLERS[1] in r, 120)
    ready_after = time.monotonic() - started
    assert ready
    assert ha.wait("controller-1 holds the Lease", ha.lease_holder, lambda h: h == ha.identity(CONTROLLERS[1]), 60)
    ha.all_completed_once([running, pending, arriving, by_rest])
    with capsys.disabled():
        print(f"\nlocal cluster, HA: {node} (controller-0) stopped to an sbatch accepted from login: {outage:.1f} s, "
              f"a REST submission accepted: {rest_outage:.1f} s; controller-1 Ready after {ready_after:.1f} s "
              f"(on {versions(ha)['slurmctld']})")  # fmt: skip


def runtime_restarts(ha: Ha) -> dict[str, int]:
    """The syncer's and the scheduler's pods, each with its containers' restarts."""
    pods = json.loads(ha.kubectl("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component in (syncer,scheduler)",
                                 "-o", "json").stdout)["items"]  # fmt: skip
    return {p["metadata"]["name"]: sum(c["restartCount"] for c in p["status"].get("containerStatuses") or [])
            for p in pods}  # fmt: skip


def test_with_the_backup_in_control_the_syncer_mirrors_a_cordon_and_the_scheduler_places_a_pod(ha: Ha) -> None:
    """controller-0's Node still stopped, controller-1 in control: the runtime follows the takeover
    with no restart and no config change (it reaches slurmctld through slurm.conf's SlurmctldHost
    list, as the clients do). A cordoned Node drains its Slurm node; a pod with sunk's
    schedulerName gets a placeholder job from the backup and runs where Slurm put it."""
    assert CONTROLLERS[1] in ha.ready() and ha.lease_holder() == ha.identity(CONTROLLERS[1]), ha.ready()
    before = runtime_restarts(ha)
    node = ha.pod("ha-cpu-1")["spec"]["nodeName"]
    ha.kubectl("cordon", node)
    try:
        drained = ha.wait("cpu-1 drained in Slurm", lambda: ha.login("sinfo -h -N -n cpu-1 -o '%T|%E'").stdout.strip(),
                          lambda line: line.startswith("drain"), 180)  # fmt: skip
        assert drained.split("|")[1].startswith("sunk:"), drained  # the syncer's reason
    finally:
        ha.kubectl("uncordon", node)
    ha.wait("cpu-1 idle again", lambda: ha.login("sinfo -h -N -n cpu-1 -o '%T'").stdout.strip(),
            lambda state: state == "idle", 180)  # fmt: skip
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "placed-by-the-backup", "namespace": NS},
        "spec": {
            "schedulerName": "sunk-scheduler",
            "restartPolicy": "Never",
            # sleep as PID 1 ignores SIGTERM, and a deleted pod keeps its Slurm job until it has
            # stopped: without this its 30 s default grace is waited out before the job ends
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "c", "image": ha.pod("ha-cpu-0")["spec"]["containers"][0]["image"],
                "command": ["sleep", "600"],
                "resources": {"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"memory": "256Mi"}},
            }],
        },
    }  # fmt: skip
    ha.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    try:
        bound = ha.wait("the pod running", lambda: ha.pod("placed-by-the-backup"),
                        lambda p: (p.get("status") or {}).get("phase") == "Running", 240)  # fmt: skip
        annotations = bound["metadata"]["annotations"]
        placeholder, slurm_node = annotations["slurm.sunk.dev/job-id"], annotations["slurm.sunk.dev/slurm-node"]
        assert bound["spec"]["nodeName"] == ha.pod(f"ha-{slurm_node}")["spec"]["nodeName"]
        queue = ha.login("squeue -h -o '%i %T %N'").stdout.split("\n")
        assert f"{placeholder} RUNNING {slurm_node}" in queue, queue
    finally:
        ha.kubectl("delete", "pod", "-n", NS, "placed-by-the-backup", "--wait=false", check=False)
    ha.wait("the placeholder job gone", lambda: ha.login(f"squeue -h -j {placeholder} -o %T", check=False).stdout,
            lambda text: "RUNNING" not in text, 180)  # fmt: skip
    assert CONTROLLERS[1] in ha.ready() and ha.lease_holder() == ha.identity(CONTROLLERS[1]), ha.ready()
    assert runtime_restarts(ha) == before, runtime_restarts(ha)


def test_the_primary_back_takes_control_again(ha: Ha, capsys: pytest.CaptureFixture[str]) -> None:
    """Failback: the Node started again, its slurmctld starts and asks the backup for control; the
    backup hands over after saving its state. The longest run of refused sbatch calls is the
    second outage."""
    node = ha.pod(CONTROLLERS[0])["spec"]["nodeName"]
    running = ha.sbatch("--wrap 'sleep 40'")
    ha.wait(f"job {running} running", lambda: ha.login(f"squeue -h -j {running} -o %T", check=False).stdout.strip(),
            lambda s: s == "RUNNING", 120)  # fmt: skip
    started = time.monotonic()
    done = sunk("local", "node", "start", node, env=ha.env)
    assert done.returncode == 0 and f"node {node}: agent started" in done.stdout, done.stderr
    accepted, gap, refused_since = [], 0.0, None
    while time.monotonic() - started < 300:
        tried = time.monotonic()
        attempt = ha.login("sbatch --parsable -o /dev/null --wrap true", check=False, timeout=180)
        if attempt.returncode == 0:
            accepted.append(attempt.stdout.strip())
            if refused_since is not None:
                gap, refused_since = max(gap, time.monotonic() - refused_since), None
        elif refused_since is None:
            refused_since = tried
        if ha.ready() == [CONTROLLERS[0]] and refused_since is None:
            break
        time.sleep(0.5)
    assert ha.ready() == [CONTROLLERS[0]], ha.ready()
    assert ha.wait("controller-0 holds the Lease again", ha.lease_holder,
                   lambda h: h == ha.identity(CONTROLLERS[0]), 60)  # fmt: skip
    ha.all_completed_once([running, *accepted])
    with capsys.disabled():
        print(f"\nlocal cluster, HA failback: controller-0 in control {time.monotonic() - started:.1f} s after its "
              f"Node started; longest run of refused sbatch: {gap:.1f} s; {len(accepted)} accepted meanwhile")  # fmt: skip


def test_the_primarys_slurmctld_killed_restarts_and_every_job_runs_once(
    ha: Ha, capsys: pytest.CaptureFixture[str]
) -> None:
    begun, steps = time.monotonic(), []
    running = ha.sbatch("--wrap 'sleep 8'")
    ha.wait(f"job {running} running", lambda: ha.login(f"squeue -h -j {running} -o %T", check=False).stdout.strip(),
            lambda s: s == "RUNNING", 120)  # fmt: skip
    steps.append(("the first job running", time.monotonic() - begun))
    # Submitted once the first runs: the save that holds it (state_saved) holds the first's start.
    pending = ha.sbatch(f"--dependency=afterany:{running} --wrap true")  # as in the Node-loss scenario
    restarts = ha.pod(CONTROLLERS[0])["status"]["containerStatuses"]
    before = next(c["restartCount"] for c in restarts if c["name"] == "slurmctld")
    state_saved(ha, pending)
    steps.append(("a state save holds the second", time.monotonic() - begun))
    started = time.monotonic()
    assert kill_slurmctld(ha, CONTROLLERS[0]) == 1
    arriving, outage = ha.until_accepted(started)
    # The restart won: controller-0's container restarted and its new slurmctld is the one
    # primary (read from the host), controller-0 held the Lease throughout; read so rather than
    # from Readiness, which lags by its 10 s probe period.
    uid = ha.pod(CONTROLLERS[0])["metadata"]["uid"]
    ha.wait("controller-0's slurmctld restarted, the one primary", lambda: (
        next(c["restartCount"] for c in ha.pod(CONTROLLERS[0])["status"]["containerStatuses"]
             if c["name"] == "slurmctld"), [p.split("@")[1] for p in primaries(ha)]),
        lambda s: s == (before + 1, [uid]), 180)  # fmt: skip
    steps.append(("SIGKILL, an sbatch accepted, the restarted slurmctld the one primary", time.monotonic() - begun))
    assert ha.lease_holder() == ha.identity(CONTROLLERS[0])
    ha.all_completed_once([running, pending, arriving])
    steps.append(("the three jobs COMPLETED once each in sacct", time.monotonic() - begun))
    with capsys.disabled():
        print(f"\nlocal cluster, HA: controller-0's slurmctld SIGKILLed to an sbatch accepted: {outage:.1f} s")
        print("".join(f"  {seconds:6.1f} s  {what}\n" for what, seconds in steps), end="")


def test_a_kubelet_crash_then_a_force_delete_never_gives_two_primaries(
    ha: Ha, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hazard of docs/how-to/ha.md's "What you must never do": the primary's Node agent stops
    and leaves its containers running (`sunk local node stop --keep-containers`, a kubelet crash),
    then its pod is force-deleted. The old slurmctld runs on, unwatched; the StatefulSet makes a
    new controller-0. Sampled from the host every second: never more than one slurmctld holds the
    primary mark, the old one included, until the orphan's fence has stopped it and the other
    controller, in control, holds the Lease and has accepted an `sbatch` from login, its Node's
    agent still away. (The agent, once back, kills what is left of the pod the API no longer has:
    tests/runtime/local/test_agent_stop.py.)

    The orphan's own fence stops it while the agent is still away (so nothing else could have):
    its ServiceAccount token is bound to the pod, which the API server no longer has, so it can't
    renew the Lease, and it stops its slurmctld RENEW_DEADLINE (10 s) after its last renewal; the
    slurmctld process, read from the host, ends.

    What keeps the second primary away here is the placement: the hard spread admits the new pod
    only to the stopped Node (the other holds controller-1; within the 50 s grace it is still
    Ready), whose agent never starts it. With a spare Node in the pool the new pod would start
    there and take control beside the old one until the fence stops one of them, within its 15 s
    grace (docs/how-to/ha.md, the fence): not shown here, the pool has no spare controller Node."""
    primary = ha.wait("one primary", ha.ready, lambda r: len(r) == 1, 120)[0]
    node, old = ha.pod(primary)["spec"]["nodeName"], ha.pod(primary)["metadata"]["uid"]
    done = sunk("local", "node", "stop", node, "--keep-containers", env=ha.env)
    assert done.returncode == 0 and f"node {node}" in done.stdout, done.stderr
    samples: list[list[str]] = []
    try:
        ha.kubectl("delete", "pod", "-n", NS, primary, "--force", "--grace-period=0")
        deleted, deleted_at = time.monotonic(), time.time()
        fenced = None
        while fenced is None:  # every second until the orphan's slurmctld is gone
            samples.append(primaries(ha))
            if not slurmctld_of(ha, [old]):
                fenced = time.monotonic() - deleted
            assert time.monotonic() - deleted < 90, (
                f"the orphan's slurmctld still ran 90 s after the force delete: {samples}"
            )
            time.sleep(1)
        assert any(old in s for seen in samples for s in seen), "the old slurmctld did not run on as primary"
        said = host_log(ha, old, "fence")
        assert "stopping slurmctld" in said, f"the orphan's slurmctld ended, but not by its fence: {said}"
        again = ha.pod(primary)
        assert again["metadata"].get("uid") != old and again["spec"].get("nodeName") in (node, None), again["spec"]
        # The orphan fenced, its Node's agent still away: the other controller takes control and
        # the Lease, and accepts work (submitted now, not after the Node is back: a returning
        # controller-0 asks for control, and the failback's outage is its own scenario's).
        survivor = next(name for name in CONTROLLERS if name != primary)
        taken, after = ha.until_accepted(deleted)
        # In sacct (one record, whatever its state), asked before the Node is back (then the
        # failback would answer): the takeover's reconfigure (primary-mark.sh, a SIGHUP to the
        # survivor's own slurmctld) lets its accounting through. Before, `scontrol reconfigure`
        # asked the lost controller-0 first and the job reached sacct only once the survivor had
        # handed control back, 35-50 s later.
        ha.wait(f"job {taken}, accepted by {survivor}, once in sacct", lambda: ha.states([taken]),
                lambda s: s.get(taken, "").endswith(" x1"), 60)  # fmt: skip
        accounted = time.monotonic() - deleted
        ha.wait(f"{survivor} holds the Lease", ha.lease_holder, lambda h: h == ha.identity(survivor), 60)
        samples.append(primaries(ha))
    finally:
        # The Node's agent back (the module's last scenario: nothing waits for it): it kills what
        # is left of the pod the API no longer has, shown in test_agent_stop.py, and starts the
        # new controller-0, which takes control back as in the failback scenario.
        done = sunk("local", "node", "start", node, env=ha.env)
    assert done.returncode == 0, done.stderr
    assert max(len(seen) for seen in samples) == 1, samples
    with capsys.disabled():
        print(f"\nlocal cluster, HA: the orphan's fence stopped its slurmctld {fenced:.1f} s after the force delete; "
              f"{survivor} accepted an sbatch {after:.1f} s after it, in sacct at {accounted:.1f} s")  # fmt: skip
        print(takeover_log(ha, survivor, deleted_at))
