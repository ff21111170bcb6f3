"""Fixtures for the scheduler's real-Slurm tests: the harness (acme-dev: QOS low/high with preemption),
kmock as the Kubernetes API with one slurmd pod and Node per simulated Slurm node, and the scheduler
as its own process (`python -m sunk.runtime.scheduler`), so it can be killed for real.

kubesim admits pods as a kubelet would. Each Node's allocatable is its Slurm node's CPUs, memory
and GPUs plus one CPU and 2 GiB (what the kubelet leaves beside them); each slurmd pod requests what
the real manifest (sunk.manifests.nodeset_pod) requests for its NodeSet's resourceMode: acme-dev's
cpu NodeSet is exclusive (slurmd requests the whole Slurm node), its gpu NodeSet shared (slurmd asks
500m and 1 GiB, no GPUs), so sunk-scheduled pods fit only on the gpu Nodes."""

from __future__ import annotations

import os
import signal
import subprocess
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from sunk.runtime.harness import LocalSlurm
from sunk.runtime.harness.image_process import RuntimeImage
from sunk.runtime.harness.ports import free_ports

from sunk import keys
from sunk.manifests.nodeset_pod import nodeset_pod
from sunk.spec.cluster import ClusterSpec
from sunk.spec.inference import InferenceNamespaceSpec, InferenceSpec
from sunk.spec.scheduling import AccountSpec, QosSpec
from sunk.stackfile import load_stack
from tests.support.kubesim import KubeSim
from tests.support.nodeset_objects import resource_spec
from tests.support.rawclient import as_body, raw
from tests.support.stacks import FIXTURE_STACKS
from tests.support.waiting import wait_for


def kube_node(spec: ClusterSpec, nodeset: str, name: str) -> dict[str, Any]:
    ns = spec.nodeset(nodeset)
    allocatable = {"cpu": str(ns.cpus + 1), "memory": f"{ns.memory_mib + 2048}Mi", "pods": "110"}
    if ns.gpus is not None:
        allocatable["nvidia.com/gpu"] = str(ns.gpus.count)
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def slurmd_pod(spec: ClusterSpec, nodeset: str, slurm_node: str) -> tuple[dict[str, str], dict[str, Any]]:
    """The labels and the containers (with their requests) of the NodeSet's real slurmd pod."""
    rs = resource_spec(spec, nodeset)
    config_keys = {name: ["file"] for name in rs.config_files.values()}
    pod = nodeset_pod(rs, namespace=spec.ns, config_keys=config_keys, ordinal=int(slurm_node.rsplit("-", 1)[1]))
    strip = ("name", "image", "resources", "restartPolicy")
    containers = {
        kind: [{k: c[k] for k in strip if k in c} for c in pod["spec"].get(kind) or []]
        for kind in ("containers", "initContainers")
    }
    return {**pod["metadata"]["labels"], keys.NODESET: nodeset}, containers


