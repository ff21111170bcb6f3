"""The operator against REAL slurmctld + slurmrestd (the harness) and kmock as the Kubernetes API.

Pods are simulated by `Kubelet`, which plays scheduler and kubelet: a new pod is bound to the
Node, its slurmd started in the harness (`start_slurmd`, a dynamic node registering like the
pod's `slurmd -Z` would) and marked Running/Ready; a pod marked for deletion (our finalizer
holds it, as a terminating pod exists until its containers stop) gets its slurmd stopped, then
goes. The operator runs its real loop (leader election, resync every 0.5 s) in a thread and
reaches Slurm through SlurmClients, which reads the JWT key from a Secret in kmock."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.operator.cache import watch
from sunk.runtime.operator.kube import OfficialKube
from sunk.runtime.operator.loop import Operator
from sunk.runtime.operator.settings import Settings
from sunk.runtime.slurmrest import JwtMinter, SlurmRestClient

from sunk import keys
from sunk.hostlist import expand
from sunk.naming import OPERATOR_REASON_PREFIX
from sunk.nodeset_resource import GROUP, PLURAL, VERSION
from sunk.spec.cluster import ClusterSpec
from tests.support.kubesim import KubeSim
from tests.support.nodeset_objects import config_map_objects, nodeset_object, resource_spec
from tests.support.rawclient import as_body, raw
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

SPEC = ClusterSpec.model_validate(
    {
        "name": "ops",
        "tenant": "acme",
        "nodesets": [{"name": "cpu", "replicas": 3, "cpus": 1, "memoryMib": 512}],
        "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
        "topology": {"plugin": "tree", "labelKeys": ["example.com/spine"]},
        "login": {"enabled": False},
    }
)
NS = SPEC.ns
NODESET = "ops-cpu"
LABELS = {"example.com/spine": "s1"}
FINALIZER = "test.sunk.dev/kubelet"


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    # No slurmd at start: every one is started for a pod the operator creates.
    with LocalSlurm.start(SPEC, nodes=[]) as cluster:
        yield cluster


class Kubelet(threading.Thread):
    """A stand-in for the scheduler and kubelet of one Node, `node-0`: it binds each new pod there,
    starts the pod's slurmd in the harness, and reports the pod Running and Ready with its slurmd
    container's start and restart count as a kubelet would; a pod with a deletionTimestamp gets its
    slurmd stopped, then its finalizer removed.

    What it can't model, so no test here relies on it: the pod spec itself (images, volumes, env,
    probes, users: the local cluster's tests run those), several Nodes and their capacity, a
    container that crashes or restarts (restartCount stays 0), readiness that lags the start,
    grace periods and preStop hooks, and a kubelet that is down or slow."""

    def __init__(self, url: str, slurm: LocalSlurm) -> None:
        super().__init__(name="kubelet", daemon=True)
        self.core = client.CoreV1Api(client.ApiClient(client.Configuration(host=url)))
        self.slurm = slurm
        self.running: dict[str, str] = {}  # pod name -> Slurm node whose slurmd runs
        self.busy_at_delete: dict[str, bool] = {}
        self.deleted: list[str] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def pods(self) -> list[dict[str, Any]]:
        return list(raw(self.core.list_namespaced_pod(NS, _preload_content=False))["items"])

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.step()
            except Exception as err:  # the test asserts on errors; the thread must keep going
                self.errors.append(repr(err))
            self.stop.wait(0.1)

    def step(self) -> None:
        seen = set()
        for pod in self.pods():
            meta, name = pod["metadata"], pod["metadata"]["name"]
            seen.add(name)
            host = pod["spec"]["hostname"]
            if meta.get("deletionTimestamp"):
                if name in self.running:
                    jobs = self.slurm.run("squeue", "-h", "-w", host, "-o", "%i").stdout.strip()
                    self.busy_at_delete[host] = bool(jobs)
                    self.slurm.stop_slurmd(self.running.pop(name))
                    self.deleted.append(host)
                self.core.patch_namespaced_pod(name, NS, {"metadata": {"finalizers": []}}, _preload_content=False)
            elif not pod["spec"].get("nodeName"):
                patch = {"metadata": {"finalizers": [FINALIZER]}, "spec": {"nodeName": "node-0"}}
                self.core.patch_namespaced_pod(name, NS, patch, _preload_content=False)
                # As a kubelet reports it: the container's start, which its slurmd's start follows
                # (the operator tells a slurmd's own registration from an earlier one's by it).
                started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                self.slurm.start_slurmd(SimNode(host, meta["labels"][keys.NODESET], LABELS))
                self.running[name] = host
                running = {"name": "slurmd", "restartCount": 0, "state": {"running": {"startedAt": started}}}
                status = {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [running],
                }
                self.core.patch_namespaced_pod_status(name, NS, {"status": status}, _preload_content=False)
        for name in [n for n in self.running if n not in seen]:
            self.slurm.stop_slurmd(self.running.pop(name))

    def shutdown(self) -> None:
        self.stop.set()
        self.join(timeout=30)
        for host in self.running.values():
            self.slurm.stop_slurmd(host)


class World:
    def __init__(
        self,
        slurm: LocalSlurm,
        server: KubeSim,
        replicas: int,
        topology_delay: float = 1.0,
        topology_retry: float = 0.0,
        **spec: Any,
    ) -> None:
        self.slurm = slurm
        api = server.api_client()
        self.core, self.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        self.rest = SlurmRestClient(
            slurm.rest_url, user="slurm", token=JwtMinter.from_file(slurm.jwt_key_path, "slurm")
        )
        # The cluster's spec, on the release the harness runs (SUNK_HARNESS_SLURM_VERSION in the
        # compatibility run): a NodeSet of another release than slurmctld's waits (the release hold).
        ns_spec = resource_spec(slurm.spec, "cpu", replicas=replicas, **spec)
        server.add_namespace(NS, labels={keys.TENANT: SPEC.tenant})  # as the tenant stack labels it
        for cm in config_map_objects(slurm.spec, namespace=NS):
            self.core.create_namespaced_config_map(NS, as_body(cm), _preload_content=False)
        jwt = base64.b64encode(slurm.jwt_key_path.read_bytes()).decode()
        self.core.create_namespaced_secret(
            NS,
            as_body({"metadata": {"name": ns_spec.jwt_secret}, "data": {"jwt_hs256.key": jwt}}),
            _preload_content=False,
        )
        node: dict[str, Any] = {"metadata": {"name": "node-0", "labels": LABELS}}
        node["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
        # What an 8-vCPU, 32 GiB VM's kubelet reports: kubesim admits pods against it.
        node["status"]["allocatable"] = {"cpu": "7910m", "memory": "30Gi", "pods": "110"}
        self.core.create_node(as_body(node), _preload_content=False)
        self.custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, nodeset_object(ns_spec, namespace=NS))
        self.kubelet = Kubelet(server.url, slurm)
        self.kubelet.start()
        kube = OfficialKube(server.api_client())
        settings = Settings(
            identity="op-test",
            lease_namespace=NS,
            resync=0.5,
            topology_delay=topology_delay,
            topology_retry=topology_retry,
            slurmrestd_url=slurm.rest_url,
        )
        # Kubernetes from watches, as the process reads it (runtime/operator/__main__.py).
        self.operator = Operator(kube, kube, settings, watched=watch(server.api_client()))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.operator.run, args=(self.stop,), name="operator", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        self.kubelet.shutdown()
        self.slurm.run("sh", "-c", "squeue -h -o %i | xargs -r scancel")
        for node in self.rest.list_nodes():  # every test starts from an empty node table
            self.rest.update_node(node.name, state="DOWN", reason="test teardown")
            self.rest.delete_node(node.name)

    # observations
    def pods(self) -> dict[str, dict[str, Any]]:
        return {p["spec"]["hostname"]: p for p in self.kubelet.pods()}

    def ready_pods(self) -> set[str]:
        return {
            host
            for host, p in self.pods().items()
            if not p["metadata"].get("deletionTimestamp") and p.get("status", {}).get("phase") == "Running"
        }

    def slurm_nodes(self) -> dict[str, Any]:
        return {n.name: n for n in self.rest.list_nodes()}

    def patch_spec(self, **fields: Any) -> None:
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, NODESET, {"spec": fields})

    def status(self) -> dict[str, Any]:
        obj = self.custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, NODESET)
        assert isinstance(obj, dict)  # the client decodes a custom object to plain JSON
        return dict(obj.get("status") or {})

    def in_topology(self) -> set[str]:
        """Nodes slurmctld has bound into switches: only after the operator's reconfigure."""
        out = self.slurm.run("scontrol", "show", "topology").stdout
        return {n for word in out.split() if word.startswith("Nodes=") for n in expand(word.removeprefix("Nodes="))}

    def steady(self, names: list[str]) -> None:
        def ok() -> bool:
            nodes = self.slurm_nodes()
            return self.ready_pods() == set(names) and all(
                n in nodes and not nodes[n].drain and "IDLE" in nodes[n].state for n in names
            )

        wait_for(f"pods and idle Slurm nodes {names}", ok, timeout=120)
        wait_for(f"{names} in slurmctld's topology", lambda: set(names) <= self.in_topology(), timeout=120)

    def sbatch_on(self, node: str, seconds: int) -> int:
        return self.slurm.sbatch(f"#!/bin/sh\nsleep {seconds}\n", "-w", node, "-o", "/dev/null")


