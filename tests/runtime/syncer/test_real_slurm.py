"""The syncer against REAL slurmctld + slurmrestd (the harness) and kmock as the Kubernetes API.

Cycles are driven one at a time (`syncer.cycle()`), so "within two cycles" is counted, not timed;
the outage test runs the loop in its own thread like the real process does."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from prometheus_client import CollectorRegistry
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.harness.image_process import RuntimeImage
from sunk.runtime.harness.ports import free_ports
from sunk.runtime.slurmrest import JwtMinter, Node, PodRef, SlurmRestClient, read_pod_ref
from sunk.runtime.syncer.cache import InformerCache
from sunk.runtime.syncer.kube import KubernetesApi
from sunk.runtime.syncer.loop import CycleReport, Syncer
from sunk.runtime.syncer.model import (
    node_condition,
    node_drain_annotation,
)
from sunk.runtime.syncer.plan import Drain, Resume, SetPodRef

from sunk import keys
from sunk.stackfile import load_stack
from tests.support.fakes.syncer import node_object, pod_object
from tests.support.rawclient import as_body, raw
from tests.support.stacks import FIXTURE_STACKS

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

NODES = [SimNode("cpu-0", "cpu"), SimNode("cpu-1", "cpu"), SimNode("gpu-0", "gpu")]


def as_created(obj: dict[str, Any]) -> dict[str, Any]:
    """What the API server fills in on create (kmock does not)."""
    obj["metadata"].setdefault("uid", str(uuid.uuid4()))
    if obj.get("kind") == "Node":  # kubesim admits pods against what a kubelet reports
        obj.setdefault("status", {}).setdefault("allocatable", {"cpu": "31850m", "memory": "120Gi", "pods": "110"})
    return obj


def kube_node(slurm_node: str) -> str:
    return f"k8s-{slurm_node}"


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    with LocalSlurm.start(load_stack("acme-dev", FIXTURE_STACKS).spec, nodes=NODES) as cluster:
        yield cluster


class World:
    """Both sides as the tests see them: scontrol for Slurm, the official client for Kubernetes."""

    def __init__(self, slurm: LocalSlurm, url: str) -> None:
        self.syncers: list[Syncer] = []
        self.slurm = slurm
        self.ns = slurm.spec.ns
        self.api = client.CoreV1Api(client.ApiClient(client.Configuration(host=url)))
        self.rest = SlurmRestClient(
            slurm.rest_url, user="slurm", token=JwtMinter.from_file(slurm.jwt_key_path, "slurm")
        )
        for sim in NODES:
            self.api.create_node(as_body(as_created(node_object(kube_node(sim.name)))), _preload_content=False)
            pod = pod_object(
                self.ns,
                f"{slurm.spec.name}-{sim.name}",
                nodeset=sim.nodeset,
                node_name=kube_node(sim.name),
                hostname=sim.name,
            )
            self.api.create_namespaced_pod(self.ns, as_body(as_created(pod)), _preload_content=False)
        # Another tenant's pod with a colliding hostname: never mapped, never annotated.
        stray = pod_object("other-tenant", "cpu-0", nodeset="cpu", node_name=kube_node("cpu-0"))
        self.api.create_namespaced_pod("other-tenant", as_body(as_created(stray)), _preload_content=False)

    def syncer(self, registry: CollectorRegistry | None = None, drain_conditions: tuple[str, ...] = ()) -> Syncer:
        """A syncer as the process builds it: Nodes and pods from watches (InformerCache). The
        previous test's syncer is closed (one watching syncer at a time)."""
        for old in self.syncers:
            old.close()
        api_client = client.ApiClient(client.Configuration(host=self.api.api_client.configuration.host))
        kube = KubernetesApi(api_client)
        cache = InformerCache(api_client, self.ns).start()
        rest = SlurmRestClient(
            self.slurm.rest_url,
            user="slurm",
            token=JwtMinter.from_file(self.slurm.jwt_key_path, "slurm"),
            retries=1,
            backoff=0.1,
            timeout=5,
        )
        syncer = Syncer(
            rest,
            kube,
            self.ns,
            cache=cache,
            registry=registry or CollectorRegistry(),
            drain_conditions=drain_conditions,
        )
        self.syncers = [syncer]
        return syncer

    def node(self, name: str) -> Node:
        return self.rest.get_node(name)

    def scontrol(self, *args: str) -> None:
        self.slurm.run("scontrol", *args, check=True)

    def pod(self, slurm_node: str, ns: str | None = None) -> dict[str, Any]:
        name = f"{self.slurm.spec.name}-{slurm_node}" if ns is None else slurm_node
        return raw(self.api.read_namespaced_pod(name, ns or self.ns, _preload_content=False))

    def kube_node(self, slurm_node: str) -> dict[str, Any]:
        return raw(self.api.read_node(kube_node(slurm_node), _preload_content=False))

    def set_node_conditions(self, slurm_node: str, extra: list[dict[str, Any]]) -> None:
        """The Node's conditions: Ready plus `extra` (what Node Problem Detector writes), through the
        status subresource, waiting until the live syncer's watch delivered them."""
        seqs = [s.cache.nodes.seq for s in self.syncers if isinstance(s.cache, InformerCache)]
        ready = node_object(kube_node(slurm_node))["status"]["conditions"]
        self.api.patch_node_status(
            kube_node(slurm_node),
            {"status": {"conditions": ready + extra}},
            _content_type="application/merge-patch+json",
            _preload_content=False,
        )
        for syncer, seq in zip(self.syncers, seqs, strict=False):
            assert isinstance(syncer.cache, InformerCache)
            assert syncer.cache.nodes.wait_for_change(seq, 60), "the Node watch did not deliver the status"

    def patch_kube_node(self, slurm_node: str, patch: dict[str, Any]) -> None:
        """Patches a Node and waits until the live syncer's Node watch delivered it (a cycle
        right after a write may otherwise not see it yet: the watch event follows the reply)."""
        seqs = [s.cache.nodes.seq for s in self.syncers if isinstance(s.cache, InformerCache)]
        self.api.patch_node(
            kube_node(slurm_node), patch, _content_type="application/merge-patch+json", _preload_content=False
        )
        for syncer, seq in zip(self.syncers, seqs, strict=False):
            assert isinstance(syncer.cache, InformerCache)
            assert syncer.cache.nodes.wait_for_change(seq, 60), "the Node watch did not deliver the patch"


