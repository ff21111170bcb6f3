"""The NodeSet operator at 1,000 pods: its resync on in-memory fakes, then the operator as its
process runs it, on watches, against a Kubernetes API over HTTP.

Run: .venv/bin/python -m bench.operator_bench [--pods 1000] [--resyncs 20] [--wire] [--steady 60] [--changes 10]

1. Resync on fakes (both modes, `replicas` and `all-matching-nodes`): one NodeSet of `--pods`
   pods on `--pods` Kubernetes Nodes (with topology labels) and `--pods` registered idle Slurm
   nodes, converged first, then `--resyncs` resyncs with nothing changed, each listing what it
   reads (the fakes have no watch). Printed per resync: the operator's CPU time, Kubernetes and
   Slurm reads and writes. `--wire` makes the fakes hand out JSON-decoded copies. Asserted: 0
   Kubernetes writes and 0 Slurm writes per steady resync.
2. On watches (`replicas` mode): kubesim (kmock, over HTTP) with `--pods` Nodes, the operator as
   `python -m sunk.runtime.operator` builds it (informers on the official client, leader
   election, a 10 s periodic resync) in a thread, Slurm faked in process. A simulated
   kube-scheduler and kubelet bind each new pod to a free Node and mark it Running and Ready, and
   its slurmd registers. Once every pod is ready they stop, and for `--steady` seconds every
   request to the API server is counted (by verb and resource, at the server). Then `--changes`
   times the NodeSet's replicas go up by one, and the time from the API server accepting that
   change to the new pod's creation is measured (the bench sees it through its own watch).

Nothing is asserted about time."""

from __future__ import annotations

import argparse
import base64
import functools
import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client
from pydantic import TypeAdapter
from sunk.runtime.common.informer import Informer
from sunk.runtime.common.kubewatch import KubeListWatch
from sunk.runtime.operator.cache import watch
from sunk.runtime.operator.kube import OfficialKube
from sunk.runtime.operator.loop import Operator
from sunk.runtime.operator.reconcile import Reconciler
from sunk.runtime.operator.settings import Settings
from sunk.runtime.slurmrest import Node as SlurmNode

from sunk import keys
from sunk.nodeset_resource import GROUP, PLURAL, VERSION
from sunk.spec.cluster import ClusterSpec
from sunk.spec.nodeset import ARCH_LABEL
from tests.support.fakes.operator import FakeKube, FakeSlurm
from tests.support.goals import goal
from tests.support.kubesim import KubeSim
from tests.support.nodeset_objects import config_map_objects, nodeset_object, resource_spec

NS = "bench"
SPINE, LEAF = "example.com/spine", "example.com/leaf"


def cluster(pods: int, mode: str, room: int = 0) -> ClusterSpec:
    """`room`: how many more nodes the NodeSet may grow by (maxNodes)."""
    nodeset: dict[str, Any] = {"name": "cpu", "cpus": 64, "memoryMib": 256000, "nodeSelector": {"pool": "cpu"}}
    most = pods + room
    nodeset |= {"replicas": pods, "maxNodes": most} if mode == "replicas" else {"mode": mode, "maxNodes": most}
    return ClusterSpec.model_validate(
        {
            "name": "bench",
            "tenant": "acme",
            "namespace": NS,
            "nodesets": [nodeset],
            "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
            "topology": {"plugin": "tree", "labelKeys": [SPINE, LEAF]},
        }
    )