@pytest.fixture()
def world(slurm: LocalSlurm, kube_server: KubeSim, request: pytest.FixtureRequest) -> Iterator[World]:
    w = World(slurm, kube_server, **request.param)
    try:
        yield w
        assert w.kubelet.errors == []
    finally:
        w.close()


# The last reconfigure is far off (the default waits 90 s for a stock kubelet); the retries bind the
# new nodes as soon as slurmctld's file has them (the harness writes it at once, as the local
# cluster's agent does), so a 2-node job runs right after the pods are ready.
@pytest.mark.parametrize("world", [{"replicas": 2, "topology_delay": 3600.0, "topology_retry": 0.5}], indirect=True)
def test_new_nodes_take_multi_node_jobs_long_before_the_topology_delay(world: World) -> None:
    world.steady(["cpu-0", "cpu-1"])
    job = world.slurm.sbatch("#!/bin/sh\nsrun hostname\n", "-N2", "-o", "/dev/null")
    world.slurm.wait_job(job, {"COMPLETED"}, timeout=120)


@pytest.mark.parametrize("world", [{"replicas": 3}], indirect=True)
def test_scale_in_waits_for_the_running_job(world: World) -> None:
    world.steady(["cpu-0", "cpu-1", "cpu-2"])
    stays = world.sbatch_on("cpu-1", 300)
    leaves = world.sbatch_on("cpu-2", 300)  # ended by the test once it has seen the pod stay
    for job in (stays, leaves):
        world.slurm.wait_job(job, {"RUNNING"})
    world.patch_spec(replicas=1)
    # Idle cpu-0 goes first; busy cpu-2 (highest ordinal) is drained and keeps its pod meanwhile.
    wait_for("cpu-0 removed", lambda: "cpu-0" not in world.pods() and "cpu-0" not in world.slurm_nodes())
    nodes = world.slurm_nodes()
    assert nodes["cpu-2"].drain and nodes["cpu-2"].reason.startswith(OPERATOR_REASON_PREFIX)
    assert not nodes["cpu-1"].drain

    def kept_over_six_resyncs(since: float = world.operator.metrics.resyncs._value.get()) -> bool:
        assert world.slurm.job_state(leaves) == "RUNNING"
        assert "cpu-2" in world.ready_pods(), "the pod of a node running a job was deleted"
        return bool(world.operator.metrics.resyncs._value.get() >= since + 6)

    wait_for("six resyncs with cpu-2's job running", kept_over_six_resyncs)
    world.slurm.run("scancel", str(leaves), check=True)
    wait_for("cpu-2 removed", lambda: "cpu-2" not in world.pods() and "cpu-2" not in world.slurm_nodes())
    assert world.kubelet.busy_at_delete == {"cpu-0": False, "cpu-2": False}
    assert set(world.pods()) == {"cpu-1"}
    assert world.slurm.job_state(stays) == "RUNNING"
    wait_for("status", lambda: world.status().get("desired") == 1 and world.status().get("allocated") == 1)


