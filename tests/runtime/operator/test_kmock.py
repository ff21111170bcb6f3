"""The real Kubernetes client code against kmock: reads, idempotent writes, status, Events,
Leases; and two operator replicas where only the leader acts (Slurm faked here; the
real-Slurm scenarios are in test_real_slurm.py)."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from sunk.runtime.harness.image_process import RuntimeImage
from sunk.runtime.harness.ports import free_ports
from sunk.runtime.operator.kube import OfficialKube
from sunk.runtime.operator.loop import Operator
from sunk.runtime.operator.settings import Settings
from sunk.runtime.operator.slurm import ClusterRef, RestSlurm, SlurmClients

from sunk import keys
from sunk.nodeset_resource import GROUP, PLURAL, VERSION
from sunk.stackfile import load_stack
from tests.support.fakes.operator import FakeSlurm
from tests.support.kubesim import KubeSim
from tests.support.nodeset_objects import config_map_objects, nodeset_object, resource_spec
from tests.support.rawclient import as_body, raw
from tests.support.stacks import FIXTURE_STACKS

NS = "acme-research"
CLUSTER = load_stack("acme-dev", FIXTURE_STACKS).spec


def seed(server: KubeSim, replicas: int = 2, **changes: Any) -> Any:
    api = server.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    spec = resource_spec(CLUSTER, "cpu", replicas=replicas, **changes)
    server.add_namespace(NS, labels={keys.TENANT: CLUSTER.tenant})  # as the tenant stack labels it
    for cm in config_map_objects(CLUSTER, namespace=NS):
        core.create_namespaced_config_map(NS, as_body(cm), _preload_content=False)
    key = base64.b64encode(b"k" * 32).decode()
    core.create_namespaced_secret(
        NS, as_body({"metadata": {"name": spec.jwt_secret}, "data": {"jwt_hs256.key": key}}), _preload_content=False
    )
    core.create_node(
        as_body(
            {
                "metadata": {"name": "node-0"},
                # What a 16-vCPU, 64 GiB VM's kubelet reports: kubesim admits pods against it.
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "allocatable": {"cpu": "15890m", "memory": "60Gi", "pods": "110"},
                },
            }
        ),
        _preload_content=False,
    )
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, nodeset_object(spec, namespace=NS))
    return spec


def test_official_client_against_kmock(kube_server: KubeSim) -> None:
    kube = OfficialKube(kube_server.api_client())
    assert kube.list_nodesets() == [] and kube.list_pods() == [] and kube.list_services() == set()
    spec = seed(kube_server)
    assert [n["metadata"]["name"] for n in kube.list_nodes()] == ["node-0"]
    assert kube.get_config_map(NS, "missing") is None
    slurm_conf = kube.get_config_map(NS, spec.config_files["slurm.conf"])
    assert slurm_conf is not None and list(slurm_conf["data"]) == ["slurm.conf"]
    assert kube.read_secret(NS, spec.jwt_secret) is not None
    assert kube.read_secret(NS, "missing") is None
    # kmock ignores the label selector: a foreign pod comes back from the server and is dropped here.
    other = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": NS, "labels": {"app": "web"}}}
    other["spec"] = {"containers": [{"name": "c", "image": "nginx"}]}
    kube.create_pod(other)
    ours = json.loads(json.dumps(other))
    ours["metadata"] |= {
        "name": "research-cpu-0",
        "labels": {"app.kubernetes.io/component": "slurmd", "slurm.sunk.dev/nodeset": "cpu"},
    }
    kube.create_pod(ours)
    kube.create_pod(ours)  # 409 is "already done"
    assert [p["metadata"]["name"] for p in kube.list_pods()] == ["research-cpu-0"]
    kube.delete_pod(NS, "research-cpu-0")
    kube.delete_pod(NS, "research-cpu-0")  # 404 is "already done"
    assert kube.list_pods() == []
    kube.patch_nodeset_status(NS, "research-cpu", {"desired": 2})
    assert kube.list_nodesets()[0]["status"] == {"desired": 2}
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l", "namespace": NS}}
    lease["spec"] = {"holderIdentity": "a", "renewTime": "2026-11-01T00:00:00.000000Z"}
    assert kube.create_lease(lease) is True
    assert kube.create_lease(lease) is False
    seen = kube.get_lease(NS, "l")
    assert seen is not None
    stale: list[dict[str, Any]] = [
        {"op": "test", "path": "/spec/holderIdentity", "value": "b"},
        {"op": "replace", "path": "/spec", "value": {}},
    ]
    assert kube.patch_lease(NS, "l", stale) is False
    fresh = [{"op": "test", "path": "/spec/holderIdentity", "value": "a"}]
    assert kube.patch_lease(NS, "l", [*fresh, {"op": "replace", "path": "/spec/holderIdentity", "value": "c"}]) is True


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def wall(self) -> datetime:
        return datetime.fromtimestamp(1_790_000_000 + self.t, tz=UTC)


def test_only_the_leader_acts_and_a_follower_takes_over(kube_server: KubeSim) -> None:
    seed(kube_server)
    slurm = FakeSlurm()
    clock = Clock()
    settings = {"lease_namespace": NS, "resync": 1.0, "lease_duration": 15.0, "renew_deadline": 10.0}
    ops = []
    for identity in ("a", "b"):
        kube = OfficialKube(kube_server.api_client())
        op = Operator(
            kube,
            kube,
            Settings(identity=identity, **settings),
            slurm_for=lambda ref: slurm,
            monotonic=clock,
            clock=clock.wall,
        )
        ops.append((op, kube))
    (a, kube_a), (b, kube_b) = ops
    assert a.step() is True
    assert b.step() is False
    pods = kube_a.list_pods()
    assert sorted(p["metadata"]["labels"][keys.NODE] for p in pods) == ["cpu-0", "cpu-1"]
    events = raw(client.CoreV1Api(kube_server.api_client()).list_event_for_all_namespaces(_preload_content=False))
    assert {e["reason"] for e in events["items"]} >= {"CreatePod", "CreateService"}
    assert kube_b.writes == 0
    # a stops; b must see the Lease unchanged for a whole duration before taking over.
    clock.t += 10
    assert b.step() is False
    clock.t += 6
    assert b.step() is True
    assert b.elector.is_leader() and not a.elector.is_leader()
    assert a.ready() == (True, "standing by")
    assert b.ready() == (True, "leading")


def test_slurm_clients_read_the_jwt_secret(kube_server: KubeSim) -> None:
    spec = seed(kube_server)
    kube = OfficialKube(kube_server.api_client())
    factory = SlurmClients(kube, "http://{cluster}-restapi.{namespace}.svc:6820", "slurm")
    api = factory(ClusterRef(NS, spec.cluster_name, spec.jwt_secret))
    assert isinstance(api, RestSlurm)
    assert str(api.client._http.base_url) == "http://research-restapi.acme-research.svc:6820"
    assert factory(ClusterRef(NS, spec.cluster_name, spec.jwt_secret)) is api  # cached
    with pytest.raises(LookupError, match="no key"):
        factory(ClusterRef(NS, spec.cluster_name, spec.jwt_secret, "other.key"))


def test_settings_from_env() -> None:
    s = Settings.from_env({"SUNK_OPERATOR_ID": "op-1", "SUNK_RESYNC_SECONDS": "3", "SUNK_TOPOLOGY_DELAY_SECONDS": "5"})
    assert (s.identity, s.resync, s.topology_delay, s.lease_namespace) == ("op-1", 3.0, 5.0, "sunk-system")
    assert s.slurmrestd_url.format(cluster="c", namespace="n") == "http://c-restapi.n.svc.cluster.local:6820"


def test_the_process_runs_creates_pods_serves_health_and_releases_the_lease(
    kube_server: KubeSim, tmp_path: Path, runtime_image: RuntimeImage
) -> None:
    # The NodeSet's pod settings (sunk.spec.pod) must reach the pods the image's operator makes:
    # its wheel carries the Kubernetes definitions the model checks volume sources against.
    seed(
        kube_server,
        volumes=[
            {"name": "dshm", "mountPath": "/dev/shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
            {"name": "tools", "mountPath": "/opt/tools", "readOnly": True, "nfs": {"server": "10.0.0.5", "path": "/t"}},
        ],
        imagePullSecrets=["acme-registry"],
        env=[{"name": "NCCL_DEBUG", "value": "WARN"}],
    )
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "k", "cluster": {"server": kube_server.url}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    port, dead = free_ports(2)
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "SUNK_OPERATOR_ID": "proc-1",
        "SUNK_OPERATOR_NAMESPACE": NS,
        "SUNK_RESYNC_SECONDS": "0.5",
        "SUNK_METRICS_PORT": str(port),
        # Nothing listens there: Slurm is unreadable, so pods are created and nothing else.
        "SUNK_SLURMRESTD_URL": f"http://127.0.0.1:{dead}",
    }
    # From the runtime image, as the operator Deployment runs it.
    proc = runtime_image.popen("sunk.runtime.operator", env, stderr=subprocess.PIPE, text=True)
    try:
        kube = OfficialKube(kube_server.api_client())
        deadline = time.monotonic() + 30
        while len(kube.list_pods()) < 2:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the operator created no pods"
            time.sleep(0.2)
        pod = kube.list_pods()[0]
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
        assert volumes["tools"]["nfs"] == {"server": "10.0.0.5", "path": "/t"}
        assert pod["spec"]["imagePullSecrets"] == [{"name": "acme-registry"}]
        assert {"name": "NCCL_DEBUG", "value": "WARN"} in pod["spec"]["containers"][0]["env"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as reply:
            assert reply.status == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            assert b"sunk_operator_leader 1.0" in reply.read()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)
    assert code == 0
    lease = kube.get_lease(NS, "sunk-operator")
    assert lease is not None and lease["spec"]["holderIdentity"] == ""
