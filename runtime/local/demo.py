"""`sunk local demo [STACK]` (what `make demo` runs): the stack on a local cluster, end to end,
driven only through kubectl, as a person would:

1. `sunk local up STACK`: the render applied, every pod Ready; the Nodes and pods;
2. the NodeSets' slurmd pods (made by the operator) idle in `sinfo` on the login pod;
3. a job on two nodes from login, its output and its `sacct` line;
4. with a `shared` NodeSet: a Slurm job holding one of its nodes, and beside it a pod that sunk's
   scheduler has Slurm place (GPUs when the NodeSet has them): its Node, its log, `squeue`;
5. `kubectl cordon` of a slurmd pod's Node: the syncer drains it in Slurm; uncordon resumes it;
6. `sunk local down`: nothing left.

It stops at the first step that fails, says which, and still tears down.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sunk import keys
from sunk.spec.nodeset import SHARED_FEATURE

from . import cli
from .cluster import State

T = TypeVar("T")

SAMPLE_JOB = (
    "srun -l sh -c 'echo \"task $SLURM_PROCID on $SLURMD_NODENAME (job $SLURM_JOB_ID, partition "
    "$SLURM_JOB_PARTITION)\"'"
)


class DemoFailed(Exception):
    pass


def _section(title: str, body: str = "") -> None:
    print(f"\n── {title} " + "─" * max(0, 70 - len(title)), flush=True)
    if body:
        print(body.rstrip("\n"), flush=True)


class Demo:
    def __init__(self, state: State, namespace: str) -> None:
        self.state, self.namespace = state, namespace

    def kubectl(self, *args: str, check: bool = True) -> str:
        try:
            return cli._kubectl(self.state, *args, check=check).stdout
        except RuntimeError as err:
            raise DemoFailed(str(err)) from None

    def login(self, script: str, check: bool = True) -> str:
        exec_ = ("exec", "-n", self.namespace, "deploy/" + self.login_deployment(), "-c", "sshd", "--")
        return self.kubectl(*exec_, "bash", "-c", script, check=check)

    def sbatch(self, options: str) -> str:
        """The job id; retried for a minute (slurmctld, reconfiguring as new nodes register, may
        briefly refuse a request for them)."""
        done = self.wait(
            f"sbatch {options}",
            lambda: self.login(f"sbatch --parsable {options} 2>&1", check=False).strip(),
            lambda out: out.isdigit(),
            180,
        )
        return done

    def login_deployment(self) -> str:
        found = self.objects("deployments", "app.kubernetes.io/component=login")
        if not found:
            raise DemoFailed(f"no login Deployment in {self.namespace}")
        return str(found[0]["metadata"]["name"])

    def objects(self, kind: str, selector: str = "") -> list[dict[str, Any]]:
        args = ["get", kind, "-n", self.namespace, "-o", "json"] + (["-l", selector] if selector else [])
        return list(json.loads(self.kubectl(*args))["items"])

    def wait(self, what: str, probe: Callable[[], T], done: Callable[[T], bool], timeout: float) -> T:
        deadline = time.monotonic() + timeout
        value = probe()
        while not done(value):
            if time.monotonic() > deadline:
                raise DemoFailed(f"{what}: not after {timeout:.0f} s (last: {str(value).strip()[:500]})")
            time.sleep(2)
            value = probe()
        return value

    # -- the steps --------------------------------------------------------------------------
    def nodes_idle(self) -> list[dict[str, Any]]:
        nodesets = self.objects("nodesets")
        for ns in nodesets:
            name, want = ns["metadata"]["name"], int((ns.get("spec") or {}).get("replicas") or 0)

            def idle(status: dict[str, Any], want: int = want) -> bool:
                return int(status.get("idle", 0)) >= want

            def status(name: str = name) -> dict[str, Any]:
                return self._status(name)

            self.wait(f"NodeSet {name}: {want} nodes idle in Slurm", status, idle, 600)
        _section("sinfo (on the login pod: the operator's slurmd pods, registered)", self.login("sinfo -N -l"))
        return nodesets

    def _status(self, name: str) -> dict[str, Any]:
        found = json.loads(self.kubectl("get", "nodeset", "-n", self.namespace, name, "-o", "json"))
        return dict(found.get("status") or {})

    def two_node_job(self) -> None:
        """On any two nodes of the default partition (`up` returned once slurmctld had bound every
        registered node into its topology, so a bare -N2 is taken at once)."""
        job = self.sbatch(f"-N2 -J sunk-demo -o /tmp/%j.out --wrap {shlex.quote(SAMPLE_JOB)}")
        fields = "JobID,JobName,Partition,NodeList,AllocCPUS,State,Elapsed"
        line = self.wait(
            f"job {job} in sacct",
            lambda: self.login(f"sacct -n -X -P -j {job} -o State,NodeList", check=False).strip(),
            lambda text: text.split("|")[0] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"),
            300,
        )
        state, nodes = line.split("|")
        first = self.login(f"scontrol show hostnames {nodes} | head -1").strip()
        pods = self.objects("pods", f"{keys.NODE}={first}")
        output = self.kubectl("exec", "-n", self.namespace, pods[0]["metadata"]["name"], "-c", "slurmd", "--",
                              "cat", f"/tmp/{job}.out", check=False) if pods else ""  # fmt: skip
        _section(f"a 2-node job from login: job {job} {state}", output)
        _section("sacct", self.login(f"sacct -j {job} -X -o {fields}"))
        if state != "COMPLETED":
            raise DemoFailed(f"job {job} ended {state}")

    def pod_beside_a_job(self, nodesets: list[dict[str, Any]]) -> None:
        shared = [n for n in nodesets if (n.get("spec") or {}).get("resourceMode") == "shared"]
        if not shared:
            _section("no shared NodeSet: no pod placed by Slurm beside a job")
            return
        spec = shared[0]["spec"]
        gpus = int((spec.get("gpus") or {}).get("count") or 0)
        job = self.sbatch(f"-N1 --exclusive -C {SHARED_FEATURE} -J holds-a-node -o /dev/null --wrap 'sleep 600'")
        try:
            self.wait(f"job {job} running", lambda: self.login(f"squeue -h -j {job} -o %T"), lambda s: "RUNNING" in s,
                      120)  # fmt: skip
            limits: dict[str, str] = {"memory": "512Mi"}
            if gpus:
                limits[(spec.get("gpus") or {}).get("resourceName", "nvidia.com/gpu")] = "1"
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "inference", "namespace": self.namespace},
                "spec": {
                    "schedulerName": "sunk-scheduler",
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "server",
                            "image": spec["slurmdImage"],
                            "command": ["sh", "-c", 'echo "inference server up on $(hostname), GPUs: '
                                        '${NVIDIA_VISIBLE_DEVICES:-none}"; exec sleep 600'],
                            "resources": {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": limits},
                        }
                    ],
                },
            }  # fmt: skip
            done = subprocess.run(
                ["kubectl", "--kubeconfig", self.state.kubeconfig, "apply", "-f", "-"],
                input=json.dumps(pod),
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise DemoFailed(f"the inference pod: {done.stderr.strip()}")
            self.wait(
                "the inference pod running",
                lambda: json.loads(self.kubectl("get", "pod", "-n", self.namespace, "inference", "-o", "json")),
                lambda p: (p.get("status") or {}).get("phase") == "Running",
                180,
            )
            _section(
                "a pod placed by Slurm (sunk-scheduler) beside a Slurm job",
                self.kubectl("get", "pod", "-n", self.namespace, "inference", "-o", "wide"),
            )
            log = self.wait(
                "the inference pod's log",
                lambda: self.kubectl("logs", "-n", self.namespace, "inference", check=False),
                lambda text: "inference server up" in text,
                30,
            )
            print(f"log: {log.strip()}")
            _section("squeue (the job, and the pod's placeholder job)", self.login("squeue -o '%.6i %.40j %.8T %N'"))
        finally:
            self.kubectl("delete", "pod", "-n", self.namespace, "inference", "--ignore-not-found", "--wait=false",
                         check=False)  # fmt: skip
            self.login(f"scancel {job}", check=False)

    def drain(self) -> None:
        pods = [p for p in self.objects("pods", "app.kubernetes.io/component=slurmd") if p["spec"].get("nodeName")]
        if not pods:
            raise DemoFailed("no slurmd pod to drain")
        pod = sorted(pods, key=lambda p: p["metadata"]["name"])[0]
        node, slurm_node = pod["spec"]["nodeName"], pod["metadata"]["labels"][keys.NODE]
        print(self.kubectl("cordon", node).strip())
        try:
            line = self.wait(
                f"{slurm_node} drained in Slurm",
                lambda: self.login(f"sinfo -h -N -n {slurm_node} -o '%T|%E'", check=False).strip(),
                lambda text: text.startswith("drain"),
                120,
            )
            _section(f"kubectl cordon {node}: the syncer drains {slurm_node}", line.replace("|", "  reason: "))
        finally:
            print(self.kubectl("uncordon", node).strip())
        state = self.wait(
            f"{slurm_node} resumed",
            lambda: self.login(f"sinfo -h -N -n {slurm_node} -o %T", check=False).strip(),
            lambda text: text == "idle",
            120,
        )
        print(f"after uncordon: {slurm_node} {state}")


def cmd_demo(args: argparse.Namespace) -> int:
    started = time.monotonic()
    project = cli.project_dir()
    if cli.running(cli.workdir(project)) is not None:
        print("sunk local demo: a local cluster is already running here; `sunk local down` stops it", file=sys.stderr)
        return 1
    up = argparse.Namespace(stack=args.stack, timeout=args.timeout, no_wait=False, nodes=None)
    _section(f"sunk local up {args.stack}")
    try:
        code = cli.cmd_up(up)
        state = cli.running(cli.workdir(project))
        if code != 0 or state is None:
            raise DemoFailed("sunk local up did not bring every pod to Ready")
        namespaces = json.loads(cli._kubectl(state, "get", "nodesets", "-A", "-o", "json").stdout)["items"]
        namespace = namespaces[0]["metadata"]["namespace"] if namespaces else "default"
        demo = Demo(state, namespace)
        _section("Nodes (derived from the stack)", demo.kubectl("get", "nodes", "-L", keys.LOCAL_POOL))
        nodesets = demo.nodes_idle()
        _section("pods", demo.kubectl("get", "pods", "-A", "-o", "wide"))
        demo.two_node_job()
        demo.pod_beside_a_job(nodesets)
        demo.drain()
    except DemoFailed as err:
        print(f"\n✗ demo failed: {err}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        code = 130
    else:
        code = 0
    finally:
        _section("sunk local down")
        cli.cmd_down(argparse.Namespace())
    print(f"\n{'✓ demo done' if code == 0 else '✗ demo failed'} in {time.monotonic() - started:.0f} s")
    return code
