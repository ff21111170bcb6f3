"""The Slurm 24.11 -> 26.05 upgrade on a local cluster, applied as a GitOps tool would (`sunk local
apply`: the whole render at once), so the order is the pods' own (sunk.manifests.upgrade): a live
24.11 cluster with a two-node job running, a job pending for nodes, a held job, a job array and a
QOS limit; then the same stack with slurm.version 26.05 and upgradeFrom 24.11. The running job
completes on its old slurmd, the pending ones start, sacct keeps every old job, the QOS refuses
what it refused, and every daemon reports 26.05. Prints the timeline: when each step was seen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk.images import release_of
from tests.support import waiting

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[3]
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
# A two-node job whose steps end once slurmctld answers at 26.05: it spans the upgrade.
RUNNING_JOB = (
    "cat > /tmp/upgrade-job.sh <<'EOF'\n"
    "#!/bin/bash\n"
    "step='until scontrol show config | grep -q \"^SLURM_VERSION *= *26.05\"; do sleep 2; done'\n"
    'srun bash -c "$step"\n'
    "EOF\n"
    "sbatch --parsable -A lab -N2 --exclusive -t 20 -o /dev/null /tmp/upgrade-job.sh"
)


UPGRADE_INIT = ("db-guard", "wait-slurmdbd", "state-guard", "wait-slurmctld")
"""The init containers an upgrade adds (sunk.manifests.upgrade); db-guard is a native sidecar."""


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _sunk(*args: str, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sunk", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


class Drill:
    def __init__(self, env: dict[str, str], kubeconfig: str) -> None:
        self.env, self.kubeconfig = env, kubeconfig
        self.started = time.monotonic()
        self.timeline: list[tuple[float, str]] = []

    def mark(self, what: str) -> None:
        self.timeline.append((time.monotonic() - self.started, what))

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", self.kubeconfig, *args], capture_output=True, text=True, timeout=180
        )
        assert not check or done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done

    def login(self, script: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.kubectl("exec", "-n", NS, "deploy/drill-login", "-c", "sshd", "--", "bash", "-c", script,
                            check=check)  # fmt: skip

    def wait(self, what: str, probe: Callable[[], Any], done: Callable[[Any], bool], timeout: float) -> Any:
        seen: list[Any] = []

        def check() -> tuple[Any] | None:
            seen[:] = [probe()]
            return (seen[0],) if done(seen[0]) else None

        try:
            value = waiting.wait_for(what, check, timeout=timeout, interval=2)[0]
        except AssertionError:
            pods = self.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
            pytest.fail(f"{what}: not after {timeout:.0f} s; last: {str(seen[-1] if seen else None)[:2000]}\n{pods}")
        self.mark(what)
        return value

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
        """The upgrade's init containers of the component's pod: name -> (seconds it held the pod,
        its log). A sidecar still running held it until the main container started."""
        listed = self.kubectl("get", "pods", "-n", NS, "-l", f"app.kubernetes.io/component={component}", "-o", "json")
        [pod] = [p for p in json.loads(listed.stdout)["items"] if not p["metadata"].get("deletionTimestamp")]
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
    env = {**os.environ, "SUNK_LOCAL_DIR": str(folder / "clusters")}
    for release in (SOURCE, TARGET):
        built = _sunk("images", "build", "--slurm", release, env=env, timeout=1800)
        assert built.returncode == 0, built.stderr
    stack = folder / "Pulumi.acme-drill.yaml"
    stack.write_text(yaml.safe_dump(STACK, sort_keys=False))
    up = _sunk("local", "up", str(stack), "--no-wait", env=env)
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        running = Drill(env, _sunk("local", "kubeconfig", env=env).stdout.strip())
        running.wait(
            "3 nodes idle on 24.11",
            lambda: running.login("sinfo -h -N -o '%T %v'", check=False).stdout.splitlines(),
            lambda lines: sorted(lines) == [f"idle {release_of(SOURCE).slurm}"] * 3,
            600,
        )
        yield running
    finally:
        down = _sunk("local", "down", env=env)
        assert down.returncode == 0, down.stderr


def test_the_upgrade_applied_at_once_loses_nothing(drill: Drill, tmp_path: Path) -> None:
    new = release_of(TARGET).slurm
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
    refusal = drill.refusal()
    assert sum(1 for line in before.values() if "|COMPLETED|" in line) >= 20
    queue = drill.states()
    assert queue[pending] == "PENDING" and queue[held] == "PENDING" and queue[running] == "RUNNING"

    stack = dict(STACK)
    cluster = {**STACK["config"]["sunk:cluster"], "slurm": {"version": TARGET, "upgradeFrom": SOURCE}}
    stack["config"] = {**STACK["config"], "sunk:cluster": cluster}
    changed = tmp_path / "Pulumi.acme-drill.yaml"
    changed.write_text(yaml.safe_dump(stack, sort_keys=False))
    drill.mark("apply: slurm.version 26.05, upgradeFrom 24.11")
    applied = _sunk("local", "apply", str(changed), env=drill.env)
    assert applied.returncode == 0, applied.stderr
    drill.mark("apply returned")

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
    print("\nlocal cluster upgrade, Slurm 24.11 -> 26.05 (kubectl apply of the whole render):")
    for seconds, what in drill.timeline:
        print(f"  {seconds:7.1f} s  {what}")
    print("what the pods' upgrade init containers did, and how long each held its pod:")
    for component, containers in pods.items():
        for name, (seconds, log) in containers.items():
            last = log.strip().splitlines()[-1] if log.strip() else ""
            print(f"  {component:<10} {name:<14} {seconds:5.1f} s  {last}")
    print(f"  versions: {versions}")

    # The copies were taken in the cluster, before each conversion, and each wait ended on 26.05.
    assert set(pods["accounting"]) == {"db-guard"} and set(pods["login"]) == {"wait-slurmctld"}
    dbguard = pods["accounting"]["db-guard"][1]
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
    assert drill.refusal() == refusal
