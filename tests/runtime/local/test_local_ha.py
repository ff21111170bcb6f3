"""slurmctld with a backup (`controller.replicas: 2`) on the local cluster, driven only through
`sunk local`, the real kubectl and the login pod's Slurm clients, with jobs running, pending and
arriving at each outage:

1. the primary's Node loses power (`sunk local node stop`): the backup takes control, becomes
   the Ready pod, accepts `sbatch` from the login pod and a REST submission (slurmrestd through
   `kubectl port-forward`, root's `scontrol token`); the running job completes, the pending one
   starts, sacct has every job once;
   with controller-1 in control, the syncer mirrors a cordon into a drain and the scheduler
   places a pod, neither restarted;
2. the primary comes back (`sunk local node start`): it takes control back; the second, shorter
   outage is measured;
3. the primary's slurmctld process is killed (SIGKILL from the host: it is its pod's PID 1): the
   kubelet restarts it, the same guarantees;
4. both controllers down, then one back: it resumes from the shared state, every job as it was.

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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sunk.runtime.slurmrest import JobSubmit, SlurmApiError, SlurmRestClient, StaticToken

from sunk.naming import PRIMARY_MARK, SLURMRESTD_PORT
from tests.support.localcluster import LocalCluster, booted, ready, sunk

pytestmark = pytest.mark.slurm

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
            "slurm": {"version": "26.05"},
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
            # shared: the scheduler's pods run there through Slurm (its placeholders ask for sunk_shared)
            "nodesets": [{"name": "cpu", "replicas": 2, "cpus": 2, "memoryMib": 2048, "resourceMode": "shared"}],
            "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
        },
    }
}


class Ha(LocalCluster):
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
            except (SlurmApiError, httpx.HTTPError) as error:
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
    (seen here: the pending job lost at a SIGKILL, its id given to the next job)."""

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
    uid, base, mine = ha.pod(pod)["metadata"]["uid"], ha.env["SUNK_LOCAL_DIR"], 0
    for proc in Path("/proc").iterdir():
        try:
            if not (proc.name.isdigit() and (proc / "comm").read_text().startswith("slurmctld")):
                continue
            root = os.readlink(proc / "root")
            if root.startswith(base) and f"/pods/{uid}/" in root + "/":
                os.kill(int(proc.name), 9)
                mine += 1
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return mine


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
    with booted(tmp_path_factory.mktemp("local-ha"), STACK, stack_name="acme-ha") as boot:
        running = Ha(boot.env, boot.kubeconfig)
        assert boot.up.returncode == 0, boot.up.stderr[-3000:] + boot.up.stdout[-3000:]
        running.wait("2 nodes idle", lambda: running.login("sinfo -h -N -o %T", check=False).stdout.split(),
                     lambda states: states == ["idle", "idle"], 300)  # fmt: skip
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


def test_the_primarys_node_lost_the_backup_takes_over_and_every_job_runs_once(
    ha: Ha, capsys: pytest.CaptureFixture[str]
) -> None:
    running = ha.sbatch("--wrap 'sleep 30'")
    pending = ha.sbatch("--begin=now+20 --wrap true")
    ha.wait(f"job {running} running", lambda: ha.login(f"squeue -h -j {running} -o %T", check=False).stdout.strip(),
            lambda s: s == "RUNNING", 120)  # fmt: skip
    node = ha.pod(CONTROLLERS[0])["spec"]["nodeName"]
    state_saved(ha, pending)
    with ha.rest() as rest:
        started = time.monotonic()
        done = sunk("local", "node", "stop", node, env=ha.env)
        assert done.returncode == 0 and f"node {node}: agent stopped" in done.stdout, done.stderr
        arriving, outage = ha.until_accepted(started)
        by_rest, rest_outage = ha.rest_until_accepted(rest, started)
    ready = ha.wait("controller-1 the one Ready pod", ha.ready, lambda r: r == [CONTROLLERS[1]], 120)
    ready_after = time.monotonic() - started
    assert ready
    assert ha.wait("controller-1 holds the Lease", ha.lease_holder, lambda h: h == ha.identity(CONTROLLERS[1]), 60)
    ha.all_completed_once([running, pending, arriving, by_rest])
    with capsys.disabled():
        print(f"\nlocal cluster, HA: {node} (controller-0) stopped to an sbatch accepted from login: {outage:.1f} s, "
              f"a REST submission accepted: {rest_outage:.1f} s; controller-1 Ready after {ready_after:.1f} s")  # fmt: skip


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
    assert ha.ready() == [CONTROLLERS[1]], ha.ready()
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
    assert ha.ready() == [CONTROLLERS[1]] and runtime_restarts(ha) == before, runtime_restarts(ha)


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
    running = ha.sbatch("--wrap 'sleep 20'")
    pending = ha.sbatch("--begin=now+10 --wrap true")
    ha.wait(f"job {running} running", lambda: ha.login(f"squeue -h -j {running} -o %T", check=False).stdout.strip(),
            lambda s: s == "RUNNING", 120)  # fmt: skip
    restarts = ha.pod(CONTROLLERS[0])["status"]["containerStatuses"]
    before = next(c["restartCount"] for c in restarts if c["name"] == "slurmctld")
    state_saved(ha, pending)
    started = time.monotonic()
    assert kill_slurmctld(ha, CONTROLLERS[0]) == 1
    arriving, outage = ha.until_accepted(started)
    ha.wait("controller-0's slurmctld restarted and the one Ready pod", lambda: (
        next(c["restartCount"] for c in ha.pod(CONTROLLERS[0])["status"]["containerStatuses"]
             if c["name"] == "slurmctld"), ha.ready()), lambda s: s == (before + 1, [CONTROLLERS[0]]), 180)  # fmt: skip
    ha.all_completed_once([running, pending, arriving])
    with capsys.disabled():
        print(f"\nlocal cluster, HA: controller-0's slurmctld SIGKILLed to an sbatch accepted: {outage:.1f} s")