@pytest.fixture(scope="module")
def world(slurm: LocalSlurm, kube_server: Any) -> Iterator[World]:
    w = World(slurm, kube_server.url)
    yield w
    for syncer in w.syncers:  # the last syncer's watch threads, not left running to the end of the session
        syncer.close()


def settle(syncer: Syncer, limit: int = 40) -> list[CycleReport]:
    """Cycles until one plans nothing (Slurm's transient NOT_RESPONDING after a resume settles
    within about a second, longer on a loaded machine); fails if that never happens (20 s and
    more)."""
    reports = []
    for _ in range(limit):
        reports.append(syncer.cycle())
        if reports[-1].ok and not reports[-1].actions:
            return reports
        time.sleep(0.5)
    raise AssertionError(f"no steady state after {limit} cycles: {reports[-1].actions}")


def annotations_of(obj: dict[str, Any]) -> dict[str, str]:
    return obj["metadata"].get("annotations") or {}


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == type_), None)


# The tests run in file order and share one cluster; each leaves it steady and undrained.


def test_first_cycles_map_pods_and_annotate_then_write_nothing(world: World) -> None:
    syncer = world.syncer()
    first = syncer.cycle()
    assert first.ok and first.slurm_writes == len(NODES)
    for sim in NODES:
        ref = read_pod_ref(world.node(sim.name).extra)
        pod = world.pod(sim.name)
        assert ref == PodRef(world.ns, pod["metadata"]["name"], pod["metadata"]["uid"])
        assert annotations_of(pod)[keys.SLURM_STATE] == "idle"
        assert (condition(pod, keys.SLURM_NODE_READY) or {}).get("status") == "True"
    assert not annotations_of(world.pod("cpu-0", ns="other-tenant"))
    # The mapping is Slurm state: scontrol (not only REST) shows it.
    assert "slurm.sunk.dev/pod" in world.slurm.run("scontrol", "show", "node", "cpu-0", check=True).stdout
    settle(syncer)
    for _ in range(3):
        steady = syncer.cycle()
        assert (steady.slurm_requests, steady.slurm_writes, steady.kube_writes) == (1, 0, 0)


