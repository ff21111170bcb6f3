"""`kubectl drain` of a Node whose slurmd runs a job, against REAL slurmctld + slurmrestd (the
harness) and kubesim's Eviction API, which honours PodDisruptionBudgets as the API server does.

The sequence the operator's PDB makes (runtime/operator/plan.py, eviction protection): eviction
refused while the job runs -> cordon -> the syncer drains the Slurm node -> still refused while
the job finishes -> the job completes -> the operator removes the PDB -> the eviction succeeds, and
the job ended COMPLETED. Operator resyncs and syncer cycles are driven one at a time; the test
plays kubelet (binds the pod, starts its slurmd in the harness, marks it Running and Ready)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.harness.ports import wait_until
from sunk.runtime.operator.kube import OfficialKube
from sunk.runtime.operator.model import Protect, Unprotect
from sunk.runtime.operator.reconcile import Reconciler
from sunk.runtime.operator.slurm import RestSlurm
from sunk.runtime.slurmrest import JwtMinter, SlurmRestClient
from sunk.runtime.syncer.kube import KubernetesApi
from sunk.runtime.syncer.loop import Syncer

from sunk.nodeset_resource import GROUP, PLURAL, VERSION
from sunk.spec.cluster import ClusterSpec
from tests.support.kubesim import KubeSim
from tests.support.nodeset_objects import config_map_objects, nodeset_object, resource_spec
from tests.support.rawclient import as_body, raw

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

SPEC = ClusterSpec.model_validate(
    {
        "name": "ev",
        "tenant": "acme",
        "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 1, "memoryMib": 512}],
        "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
        "login": {"enabled": False},
    }
)
NS = SPEC.ns
KUBE_NODE = "node-0"


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    with LocalSlurm.start(SPEC, nodes=[]) as cluster:
        yield cluster


def evict(core: client.CoreV1Api, name: str) -> int:
    """The Eviction API's HTTP status for the pod (201 evicted, 429 refused by a PDB)."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": NS}}
    try:
        core.create_namespaced_pod_eviction(name, NS, as_body(body), _preload_content=False)
    except client.ApiException as err:
        return int(err.status)
    return 201


def test_drain_waits_for_the_job_then_evicts(slurm: LocalSlurm, kube_server: KubeSim) -> None:
    core = client.CoreV1Api(kube_server.api_client())
    custom = client.CustomObjectsApi(kube_server.api_client())
    policy = client.PolicyV1Api(kube_server.api_client())
    rest = SlurmRestClient(slurm.rest_url, user="slurm", token=JwtMinter.from_file(slurm.jwt_key_path, "slurm"))
    spec = resource_spec(SPEC, "cpu", replicas=1)
    for cm in config_map_objects(SPEC, namespace=NS):
        core.create_namespaced_config_map(NS, as_body(cm), _preload_content=False)
    node: dict[str, Any] = {
        "metadata": {"name": KUBE_NODE},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    node["status"]["allocatable"] = {"cpu": "7910m", "memory": "30Gi", "pods": "110"}
    core.create_node(as_body(node), _preload_content=False)
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, nodeset_object(spec, namespace=NS))
    operator = Reconciler(OfficialKube(kube_server.api_client()), lambda ref: RestSlurm(rest))
    syncer = Syncer(rest, KubernetesApi(kube_server.api_client()), NS)

    def pods() -> list[dict[str, Any]]:
        return list(raw(core.list_namespaced_pod(NS, _preload_content=False))["items"])

    def budgets() -> list[str]:
        listed = raw(policy.list_namespaced_pod_disruption_budget(NS, _preload_content=False))
        return [b["metadata"]["name"] for b in listed["items"]]

    # The operator creates the pod; the "kubelet" binds it and starts its slurmd.
    operator.resync()
    (pod,) = pods()
    name, host = pod["metadata"]["name"], pod["spec"]["hostname"]
    core.patch_namespaced_pod(name, NS, {"spec": {"nodeName": KUBE_NODE}}, _preload_content=False)
    slurm.start_slurmd(SimNode(host, "cpu"))
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    core.patch_namespaced_pod_status(name, NS, {"status": status}, _preload_content=False)
    try:
        wait_until(
            "the slurmd to register idle",
            lambda: any(n.name == host and "IDLE" in n.state for n in rest.list_nodes()),
            timeout=60,
            interval=0.2,
        )
        assert any(isinstance(a, Protect) for a in operator.resync().applied)
        assert budgets() == [name]

        # Runs until cancelled below: a job of a fixed length could end, on a loaded machine,
        # before the checks that need it running.
        job = slurm.run(
            "sbatch", "--parsable", "-w", host, "--wrap", "trap 'exit 0' USR1; while :; do sleep 1; done", check=True
        ).stdout.strip()
        wait_until(
            "the job to run",
            lambda: "RUNNING" in slurm.run("squeue", "-h", "-j", job, "-o", "%T").stdout,
            timeout=60,
            interval=0.2,
        )
        assert evict(core, name) == 429  # busy: the PDB refuses

        # kubectl drain: cordon first. The syncer drains the Slurm node; the job keeps running.
        core.patch_node(KUBE_NODE, {"spec": {"unschedulable": True}}, _preload_content=False)
        syncer.cycle()
        drained = rest.get_node(host)
        assert drained.drain and "cordoned" in drained.reason
        operator.resync()
        assert budgets() == [name] and evict(core, name) == 429  # draining, the job still runs

        # The job ends on its own terms (its script exits 0 on USR1), so it must end COMPLETED:
        # a job the eviction had killed would not.
        slurm.run("scancel", "--batch", "--signal=USR1", job, check=True)
        wait_until(
            "the job to finish",
            lambda: not slurm.run("squeue", "-h", "-j", job, "-o", "%i").stdout.strip(),
            timeout=60,
            interval=0.2,
        )
        wait_until(
            "the node to be idle",
            lambda: "IDLE" in rest.get_node(host).state and "COMPLETING" not in rest.get_node(host).state,
            timeout=60,
            interval=0.2,
        )
        assert any(isinstance(a, Unprotect) for a in operator.resync().applied)
        assert budgets() == []
        assert evict(core, name) == 201
        assert name in [p for _, p in kube_server.evictions]
        info = slurm.run("scontrol", "show", "job", job, check=True).stdout
        assert "JobState=COMPLETED" in info and "ExitCode=0:0" in info  # the job was not lost
    finally:
        slurm.stop_slurmd(host)