def test_both_controllers_down_then_one_back_resumes_from_the_shared_state(ha: Ha) -> None:
    """Both controller pods deleted at once, the StatefulSet makes both again (Parallel): whichever
    takes control reads the one StateSaveLocation; a held job and the job-id sequence go on."""
    held = ha.sbatch("--hold --wrap true")
    state_saved(ha, held)
    uids = {name: ha.pod(name)["metadata"]["uid"] for name in CONTROLLERS}
    ha.kubectl("delete", "pod", "-n", NS, *CONTROLLERS, "--wait=false")
    ha.wait("both controller pods replaced", lambda: {n: ha.pod(n)["metadata"].get("uid") for n in CONTROLLERS},
            lambda now: all(now[n] not in (None, uids[n]) for n in CONTROLLERS), 240)  # fmt: skip
    ha.wait("one controller Ready", ha.ready, lambda r: len(r) == 1, 240)
    queue = ha.wait("the held job still queued", lambda: ha.login(f"squeue -h -j {held} -o %T", check=False).stdout,
                    lambda text: "PENDING" in text, 120)  # fmt: skip
    assert queue.strip() == "PENDING"
    ha.login(f"scontrol release {held}")
    after = ha.sbatch("--wrap true")
    assert int(after) > int(held)
    ha.all_completed_once([held, after])


def test_a_kubelet_crash_then_a_force_delete_never_gives_two_primaries(ha: Ha) -> None:
    """The hazard of docs/how-to/ha.md's "What you must never do": the primary's Node agent stops
    and leaves its containers running (`sunk local node stop --keep-containers`, a kubelet crash),
    then its pod is force-deleted. The old slurmctld runs on, unwatched; the StatefulSet makes a
    new controller-0. Sampled from the host every second: never more than one slurmctld holds the
    primary mark, the old one included, until the Node's agent is back (it kills the containers of
    the pod the API no longer has) and one controller is Ready again.

    What keeps the second primary away here is the placement: the hard spread admits the new pod
    only to the stopped Node (the other holds controller-1; within the 50 s grace it is still
    Ready), whose agent never starts it. With a spare Node in the pool the new pod would start
    there and take control beside the old one until the fence stops one of them, within its 15 s
    grace (the local cluster's tokens are not bound, so the orphan's fence renews on:
    docs/how-to/ha.md, the fence)."""
    primary = ha.wait("one primary", ha.ready, lambda r: len(r) == 1, 120)[0]
    node, old = ha.pod(primary)["spec"]["nodeName"], ha.pod(primary)["metadata"]["uid"]
    done = sunk("local", "node", "stop", node, "--keep-containers", env=ha.env)
    assert done.returncode == 0 and f"node {node}" in done.stdout, done.stderr
    stopped, samples = True, []
    try:
        ha.kubectl("delete", "pod", "-n", NS, primary, "--force", "--grace-period=0")
        until = time.monotonic() + 20
        while time.monotonic() < until:
            samples.append(primaries(ha))
            time.sleep(1)
        assert any(old in s for seen in samples for s in seen), "the old slurmctld ran on as primary"
        again = ha.pod(primary)
        assert again["metadata"].get("uid") != old and again["spec"].get("nodeName") in (node, None), again["spec"]
        done = sunk("local", "node", "start", node, env=ha.env)
        assert done.returncode == 0, done.stderr
        stopped = False
        ha.wait("one controller Ready, the old slurmctld gone", lambda: (ha.ready(), primaries(ha)),
                lambda s: len(s[0]) == 1 and len(s[1]) == 1 and old not in s[1][0], 240)  # fmt: skip
        samples.append(primaries(ha))
    finally:
        if stopped:
            sunk("local", "node", "start", node, env=ha.env)
    assert max(len(seen) for seen in samples) == 1, samples
    ha.all_completed_once([ha.sbatch("--wrap true")])