def test_mapping_survives_slurmctld_and_syncer_restarts(world: World) -> None:
    before = {sim.name: read_pod_ref(world.node(sim.name).extra) for sim in NODES}
    assert all(before.values())
    world.slurm.restart_slurmctld()
    after = {sim.name: read_pod_ref(world.node(sim.name).extra) for sim in NODES}
    assert after == before
    # A new syncer process (empty cache) has no mapping to rewrite and nothing to drain or resume.
    fresh = world.syncer()
    first = fresh.cycle()
    assert first.ok and first.slurm_writes == 0
    assert not [a for a in first.actions if isinstance(a, Drain | Resume | SetPodRef)]
    settle(fresh)


def test_cordon_drains_with_our_reason_and_uncordon_resumes(world: World) -> None:
    syncer = world.syncer()
    settle(syncer)
    world.patch_kube_node(
        "cpu-0", {"spec": {"unschedulable": True}, "metadata": {"annotations": {keys.CORDON_REASON: "swap PSU"}}}
    )
    syncer.cycle()
    node = world.node("cpu-0")
    assert node.drain and node.reason == "sunk: Node k8s-cpu-0 cordoned: swap PSU"
    assert (
        "Reason=sunk: Node k8s-cpu-0 cordoned: swap PSU"
        in world.slurm.run("scontrol", "show", "node", "cpu-0", check=True).stdout
    )
    syncer.cycle()
    pod = world.pod("cpu-0")
    assert annotations_of(pod)[keys.SLURM_STATE] == "drain"
    assert annotations_of(pod)[keys.SLURM_REASON] == "sunk: Node k8s-cpu-0 cordoned: swap PSU"
    assert node_drain_annotation(world.ns) not in annotations_of(world.kube_node("cpu-0"))  # our drain, not Slurm's
    settle(syncer)
    world.patch_kube_node("cpu-0", {"spec": {"unschedulable": None}})
    syncer.cycle()
    assert not world.node("cpu-0").drain
    settle(syncer)
    assert annotations_of(world.pod("cpu-0"))[keys.SLURM_STATE] == "idle"
    assert keys.SLURM_REASON not in annotations_of(world.pod("cpu-0"))  # shown only while drained
    events = raw(world.api.list_namespaced_event(world.ns, _preload_content=False))["items"]
    reasons = [e["reason"] for e in events if e["involvedObject"]["name"] == f"{world.slurm.spec.name}-cpu-0"]
    assert reasons == ["SlurmNodeDrained", "SlurmNodeResumed"]


def test_admin_drain_is_shown_in_kubernetes_and_never_resumed(world: World) -> None:
    syncer = world.syncer()
    settle(syncer)
    world.scontrol("update", "NodeName=cpu-1", "State=DRAIN", "Reason=bad DIMM")
    syncer.cycle()
    pod = world.pod("cpu-1")
    assert annotations_of(pod)[keys.SLURM_STATE] == "drain"
    assert annotations_of(pod)[keys.SLURM_REASON] == "bad DIMM"
    assert (condition(pod, keys.SLURM_NODE_READY) or {}).get("status") == "False"
    kn = world.kube_node("cpu-1")
    assert annotations_of(kn)[node_drain_annotation(world.ns)] == "cpu-1: bad DIMM"
    assert (condition(kn, node_condition(world.ns)) or {}).get("status") == "True"
    assert condition(kn, "Ready") is not None  # the kubelet's condition is kept
    for _ in range(3):
        report = syncer.cycle()
        assert not [a for a in report.actions if isinstance(a, Drain | Resume)]
    assert world.node("cpu-1").reason == "bad DIMM"
    world.scontrol("update", "NodeName=cpu-1", "State=RESUME")
    settle(syncer)
    kn = world.kube_node("cpu-1")
    assert node_drain_annotation(world.ns) not in annotations_of(kn)
    assert (condition(kn, node_condition(world.ns)) or {}).get("status") == "False"