@pytest.mark.parametrize("world", [{"replicas": 3}], indirect=True)
def test_rolling_update_stays_within_max_unavailable(world: World) -> None:
    world.steady(["cpu-0", "cpu-1", "cpu-2"])
    before = {h: p["metadata"]["uid"] for h, p in world.pods().items()}
    job = world.sbatch_on("cpu-0", 6)
    world.slurm.wait_job(job, {"RUNNING"})
    world.patch_spec(configHash="v2")
    worst = 0
    deadline = time.monotonic() + 200

    def done() -> bool:
        pods = world.pods()
        return len(pods) == 3 and all(p["metadata"]["annotations"][keys.CONFIG_HASH] == "v2" for p in pods.values())

    while True:
        # Slurm first, then pods: a drain seen in Slurm was decided on pod states older than
        # the pod read that follows, so the count never mixes two decisions.
        drained = {n for n, s in world.slurm_nodes().items() if s.drain}
        ready = world.ready_pods()
        worst = max(worst, len({"cpu-0", "cpu-1", "cpu-2"} - (ready - drained)))
        if done() and ready == {"cpu-0", "cpu-1", "cpu-2"} and not drained:
            break
        assert time.monotonic() < deadline, "rolling update did not finish"
        time.sleep(0.1)
    assert worst == 1
    after = {h: p["metadata"]["uid"] for h, p in world.pods().items()}
    assert all(after[h] != before[h] for h in before)
    assert world.kubelet.busy_at_delete == {"cpu-0": False, "cpu-1": False, "cpu-2": False}
    assert world.slurm.job_state(job) == "COMPLETED"
    world.steady(["cpu-0", "cpu-1", "cpu-2"])
    wait_for("status updated", lambda: world.status().get("updated") == 3)