class WireKube(FakeKube):
    """Lists come back JSON-decoded, like a real client's (`_preload_content=False` + json)."""

    def list_pods(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = json.loads(json.dumps(super().list_pods()))
        return out

    def list_nodes(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = json.loads(json.dumps(super().list_nodes()))
        return out


class WireSlurm(FakeSlurm):
    """Nodes come back through JSON and pydantic validation, as the slurmrestd client's do."""

    def list_nodes(self) -> list[SlurmNode]:
        raw = json.loads(json.dumps([n.model_dump(mode="json") for n in super().list_nodes()]))
        return _NODES.validate_python(raw)


_NODES = TypeAdapter(list[SlurmNode])


def build(pods: int, mode: str, wire: bool) -> tuple[FakeKube, FakeSlurm, Reconciler, list[datetime]]:
    spec = cluster(pods, mode)
    kube = WireKube() if wire else FakeKube()
    slurm = WireSlurm() if wire else FakeSlurm()
    kube.add(nodeset_object(resource_spec(spec, "cpu"), namespace=NS))
    for cm in config_map_objects(spec, namespace=NS):
        kube.add(cm)
    for i in range(pods):
        kube.add(
            {
                "kind": "Node",
                "metadata": {
                    "name": f"node-{i:04d}",
                    # kubernetes.io/arch: every kubelet sets it, and slurmd pods select it.
                    "labels": {"pool": "cpu", ARCH_LABEL: "amd64", SPINE: f"s{i // 256}", LEAF: f"l{i // 32}"},
                },
                "spec": {},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
        )
    now = [datetime(2026, 11, 1, tzinfo=UTC)]
    reconciler = Reconciler(kube, lambda ref: slurm, clock=lambda: now[0], topology_delay=timedelta(seconds=90))
    return kube, slurm, reconciler, now


def converge(kube: FakeKube, slurm: FakeSlurm, reconciler: Reconciler, now: list[datetime]) -> int:
    """Resync, then play kubelet (bind each pending replicas pod to a free Node, mark it
    Running/Ready) and slurmd (register its node), until a resync changes nothing."""
    for rounds in range(1, 20):
        report = reconciler.resync()
        free = sorted(kube.nodes)
        used = {p["spec"].get("nodeName") for p in kube.pods.values()}
        free = [n for n in free if n not in used]
        for pod in kube.pods.values():
            ann = pod["metadata"]["annotations"]
            if not pod["spec"].get("nodeName"):
                pod["spec"]["nodeName"] = ann.get("slurm.sunk.dev/kube-node") or free.pop()
                pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            node = pod["metadata"]["labels"][keys.NODE]
            if node not in slurm.nodes:
                slurm.register(node, [pod["metadata"]["labels"]["slurm.sunk.dev/nodeset"]])
        now[0] += timedelta(seconds=120)
        if not report.applied and rounds > 1:
            return rounds
    raise RuntimeError("did not converge")


def scenario(pods: int, mode: str, resyncs: int, wire: bool) -> tuple[float, int, int]:
    """(median resync CPU seconds, writes per steady resync, full lists per resync)."""
    kube, slurm, reconciler, now = build(pods, mode, wire)
    started = time.process_time()
    rounds = converge(kube, slurm, reconciler, now)
    setup_cpu = time.process_time() - started
    print(
        f"{mode}: {len(kube.pods)} pods on {len(kube.nodes)} Nodes, {len(slurm.nodes)} Slurm nodes; "
        f"converged from nothing in {rounds} resyncs, {setup_cpu:.2f} s CPU"
    )
    cpu_times, kube_reads, kube_writes, slurm_reads, slurm_writes = [], [], [], [], []
    for _ in range(resyncs):
        k_r, k_w, s_r, s_w = kube.reads, kube.writes, slurm.reads, len(slurm.calls)
        t = time.process_time()
        report = reconciler.resync()
        cpu_times.append(time.process_time() - t)
        kube_reads.append(kube.reads - k_r)
        kube_writes.append(kube.writes - k_w)
        slurm_reads.append(slurm.reads - s_r)
        slurm_writes.append(len(slurm.calls) - s_w)
        assert not report.applied, report.applied[:3]
        now[0] += timedelta(seconds=10)
    ms = [c * 1000 for c in cpu_times]
    print(f"  steady resync x{resyncs}{' (lists JSON-decoded)' if wire else ''}:")
    print(
        f"    CPU per resync: median {statistics.median(ms):.1f} ms, min {min(ms):.1f}, max {max(ms):.1f} "
        f"({statistics.median(ms) / len(kube.pods) * 1000:.1f} us per pod)"
    )
    # NodeSets, slurmd pods, Nodes, Services, PDBs; all-matching-nodes also every bound pod (admission).
    lists = 5 + (mode == "all-matching-nodes")
    print(
        f"    Kubernetes API calls per resync: {kube_reads[0]} reads ({lists} lists, {kube_reads[0] - lists} "
        f"ConfigMap gets: one per Slurm file the pods mount, one topology), {max(kube_writes)} writes"
    )
    print(f"    Slurm API calls per resync: {slurm_reads[0]} read (one node list), {max(slurm_writes)} writes")
    assert set(kube_writes) == {0}, f"Kubernetes writes on an unchanged world: {kube_writes}"
    assert set(slurm_writes) == {0}, f"Slurm writes on an unchanged world: {slurm_writes}"
    # One change costs one write: a Slurm node starts a job, the NodeSet's status counts it.
    slurm.set(next(iter(slurm.nodes)), "ALLOCATED")
    k_w = kube.writes
    reconciler.resync()
    print(f"  one Slurm node turns busy -> {kube.writes - k_w} Kubernetes write (the status)")
    return statistics.median(cpu_times), max(kube_writes) + max(slurm_writes), lists


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--resyncs", type=int, default=20)
    ap.add_argument("--wire", action="store_true", help="JSON-decode every list, as a real client does")
    ap.add_argument("--steady", type=float, default=60.0, help="seconds of steady state counted on watches")
    ap.add_argument("--changes", type=int, default=10, help="NodeSet changes timed on watches")
    args = ap.parse_args(argv)
    results = {mode: scenario(args.pods, mode, args.resyncs, args.wire) for mode in ("replicas", "all-matching-nodes")}
    watched = watched_scenario(args.pods, args.steady, args.changes)
    cpu = max(r[0] for r in results.values())
    goal(f"operator steady resync CPU at {args.pods} pods", cpu * 1000, 100, "ms", digits=1)
    goal(f"operator writes per steady resync at {args.pods} pods", max(r[1] for r in results.values()), 0, digits=0)
    goal(f"operator full lists per steady minute at {args.pods} pods", watched.lists_per_minute, 0, digits=0)
    # Leader election alone reads and renews the Lease every 5 s (24 a minute); the rest is one
    # read a minute of each ConfigMap the NodeSet mounts: nothing grows with pods or Nodes.
    goal(f"operator API calls per steady minute at {args.pods} pods", watched.calls_per_minute, 40, digits=0)
    goal("operator NodeSet change reconciled (p50)", watched.reconcile_p50, 1.0, "s")
    return 0


# --- on watches, over HTTP -----------------------------------------------------------------


@dataclass
class Watched:
    lists_per_minute: float
    calls_per_minute: float
    reconcile_p50: float


class Kubelet(threading.Thread):
    """kube-scheduler and kubelet for the slurmd pods: binds each new pod to a free Node, marks it
    Running and Ready; its slurmd registers with (fake) Slurm."""

    def __init__(self, sim: KubeSim, slurm: FakeSlurm) -> None:
        super().__init__(name="kubelet", daemon=True)
        self.core = client.CoreV1Api(sim.api_client())
        self.slurm = slurm
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.step()
            except Exception as err:  # the bench reports it; the thread keeps going
                self.errors.append(repr(err))
            self.stop.wait(1.0)  # a list of every pod is not cheap for kmock at 1,000

    def step(self) -> None:
        reply: Any = self.core.list_namespaced_pod(NS, _preload_content=False)
        pods = json.loads(reply.data)["items"]
        used = {p["spec"].get("nodeName") for p in pods}
        free = [f"node-{i:04d}" for i in range(len(pods) + 1000) if f"node-{i:04d}" not in used][::-1]
        for pod in pods:
            meta = pod["metadata"]
            if pod["spec"].get("nodeName") or meta.get("deletionTimestamp"):
                continue
            body: Any = {"metadata": {"name": meta["name"], "uid": meta["uid"]}, "target": {"name": free.pop()}}
            bound: Any = self.core.create_namespaced_pod_binding(meta["name"], NS, body, _preload_content=False)
            bound.read()
            status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            patched: Any = self.core.patch_namespaced_pod_status(
                meta["name"],
                NS,
                {"status": status},
                _content_type="application/merge-patch+json",
                _preload_content=False,
            )
            patched.read()
            labels = meta["labels"]
            self.slurm.register(labels[keys.NODE], [labels["slurm.sunk.dev/nodeset"]])


def watched_scenario(pods: int, steady: float, changes: int) -> Watched:
    spec = cluster(pods, "replicas", room=changes)
    started = time.monotonic()
    with KubeSim() as sim:
        sim.admission = False  # no kubelet admission here: the Nodes are as large as the pods want
        sim.add_namespace(NS, labels={keys.TENANT: spec.tenant})
        labels = {"pool": "cpu", ARCH_LABEL: "amd64"}
        ready = {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"cpu": "66", "memory": "300Gi"}}
        sim.seed(
            "v1/nodes",
            [
                {
                    "metadata": {
                        "name": f"node-{i:04d}",
                        "labels": {**labels, SPINE: f"s{i // 256}", LEAF: f"l{i // 32}"},
                    }
                }
                | {"spec": {}, "status": ready}
                for i in range(pods + changes + 10)
            ],
        )
        api = sim.api_client()
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        for cm in config_map_objects(spec, namespace=NS):
            body: Any = cm  # the client sends a dict as is
            core.create_namespaced_config_map(NS, body, _preload_content=False)
        ns_spec = resource_spec(spec, "cpu")
        key = base64.b64encode(b"k" * 32).decode()
        secret: Any = {"metadata": {"name": ns_spec.jwt_secret}, "data": {"jwt_hs256.key": key}}
        core.create_namespaced_secret(NS, secret, _preload_content=False)
        nodeset = nodeset_object(ns_spec, namespace=NS)
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, nodeset)
        name = nodeset["metadata"]["name"]

        slurm = FakeSlurm()
        kube = OfficialKube(api)
        settings = Settings(identity="bench", lease_namespace=NS)  # the deployed defaults: 10 s resync
        operator = Operator(kube, kube, settings, slurm_for=lambda ref: slurm, watched=watch(api))
        stop = threading.Event()
        thread = threading.Thread(target=operator.run, args=(stop,), name="operator", daemon=True)
        thread.start()
        kubelet = Kubelet(sim, slurm)
        kubelet.start()

        def status() -> dict[str, Any]:
            reply: Any = custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name, _preload_content=False)
            return dict(json.loads(reply.data).get("status") or {})

        while status().get("ready") != pods:
            if time.monotonic() - started > 600:
                raise SystemExit(f"not converged after 600 s: {status()}; kubelet errors {kubelet.errors[:3]}")
            time.sleep(1.0)
        converged = time.monotonic() - started
        kubelet.stop.set()
        kubelet.join()
        time.sleep(2.0)  # the last status writes and their watch events settle
        print(
            f"on watches (kubesim over HTTP, replicas): {pods} pods ready on {pods} Nodes in {converged:.0f} s "
            f"(creation, binding and readiness included); informers listed {operator.watched.lists} times"  # type: ignore[union-attr]
        )
        seconds = operator.metrics.seconds
        resyncs, resync_seconds = resyncs_total(operator), seconds._sum.get()
        before = sim.requests
        time.sleep(steady)
        window = sim.requests - before
        resyncs = resyncs_total(operator) - resyncs
        resync_seconds = seconds._sum.get() - resync_seconds
        per_minute = 60.0 / steady
        lists = sum(n for (verb, _), n in window.items() if verb == "list") * per_minute
        calls = sum(window.values()) * per_minute
        print(
            f"  steady {steady:.0f} s ({resyncs:.0f} periodic resyncs, no event): API requests per minute "
            + (", ".join(f"{verb} {res} {n * per_minute:.0f}" for (verb, res), n in sorted(window.items())) or "none")
        )
        print(
            f"  a steady resync from the watch caches: {resync_seconds / max(1.0, resyncs) * 1000:.0f} ms mean wall "
            "(reading the caches, planning, the Slurm read; no write)"
        )

        seen: dict[str, float] = {}
        pod_watch = Informer(
            KubeListWatch(functools.partial(core.list_namespaced_pod, NS)),
            lambda obj: obj["metadata"]["name"],
            name="bench-pods",
            on_change=lambda: None,
        )
        pod_watch.start()
        pod_watch.wait_synced(60)
        latencies = []
        for i in range(changes):
            want = pods + i + 1
            known = set(pod_watch.view().items)
            patch = {"spec": {"replicas": want}}
            custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name, patch, _preload_content=False)
            at = time.monotonic()
            while not (set(pod_watch.view().items) - known):
                if time.monotonic() - at > 60:
                    raise SystemExit(f"change {i}: no new pod after 60 s")
                pod_watch.wait_for_change(pod_watch.seq, 0.05)
            latencies.append(time.monotonic() - at)
            seen[f"change-{i}"] = latencies[-1]
            time.sleep(0.5)
        pod_watch.stop()
        stop.set()
        thread.join(timeout=30)
        p50 = statistics.median(latencies)
        print(
            f"  {changes} NodeSet changes (replicas +1): new pod created after p50 {p50 * 1000:.0f} ms, "
            f"max {max(latencies) * 1000:.0f} ms (the periodic resync is {settings.resync:.0f} s)"
        )
    return Watched(lists, calls, p50)


def resyncs_total(operator: Operator) -> float:
    return float(operator.metrics.resyncs._value.get())


if __name__ == "__main__":
    sys.exit(main())