def _npd(status: str, message: str) -> dict[str, Any]:
    reason = "DockerHung" if status == "True" else "KernelHasNoDeadlock"
    return {"type": "KernelDeadlock", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2025-01-01T00:00:00Z"}  # fmt: skip


def test_a_selected_node_condition_drains_and_clears_an_admin_drain_stays(world: World) -> None:
    syncer = world.syncer(drain_conditions=("KernelDeadlock",))
    settle(syncer)
    world.scontrol("update", "NodeName=cpu-1", "State=DRAIN", "Reason=admin: bad DIMM")
    for name in ("cpu-0", "cpu-1"):
        world.set_node_conditions(name, [_npd("True", "task docker:7 blocked for more than 300 seconds")])
    syncer.cycle()
    node = world.node("cpu-0")
    assert node.drain and node.reason == (
        "sunk: Node k8s-cpu-0 condition KernelDeadlock (task docker:7 blocked for more than 300 seconds)"
    )
    assert world.node("cpu-1").reason == "admin: bad DIMM"  # someone else's drain keeps its words
    settle(syncer)
    for name in ("cpu-0", "cpu-1"):
        world.set_node_conditions(name, [_npd("False", "kernel has no deadlock")])
    syncer.cycle()
    assert not world.node("cpu-0").drain
    assert world.node("cpu-1").drain and world.node("cpu-1").reason == "admin: bad DIMM"
    world.scontrol("update", "NodeName=cpu-1", "State=RESUME")
    settle(syncer)


def test_our_drain_is_reapplied_when_cleared_while_cordoned(world: World) -> None:
    syncer = world.syncer()
    settle(syncer)
    world.patch_kube_node("gpu-0", {"spec": {"unschedulable": True}})
    syncer.cycle()
    assert world.node("gpu-0").drain
    world.scontrol("update", "NodeName=gpu-0", "State=RESUME")
    assert not world.node("gpu-0").drain
    syncer.cycle()
    assert world.node("gpu-0").reason == "sunk: Node k8s-gpu-0 cordoned"
    world.patch_kube_node("gpu-0", {"spec": {"unschedulable": None}})
    settle(syncer)
    assert not world.node("gpu-0").drain


class Recorder(Syncer):
    def __init__(self, inner: Syncer) -> None:
        super().__init__(inner.slurm, inner.kube, inner.namespace, cache=inner.cache, registry=CollectorRegistry())
        self.reports: list[CycleReport] = []

    def cycle(self) -> CycleReport:
        report = super().cycle()
        self.reports.append(report)
        return report


def wait_cycles(syncer: Recorder, count: int, timeout: float = 60) -> None:
    target = len(syncer.reports) + count
    deadline = time.monotonic() + timeout
    while len(syncer.reports) < target:
        assert time.monotonic() < deadline, "the syncer loop stopped cycling"
        time.sleep(0.05)


def test_slurmrestd_killed_and_restarted_mid_run(world: World) -> None:
    syncer = Recorder(world.syncer())
    settle(syncer)
    world.patch_kube_node("cpu-0", {"spec": {"unschedulable": True}})  # ours: drained, cause persists
    world.scontrol("update", "NodeName=cpu-1", "State=DRAIN", "Reason=admin maintenance")
    settle(syncer)
    stop = threading.Event()
    loop = threading.Thread(target=syncer.run, args=(0.3, stop), daemon=True)
    loop.start()
    try:
        wait_cycles(syncer, 2)
        before = len(syncer.reports)
        world.slurm.stop_slurmrestd()
        wait_cycles(syncer, 1)
        # Meanwhile Kubernetes changes: the cordon goes. Nothing may act on it while Slurm is unreadable.
        world.patch_kube_node("cpu-0", {"spec": {"unschedulable": None}})
        wait_cycles(syncer, 3)
        down = [r for r in syncer.reports[before:] if not r.ok]
        assert len(down) >= 3
        assert all(r.slurm_writes == 0 and r.kube_writes == 0 and not r.actions for r in down)
        world.slurm.start_slurmrestd()
        restarted = len(syncer.reports)
        wait_cycles(syncer, 2)
    finally:
        stop.set()
        loop.join(timeout=60)
    after = syncer.reports[restarted:]
    first_ok = next(i for i, r in enumerate(after) if r.ok)
    # Recovery within two cycles: the first readable cycle resumes our drain (cause gone).
    assert first_ok <= 1
    assert not world.node("cpu-0").drain
    assert world.node("cpu-1").reason == "admin maintenance"
    # No flapping: over the whole run, exactly one Resume of cpu-0 and no drain or resume of anything else.
    moves = [a for r in syncer.reports[before:] for a in r.actions if isinstance(a, Drain | Resume)]
    assert moves == [Resume("cpu-0")]
    world.scontrol("update", "NodeName=cpu-1", "State=RESUME")
    settle(syncer)


def test_the_process_runs_from_the_environment(world: World, tmp_path: Path, runtime_image: RuntimeImage) -> None:
    (port,) = free_ports(1)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: k\n"
        f"clusters:\n- name: k\n  cluster:\n    server: {world.api.api_client.configuration.host}\n"
        "users:\n- name: k\n  user:\n    token: any\ncontexts:\n- name: k\n  context:\n    cluster: k\n    user: k\n"
    )
    env = {
        "PATH": os.environ["PATH"],
        "KUBECONFIG": str(kubeconfig),
        "SUNK_CLUSTER": world.slurm.spec.name,
        "SUNK_NAMESPACE": world.ns,
        "SUNK_SLURMRESTD_URL": world.slurm.rest_url,
        "SUNK_JWT_KEY_FILE": str(world.slurm.jwt_key_path),
        "SUNK_METRICS_PORT": str(port),
        "SUNK_SYNC_INTERVAL": "0.5",
        # slurm.conf as the Deployment mounts it: every node read through the image's scontrol.
        "SUNK_SLURM_CONF_FILE": str(world.slurm.etc / "slurm.conf"),
    }
    log = tmp_path / "syncer.log"
    with log.open("wb") as out:
        # From the runtime image, as the syncer Deployment runs it.
        proc = runtime_image.popen("sunk.runtime.syncer", env, stdout=out, stderr=out)
    try:
        world.patch_kube_node("cpu-1", {"spec": {"unschedulable": True}})
        until(lambda: world.node("cpu-1").drain, proc, log)
        until(lambda: get(port, "/readyz")[0] == 200, proc, log)
        metrics = get(port, "/metrics")[1]
        assert 'sunk_syncer_writes_total{kind="Drain",target="slurm"} 1.0' in metrics
        assert "sunk_syncer_cycle_seconds_count" in metrics
        # Every read went through scontrol (as the image's user, with a token only), none fell back.
        assert re.search(r'^sunk_syncer_slurm_reads_total\{via="scontrol"\} [1-9]', metrics, re.M), metrics
        assert 'sunk_syncer_slurm_reads_total{via="slurmrestd"}' not in metrics
        assert get(port, "/healthz")[0] == 200
        world.patch_kube_node("cpu-1", {"spec": {"unschedulable": None}})
        until(lambda: not world.node("cpu-1").drain, proc, log)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert proc.returncode == 0, log.read_text()[-2000:]


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as reply:
            return reply.status, reply.read().decode()
    except OSError as exc:
        return getattr(exc, "code", 0), ""


def until(check: Callable[[], bool], proc: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"syncer process: exit {proc.poll()}\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