@pytest.mark.parametrize("world", [{"replicas": 3}], indirect=True)
def test_slurmrestd_down_deletes_nothing(world: World) -> None:
    world.steady(["cpu-0", "cpu-1", "cpu-2"])
    world.slurm.stop_slurmrestd()
    try:
        world.patch_spec(replicas=1, configHash="v3")
        wait_for(
            "SlurmReachable=False",
            lambda: any(
                c["type"] == "SlurmReachable" and c["status"] == "False" for c in world.status().get("conditions", [])
            ),
        )
        resyncs = world.operator.metrics.resyncs._value.get()
        wait_for("six more resyncs", lambda: world.operator.metrics.resyncs._value.get() >= resyncs + 6)
        assert world.kubelet.deleted == []
        assert world.ready_pods() == {"cpu-0", "cpu-1", "cpu-2"}
        assert not any(p["metadata"].get("deletionTimestamp") for p in world.pods().values())
        # Nothing drained meanwhile, read from slurmctld directly (slurmrestd is down; once it is
        # back the operator drains for the scale-in at its next resync, before a check after it).
        states = world.slurm.run("sinfo", "-h", "-N", "-o", "%N %T").stdout.split("\n")
        assert not [line for line in states if "drain" in line], states
    finally:
        world.slurm.start_slurmrestd()
    wait_for("scale-in once Slurm is back", lambda: set(world.pods()) == {"cpu-0"}, timeout=90)
    world.steady(["cpu-0"])