class Cluster:
    """The Kubernetes side as a test sees it: typed helpers over the official client."""

    def __init__(self, sim: KubeSim, slurm: LocalSlurm) -> None:
        self.sim = sim
        self.slurm = slurm
        self.api = client.CoreV1Api(sim.api_client())
        self.node_of = {n.name: f"k8s-{n.name}" for n in slurm.nodes}
        for name, node in self.node_of.items():
            nodeset = next(n.nodeset for n in slurm.nodes if n.name == name)
            self.api.create_node(as_body(kube_node(slurm.spec, nodeset, node)), _preload_content=False)
            labels, pod = slurmd_pod(slurm.spec, nodeset, name)
            slurmd = {
                "metadata": {"name": f"{slurm.spec.name}-{name}", "labels": labels},
                "spec": {"hostname": name, "nodeName": node, **pod},
            }
            self.api.create_namespaced_pod(slurm.spec.ns, as_body(slurmd), _preload_content=False)

    def create_pod(
        self,
        name: str,
        *,
        ns: str = "ml",
        cpu: str = "1",
        memory: str = "100Mi",
        gpus: int = 0,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        requests: dict[str, str] = {"cpu": cpu, "memory": memory}
        if gpus:
            requests["nvidia.com/gpu"] = str(gpus)
        pod = {
            "metadata": {"name": name, "annotations": dict(annotations or {})},
            "spec": {
                "schedulerName": "sunk-scheduler",
                "containers": [{"name": "main", "image": "app", "resources": {"requests": requests}}],
            },
        }
        self.api.create_namespaced_pod(ns, as_body(pod), _preload_content=False)

    def pod(self, name: str, ns: str = "ml") -> dict[str, Any] | None:
        try:
            return raw(self.api.read_namespaced_pod(name, ns, _preload_content=False))
        except client.ApiException as e:
            if e.status == 404:
                return None
            raise

    def existing_pod(self, name: str, ns: str = "ml") -> dict[str, Any]:
        pod = self.pod(name, ns)
        assert pod is not None, f"pod {ns}/{name} not found"
        return pod

    def wait_bound(self, name: str, ns: str = "ml", timeout: float = 120.0) -> dict[str, Any]:
        def bound() -> dict[str, Any] | None:
            pod = self.pod(name, ns)
            return pod if pod and pod["spec"].get("nodeName") else None

        return wait_for(f"pod {ns}/{name} bound", bound, timeout)

    @staticmethod
    def wait_for(what: str, check: Callable[[], Any], timeout: float = 120.0) -> Any:
        return wait_for(what, check, timeout)

    def delete_pod(self, name: str, ns: str = "ml") -> None:
        self.api.delete_namespaced_pod(name, ns, _preload_content=False)

    def events(self, name: str, ns: str = "ml") -> list[dict[str, Any]]:
        items = raw(self.api.list_namespaced_event(ns, _preload_content=False))["items"]
        return [e for e in items if e["involvedObject"]["name"] == name and e["metadata"].get("namespace", ns) == ns]

    def condition(self, name: str, ns: str = "ml") -> dict[str, Any] | None:
        pod = self.pod(name, ns) or {}
        found = [c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"]
        return found[0] if found else None


class SchedulerProcess:
    """The scheduler from the runtime image, as its Deployment runs it."""

    def __init__(self, image: RuntimeImage, env: dict[str, str], log: Path) -> None:
        self.port = int(env["SUNK_METRICS_PORT"])
        self._log = log.open("ab")
        self.proc = image.popen("sunk.runtime.scheduler", env, stdout=self._log, stderr=subprocess.STDOUT)
        self.log = log
        wait_for("scheduler ready", self.ready, timeout=120)

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as reply:
                return reply.status, reply.read().decode()
        except OSError as e:
            code = getattr(e, "code", 0)
            return code, ""

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"scheduler exited {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
        return self.get("/readyz")[0] == 200

    def metric(self, name: str) -> float:
        """Sum of a metric's samples (all label values)."""
        _, text = self.get("/metrics")
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name))

    def kill(self) -> None:
        """SIGKILL: no cleanup, like a node dying mid-cycle."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._log.close()


StartScheduler = Callable[..., SchedulerProcess]
"""The `start_scheduler` fixture: starts one more scheduler process (each is killed at teardown)."""


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    # Accounting enforces associations: placeholder jobs run as the runtime's user (its association
    # comes with every cluster); `games` gets one to submit jobs of its own (not `nobody`: Slurm
    # 26.05 resolves no user of that name).
    # Two teams' inference namespaces, each charged to its account and capped by its QOS (GrpTRES,
    # MaxTRESPerAccount): test_real_slurm.py::test_each_namespace_*; sreport's figures per team after
    # a rollup: test_real_slurm.py::test_sreport_*.
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    accounts = [
        AccountSpec(name="people", users=["games"]),
        AccountSpec(name="serving", qos=["serving"], default_qos="serving"),
        AccountSpec(name="research", qos=["research"], default_qos="research"),
    ]
    qos = [
        *spec.qos,
        QosSpec(name="serving", grp_tres={"cpu": 2}),
        QosSpec(name="research", max_tres_per_account={"cpu": 1}),
    ]
    inference = InferenceSpec(
        namespaces=[
            InferenceNamespaceSpec(name="team-a", account="serving", qos="serving"),
            InferenceNamespaceSpec(name="team-b", account="research", qos="research"),
        ]
    )
    spec = spec.model_copy(update={"accounts": accounts, "qos": qos, "inference": inference})
    with LocalSlurm.start(spec) as cluster:
        yield cluster


@pytest.fixture
def k8s(slurm: LocalSlurm) -> Iterator[Cluster]:
    with KubeSim() as sim:
        sim.add_namespace("ml")
        yield Cluster(sim, slurm)
    slurm.cancel_all()


@pytest.fixture
def start_scheduler(
    slurm: LocalSlurm, k8s: Cluster, tmp_path: Path, runtime_image: RuntimeImage
) -> Iterator[StartScheduler]:
    started: list[SchedulerProcess] = []
    kubeconfig = k8s.sim.kubeconfig(tmp_path / "kubeconfig")

    def start(**settings: str) -> SchedulerProcess:
        """`settings`: more SUNK_* variables, e.g. SUNK_GANG_TOPOLOGY="block"."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "KUBECONFIG": str(kubeconfig),
            "SUNK_CLUSTER": slurm.spec.name,
            "SUNK_NAMESPACE": slurm.spec.ns,
            "SUNK_SLURMRESTD_URL": slurm.rest_url,
            "SUNK_JWT_KEY_FILE": str(slurm.jwt_key_path),
            "SUNK_SLURM_USER": "slurm",
            "SUNK_METRICS_PORT": str(free_ports(1)[0]),
            "SUNK_SCHEDULER_INTERVAL": "0.2",
            "SUNK_POD_NAMESPACES": ",".join(["ml", *(n.name for n in slurm.spec.inference.namespaces)]),
            "SUNK_BIND_GRACE": "3",  # reroutes within a test's patience (60 s in production)
            # As the Deployment sets it (sunk renders InactiveLimit=0): allocations first.
            "SUNK_IMMEDIATE_ALLOCATION": "true",
            **settings,
        }
        proc = SchedulerProcess(runtime_image, env, tmp_path / f"scheduler-{len(started)}.log")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
