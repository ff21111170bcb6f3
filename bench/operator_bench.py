"""Steady-state resync of the NodeSet operator at 1,000 pods, on in-memory fakes of that size.

Run: .venv/bin/python bench/operator_bench.py [--pods 1000] [--resyncs 20] [--wire]

Two scenarios, each one NodeSet of `--pods` pods on `--pods` Kubernetes Nodes (with topology
labels) and `--pods` registered idle Slurm nodes: `replicas` mode (stable ordinals) and
`all-matching-nodes` mode (one pod per matching Node). The world is first converged
(pods created, "started" by a fake kubelet, Slurm nodes registered, status, topology ConfigMap,
reconfigure), then `--resyncs` resyncs run with nothing changed. Printed per resync: the
operator's CPU time (process time: parsing pods and Nodes, planning, status), Kubernetes reads
and writes, Slurm reads and writes. `--wire` makes the fakes hand out JSON-decoded copies (and Slurm
nodes validated by pydantic from JSON), as the real clients decoding a reply would: that adds
the decode cost a deployment pays, but not the network.

Asserted: 0 Kubernetes writes and 0 Slurm writes per steady resync (the point of the level-based
design: an unchanged world costs reads only). Nothing is asserted about time."""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import TypeAdapter
from sunk.runtime.operator.fakes import FakeKube, FakeSlurm
from sunk.runtime.operator.reconcile import Reconciler
from sunk.runtime.operator.specs import config_map_objects, nodeset_object, resource_spec
from sunk.runtime.slurmrest import Node as SlurmNode
from sunk.runtime.testing.goals import goal

from sunk.manifests.nodeset_pod import LABEL_NODE
from sunk.spec.cluster import ClusterSpec
from sunk.spec.nodeset import ARCH_LABEL

NS = "bench"
SPINE, LEAF = "example.com/spine", "example.com/leaf"


def cluster(pods: int, mode: str) -> ClusterSpec:
    nodeset: dict[str, Any] = {"name": "cpu", "cpus": 64, "memoryMib": 256000, "nodeSelector": {"pool": "cpu"}}
    nodeset |= {"replicas": pods, "maxNodes": pods} if mode == "replicas" else {"mode": mode, "maxNodes": pods}
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
            node = pod["metadata"]["labels"][LABEL_NODE]
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
    args = ap.parse_args(argv)
    results = {mode: scenario(args.pods, mode, args.resyncs, args.wire) for mode in ("replicas", "all-matching-nodes")}
    cpu = max(r[0] for r in results.values())
    goal(f"operator steady resync CPU at {args.pods} pods", cpu * 1000, 100, "ms", digits=1)
    goal(f"operator writes per steady resync at {args.pods} pods", max(r[1] for r in results.values()), 0, digits=0)
    # Issue 17: watch-driven, no periodic full lists after start. Today every resync (every 10 s,
    # SUNK_RESYNC_SECONDS) lists NodeSets, pods, Nodes, Services and PDBs.
    lists = max(r[2] for r in results.values()) * 6
    goal("operator periodic full lists per steady minute", lists, 0, digits=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
