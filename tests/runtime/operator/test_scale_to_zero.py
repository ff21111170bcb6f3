"""Scale to zero, end to end on REAL slurmctld + slurmrestd (the harness), kmock as the Kubernetes
API and the operator's real loop: a NodeSet with `power` and no pod shows its maxNodes in sinfo
(idle~), refuses a job larger than that at submit, powers nodes up for a pending job, whose pods
the operator creates (the simulated kubelet starts their slurmd), runs the job, and once the nodes
have been idle for SuspendTime Slurm powers them down and the operator deletes their pods; a node
running a job is never powered down nor its pod deleted.

What this can't model: all slurmd share one host (slurm.conf gives each CLOUD node its own port
on loopback, overrides.local_cloud_nodes; in-cluster each pod has its IP and cloud_reg_addrs
records it); pods start in well under a second, where image pulls take ResumeTimeout's minutes."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from sunk.runtime.harness import LocalSlurm
from sunk.runtime.operator.cache import watch
from sunk.runtime.operator.kube import OfficialKube
from sunk.runtime.operator.loop import Operator
from sunk.runtime.operator.settings import Settings
from sunk.runtime.slurmrest import JwtMinter, SlurmRestClient

from sunk import keys
from sunk.nodeset_resource import GROUP, PLURAL, VERSION
from sunk.spec.cluster import ClusterSpec
from tests.support.kubesim import KubeSim
from tests.support.nodeset_objects import config_map_objects, nodeset_object, resource_spec
from tests.support.rawclient import as_body
from tests.support.waiting import wait_for

from .test_real_slurm import LABELS, Kubelet

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

SUSPEND = 10
SPEC = ClusterSpec.model_validate(
    {
        "name": "ops",  # the namespace and NodeSet test_real_slurm's Kubelet serves
        "tenant": "acme",
        "nodesets": [
            {
                "name": "cpu",
                "maxNodes": 3,
                "cpus": 1,
                "memoryMib": 512,
                "power": {"suspendTime": SUSPEND, "resumeTimeout": 120},
            }
        ],
        "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
        "login": {"enabled": False},
        # Slurm's default SuspendTimeout is 30 s of POWERING_DOWN before a node can be powered up again.
        "controller": {"extraSlurmConf": ["SuspendTimeout=5"]},
    }
)
NS = SPEC.ns


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    with LocalSlurm.start(SPEC, nodes=[], accounting=False) as cluster:
        yield cluster


@pytest.fixture()
def world(slurm: LocalSlurm, kube_server: KubeSim) -> Iterator[tuple[LocalSlurm, Kubelet, SlurmRestClient]]:
    api = kube_server.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    ns_spec = resource_spec(SPEC, "cpu")
    kube_server.add_namespace(NS, labels={keys.TENANT: SPEC.tenant})
    for cm in config_map_objects(SPEC, namespace=NS):
        core.create_namespaced_config_map(NS, as_body(cm), _preload_content=False)
    jwt = base64.b64encode(slurm.jwt_key_path.read_bytes()).decode()
    secret = {"metadata": {"name": ns_spec.jwt_secret}, "data": {"jwt_hs256.key": jwt}}
    core.create_namespaced_secret(NS, as_body(secret), _preload_content=False)
    node: dict[str, Any] = {"metadata": {"name": "node-0", "labels": LABELS}}
    node["status"] = {
        "conditions": [{"type": "Ready", "status": "True"}],
        "allocatable": {"cpu": "7910m", "memory": "30Gi", "pods": "110"},
    }
    core.create_node(as_body(node), _preload_content=False)
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, nodeset_object(ns_spec, namespace=NS))
    kubelet = Kubelet(kube_server.url, slurm)
    kubelet.start()
    kube = OfficialKube(api)
    settings = Settings(identity="op-test", lease_namespace=NS, resync=0.5, slurmrestd_url=slurm.rest_url)
    operator = Operator(kube, kube, settings, watched=watch(api))
    stop = threading.Event()
    thread = threading.Thread(target=operator.run, args=(stop,), name="operator", daemon=True)
    thread.start()
    rest = SlurmRestClient(slurm.rest_url, user="slurm", token=JwtMinter.from_file(slurm.jwt_key_path, "slurm"))
    try:
        yield slurm, kubelet, rest
        assert kubelet.errors == []
    finally:
        stop.set()
        thread.join(timeout=30)
        kubelet.shutdown()
        slurm.run("sh", "-c", "squeue -h -o %i | xargs -r scancel")


def _live_pods(kubelet: Kubelet) -> set[str]:
    return {p["spec"]["hostname"] for p in kubelet.pods() if not p["metadata"].get("deletionTimestamp")}


def test_a_zero_replica_nodeset_scales_out_for_a_job_and_back_to_zero(
    world: tuple[LocalSlurm, Kubelet, SlurmRestClient],
) -> None:
    slurm, kubelet, rest = world
    # Capacity Slurm sees with no pod: maxNodes CLOUD nodes, powered down (idle~).
    assert kubelet.pods() == []
    shown = slurm.run("sinfo", "-h", "-p", "batch", "-o", "%D %T", check=True).stdout.split()
    assert shown == ["3", "idle~"], shown
    # More nodes than maxNodes: refused at submit, not left pending forever.
    too_big = slurm.run("sbatch", "-N", "4", "--wrap", "true")
    assert too_big.returncode != 0 and "Batch job submission failed" in too_big.stderr, too_big

    # A job for two nodes: Slurm powers two up, the operator creates their pods, the job runs.
    job = slurm.sbatch("#!/bin/sh\nsleep 4\n", "-N", "2", "-o", "/dev/null")
    wait_for("two pods for the pending job", lambda: len(_live_pods(kubelet)) == 2)
    started = _live_pods(kubelet)
    # Up to ~30 s more after the last node registers: slurmctld checks a multi-node job's powered-up
    # nodes in its periodic background pass (measured on 24.11; a one-node job starts at once).
    slurm.wait_job(job, {"RUNNING"}, timeout=120)
    # Its nodes run the job and are never powered down meanwhile, their pods never deleted.
    while slurm.job_state(job) == "RUNNING":
        assert _live_pods(kubelet) == started, "a pod of a node running a job went away"
        time.sleep(0.3)
    assert slurm.wait_job(job) == "COMPLETED"
    assert kubelet.deleted == []

    # Idle for SuspendTime: Slurm powers the nodes down, the operator deletes their pods.
    wait_for("scale back to zero", lambda: kubelet.pods() == [], timeout=SUSPEND + 90)
    assert sorted(kubelet.deleted) == sorted(started)
    assert kubelet.busy_at_delete == dict.fromkeys(started, False)
    wait_for(
        "every node powered down again",
        lambda: all("POWERED_DOWN" in n.state for n in rest.list_nodes()),
        timeout=60,
    )
    assert slurm.run("sinfo", "-h", "-p", "batch", "-o", "%D %T", check=True).stdout.split() == ["3", "idle~"]

    # And out again: a powered-down node comes back for the next job, with a new pod.
    again = slurm.sbatch("#!/bin/sh\ntrue\n", "-N", "1", "-o", "/dev/null")
    assert slurm.wait_job(again, timeout=90) == "COMPLETED"
