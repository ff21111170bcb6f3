"""The syncer at 1,000 and 10,000 Slurm nodes: real slurmctld + slurmrestd, Kubernetes over HTTP.

Run: .venv/bin/python -m bench.syncer_bench [--sizes 1000,10000] [--samples 40] [--releases 26.05,24.11]

Everything below runs once per Slurm release of `--releases` (default: both supported ones, one
after the other, each on a harness cluster of its own), and each release prints its GOAL lines.

Slurm: one slurmd registers for real (cpu-0); the other nodes are declared with
`scontrol create NodeName=cpu-[1-N] State=FUTURE` (instant, and slurmrestd lists them with
?flags=FUTURE, as the syncer asks). Kubernetes: kubesim (kmock's emulator with watches, resource
versions and selectors; tests.support.kubesim) in its own process, so the syncer's CPU is
measured alone, seeded with one Node and one slurmd pod (hostname = Slurm node name) per Slurm
node. The syncer is built as its process builds it: Nodes and pods from informers (one list
each, then watches); every node read with `scontrol show nodes` and a JWT (ScontrolNodes: scontrol
from the harness's Slurm client root, as the runtime image runs it), writes through slurmrestd
(`--read slurmrestd`: the read through slurmrestd too, msgspec-decoded, as before).

Per cycle it prints the Slurm reads and writes, Kubernetes reads (lists and watch starts) and
writes, the syncer's CPU (this process's, its informer threads included, plus scontrol's, which it
waits for), slurmrestd+slurmctld CPU, the wall time, and the time of the Slurm read itself.
Quiet cycles come after settling. Once per size it also times one read of every node through
slurmrestd, for comparison.

Propagation, at a 1 s poll (the syncer's own loop, `Syncer.run(1.0)`), measured 2026-11 per change:
  Slurm -> Kubernetes: `scontrol update NodeName=<one node> State=DRAIN Reason=...` -> its pod
  annotated `drain` (seen by a separate watch on the pods);
  Kubernetes -> Slurm: a Node cordoned over the API -> its Slurm node drained with a `sunk:`
  reason (polled over REST every 50 ms);
one change at a time at random moments, `--samples` of each, p50/p99/max printed.
It asserts counts (0 writes in a quiet cycle), never a time."""

from __future__ import annotations

import argparse
import functools
import operator
import os
import random
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client
from prometheus_client import CollectorRegistry
from sunk.runtime.common.informer import Informer
from sunk.runtime.common.kubewatch import KubeListWatch
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.slurmrest import JwtMinter, SlurmRestClient
from sunk.runtime.slurmrest.nodestate import NodeState
from sunk.runtime.slurmrest.nodetext import ScontrolNodes
from sunk.runtime.slurmrest.wire import Reply
from sunk.runtime.syncer.cache import InformerCache
from sunk.runtime.syncer.kube import KubernetesApi
from sunk.runtime.syncer.loop import CycleReport, Syncer
from sunk.runtime.syncer.slurm import SlurmApi, TextNodeReads

from sunk import keys
from sunk.hostlist import compress
from sunk.images import SUPPORTED_SLURM
from sunk.spec.cluster import ClusterSpec
from sunk.spec.errors import load_spec
from tests.support.goals import goal

NS = "bench-research"
TICKS = os.sysconf("SC_CLK_TCK")

# kubesim in a process of its own: seeded in place (no request per object), URL on stdout.
SERVER = """
import sys
from tests.support.kubesim import KubeSim
from tests.support.fakes.syncer import node_object, pod_object
ns, size = sys.argv[1], int(sys.argv[2])
sim = KubeSim().start()
sim.admission = False  # no pod is bound here; the kubelet model would only scan 20,000 objects per write
nodes = []
for i in range(size):
    node = node_object(f"k-{i}")
    node["status"]["allocatable"] = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    nodes.append(node)
sim.seed("v1/nodes", nodes)
sim.seed("v1/pods", [pod_object(ns, f"slurmd-{i}", nodeset="cpu", node_name=f"k-{i}", hostname=f"cpu-{i}") for i in range(size)])
print(sim.url, flush=True)
sys.stdin.read()
"""


def spec(max_nodes: int, release: str) -> ClusterSpec:
    return load_spec(
        {
            "name": "research",
            "slurm": {"version": release},
            "tenant": "bench",
            "nodesets": [{"name": "cpu", "replicas": max_nodes, "maxNodes": max_nodes, "cpus": 4, "memoryMib": 4096}],
            "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
        }
    )


def proc_cpu(pid: int) -> float:
    """utime+stime of a process, seconds (/proc/<pid>/stat fields 14, 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def daemon_cpu(slurm: LocalSlurm) -> float:
    return sum(
        proc_cpu(p.pid) for name in ("slurmrestd", "slurmctld") if (p := slurm.jail.processes.get(name)) is not None
    )


def declare(slurm: LocalSlurm, hostlist: str) -> None:
    """Slurm nodes that exist but never register (no slurmd): listed with ?flags=FUTURE."""
    slurm.run("scontrol", "create", f"NodeName={hostlist}", "State=FUTURE", "CPUs=4", "RealMemory=4096", check=True)


def children_cpu() -> float:
    """CPU of the child processes this process has waited for (scontrol), seconds."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Bench:
    def __init__(self, slurm: LocalSlurm, size: int, read: str) -> None:
        self.slurm = slurm
        self.size = size
        started = time.monotonic()
        self.server = subprocess.Popen(
            [sys.executable, "-c", SERVER, NS, str(size)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.server.stdout is not None
        self.url = self.server.stdout.readline().strip()
        print(f"kubesim up with {size} Nodes and {size} pods in {time.monotonic() - started:.1f} s ({self.url})")
        self.api = client.CoreV1Api(client.ApiClient(client.Configuration(host=self.url)))
        self.rest = SlurmRestClient(
            slurm.rest_url, user="slurm", token=JwtMinter.from_file(slurm.jwt_key_path, "slurm"), timeout=120
        )
        self.get_seconds = 0.0
        self.get_bytes = 0
        self.read_seconds = 0.0
        self.rest_seconds = 0.0
        self._time_gets(self.rest)
        slurm_api: SlurmApi = self.rest
        if read == "scontrol":
            reader = ScontrolNodes(
                JwtMinter.from_file(slurm.jwt_key_path, "slurm"),
                "/etc/slurm/slurm.conf",
                command=slurm.jail.command(["scontrol"], role="slurmrestd", inherit=True),
            )
            self._time_reads(reader)
            slurm_api = TextNodeReads(self.rest, reader)
        api_client = client.ApiClient(client.Configuration(host=self.url))
        self.cache = InformerCache(api_client, NS, sync_timeout=300).start()
        self.syncer = Syncer(
            slurm_api, KubernetesApi(api_client), NS, cache=self.cache, registry=CollectorRegistry(), freeze_gc=True
        )
        self.read = read
        self.n = 0
        self.quiet: list[tuple[float, float, float, int, int]] = []
        """(syncer CPU, wall, Slurm GET wall, writes, Kubernetes reads) of every quiet cycle."""
        self.to_kube: list[float] = []
        self.to_slurm: list[float] = []

    def _time_gets(self, rest: SlurmRestClient) -> None:
        """Times the HTTP exchange of each Slurm request: slurmrestd (and slurmctld) building and
        sending the reply, and this process receiving it."""
        http = rest._http
        request = http.request

        def timed(*args: Any, **kwargs: Any) -> Reply:
            mark = time.monotonic()
            reply = request(*args, **kwargs)
            self.get_seconds += time.monotonic() - mark
            self.get_bytes += len(reply.content)
            return reply

        http.request = timed  # type: ignore[method-assign]

    def _time_reads(self, reader: ScontrolNodes) -> None:
        """Times each `scontrol show nodes`: slurmctld answering, scontrol printing, the parse."""
        read = reader.node_states

        def timed(*, future: bool = False) -> list[NodeState]:
            mark = time.monotonic()
            try:
                return read(future=future)
            finally:
                self.read_seconds += time.monotonic() - mark

        reader.node_states = timed  # type: ignore[method-assign]

    def rest_read(self) -> None:
        """One read of every node through slurmrestd, timed: what each cycle would wait for
        without scontrol."""
        self.get_seconds, self.get_bytes = 0.0, 0
        server = daemon_cpu(self.slurm)
        count = len(self.rest.node_states(future=True))
        print(
            f"  for comparison, every node through slurmrestd: {count} nodes, {self.get_seconds:.3f} s wall, "
            f"{self.get_bytes / 1e6:.1f} MB, slurmrestd+ctld CPU {daemon_cpu(self.slurm) - server:.2f} s"
        )
        self.rest_seconds = self.get_seconds

    def close(self) -> None:
        self.syncer.close()
        self.rest.close()
        assert self.server.stdin is not None
        self.server.stdin.close()
        self.server.wait(timeout=30)

    def cycle(self, label: str) -> CycleReport:
        self.n += 1
        self.get_seconds, self.get_bytes, self.read_seconds = 0.0, 0, 0.0
        cpu, child, wall = time.process_time(), children_cpu(), time.monotonic()
        server, sim = daemon_cpu(self.slurm), proc_cpu(self.server.pid)
        report = self.syncer.cycle()
        cpu, child, wall = time.process_time() - cpu, children_cpu() - child, time.monotonic() - wall
        server, sim = daemon_cpu(self.slurm) - server, proc_cpu(self.server.pid) - sim
        assert report.ok, report.errors
        # The read of every node: scontrol's run and parse, or slurmrestd's GET.
        read = self.read_seconds if self.read == "scontrol" else self.get_seconds
        if label.startswith("quiet"):
            writes = report.kube_writes + report.slurm_writes
            self.quiet.append((cpu + child, wall, read, writes, report.kube_reads))
        print(
            f"  cycle {self.n:3d} {label:<14} slurm req {report.slurm_requests} writes {report.slurm_writes:5d}  "
            f"k8s reads {report.kube_reads} writes {report.kube_writes:5d} (+{report.events} ev)  "
            f"syncer CPU {cpu:5.3f} s + scontrol {child:5.3f} s  slurmrestd+ctld CPU {server:5.2f} s  "
            f"kubesim CPU {sim:5.2f} s  wall {wall:5.3f} s (Slurm read {read:5.3f} s via {self.read}"
            f"{f', REST {self.get_bytes / 1e6:.1f} MB' if self.get_bytes else ''})"
        )
        return report

    def settle(self) -> None:
        for _ in range(30):
            report = self.cycle("settling")
            scope = report.scope
            if not report.actions and scope is not None and not (scope.slurm_nodes or scope.kube_nodes):
                return
            time.sleep(0.3)  # our writes come back by the watch
        raise AssertionError("no steady state")

    def propagation(self, samples: int, first: int) -> None:
        """The syncer's loop at a 1 s poll; one change at a time at random moments."""
        seen: dict[str, float] = {}
        lock = threading.Lock()

        def watch_pod(obj: dict[str, Any]) -> str | None:
            state = (obj["metadata"].get("annotations") or {}).get(keys.SLURM_STATE)
            if state == "drain":
                with lock:
                    seen.setdefault(obj["spec"]["hostname"], time.monotonic())
            return state

        watcher: Informer[str] = Informer(
            KubeListWatch(lambda **kw: self.api.list_namespaced_pod(NS, **kw)), watch_pod, name="bench-pods"
        ).start()
        assert watcher.wait_synced(300)
        stop = threading.Event()
        loop = threading.Thread(target=self.syncer.run, args=(1.0, stop), daemon=True)
        loop.start()
        rng = random.Random(17)
        try:
            for k in range(samples):
                time.sleep(rng.uniform(0.1, 1.5))
                name = f"cpu-{first + k}"
                mark = time.monotonic()
                self.slurm.run("scontrol", "update", f"NodeName={name}", "State=DRAIN", f"Reason=bench {k}", check=True)
                arrived = functools.partial(operator.contains, seen, name)
                self.to_kube.append(self._until(arrived, mark, functools.partial(seen.__getitem__, name)))
            for k in range(samples):
                time.sleep(rng.uniform(0.1, 1.5))
                i = first + samples + k
                mark = time.monotonic()
                self.api.patch_node(
                    f"k-{i}",
                    {"spec": {"unschedulable": True}},
                    _content_type="application/merge-patch+json",
                    _preload_content=False,
                )
                self.to_slurm.append(self._until(functools.partial(self._drained, f"cpu-{i}"), mark))
        finally:
            stop.set()
            loop.join(timeout=60)
            watcher.stop()
        for label, values in (
            ("Slurm drain -> pod annotated", self.to_kube),
            ("cordon -> Slurm drained", self.to_slurm),
        ):
            print(
                f"  propagation {label}: {len(values)} changes, p50 {percentile(values, 0.5):.2f} s, "
                f"p99 {percentile(values, 0.99):.2f} s, max {max(values):.2f} s"
            )
        touched = [f"cpu-{i}" for i in range(first, first + 2 * samples)]
        # Reset them (a resumed FUTURE node turns IDLE+NOT_RESPONDING minutes later: a change
        # that would land in a later run's quiet cycles).
        self.slurm.run("scontrol", "delete", f"NodeName={compress(touched)}", check=True)
        declare(self.slurm, compress(touched))

    def _drained(self, name: str) -> bool:
        node = self.rest.get_node(name)
        return node.drain and node.reason.startswith("sunk:")

    @staticmethod
    def _until(done: Callable[[], bool], mark: float, at: Callable[[], float] | None = None) -> float:
        deadline = mark + 60
        while not done():
            assert time.monotonic() < deadline, "not propagated within 60 s"
            time.sleep(0.05)
        return (at() if at is not None else time.monotonic()) - mark

    def run(self, samples: int) -> None:
        print(f"\n== {self.size} Slurm nodes, {self.size} Kubernetes Nodes and slurmd pods ==")
        self.cycle("cold start")
        self.settle()
        self.rest_read()
        for _ in range(5):
            quiet = self.cycle("quiet")
            assert quiet.kube_writes == 0 and quiet.slurm_writes == 0, quiet.actions[:4]
            assert quiet.kube_reads == 0 and quiet.slurm_requests == 1
        self.propagation(samples, first=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated Slurm node counts, ascending")
    parser.add_argument("--samples", type=int, default=40, help="changes timed in each direction")
    parser.add_argument(
        "--read",
        choices=("scontrol", "slurmrestd"),
        default="scontrol",
        help="how each cycle reads every node (the Deployment: scontrol)",
    )
    parser.add_argument(
        "--releases",
        default=",".join(SUPPORTED_SLURM),
        help="the Slurm releases to run on, one after another (default: every supported one)",
    )
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    for release in args.releases.split(","):
        run(release, sizes, args.samples, args.read)
    return 0


def run(release: str, sizes: list[int], samples: int, read: str) -> None:
    """Every size on one harness cluster of `release`, then that release's GOAL lines."""
    started = time.monotonic()
    with LocalSlurm.start(spec(sizes[-1], release), nodes=[SimNode("cpu-0", "cpu")]) as slurm:
        print(f"\nSlurm {release}: harness up in {time.monotonic() - started:.1f} s (one registered slurmd: cpu-0)")
        declared = 1
        benches: list[Bench] = []
        for size in sizes:
            if size > declared:
                mark = time.monotonic()
                # A resumed FUTURE node is pinged: its name must resolve at once (no DNS here).
                for i in range(declared, size):
                    slurm.add_hosts_line(f"127.0.0.1 cpu-{i}")
                declare(slurm, compress(f"cpu-{i}" for i in range(declared, size)))
                print(f"declared {size - declared} FUTURE nodes in {time.monotonic() - mark:.2f} s")
                declared = size
            bench = Bench(slurm, size, read)
            try:
                bench.run(samples)
            finally:
                bench.close()
            benches.append(bench)
    big = benches[-1]
    cpu = max(c for c, _, _, _, _ in big.quiet)
    wall = max(w for _, w, _, _, _ in big.quiet)
    floor = max(g for _, _, g, _, _ in big.quiet)
    beyond = max(w - g for _, w, g, _, _ in big.quiet)
    print(
        f"\nSlurm {release}, quiet cycles at {big.size} nodes (worst of {len(big.quiet)}, read via {read}): "
        f"syncer CPU {cpu:.3f} s (scontrol's included), wall {wall:.3f} s, of which the Slurm read {floor:.3f} s; "
        f"one read through slurmrestd took {big.rest_seconds:.3f} s"
    )
    # The syncer's propagation and CPU goals, at the largest size.
    at = f"{big.size} nodes, Slurm {release}"
    goal(f"syncer quiet cycle CPU at {at} (scontrol included)", cpu, 0.1, "s", digits=3)
    goal(f"syncer quiet cycle wall at {at}, beyond the Slurm read", beyond, 1.0, "s", digits=3)
    goal(f"syncer quiet cycle wall at {at}, Slurm read included", wall, 1.0, "s", digits=3)
    goal(f"writes in a quiet cycle, Slurm {release}", max(n for _, _, _, n, _ in big.quiet), 0, digits=0)
    goal(f"Kubernetes reads in a quiet cycle, Slurm {release}", max(r for _, _, _, _, r in big.quiet), 0, digits=0)
    for bench in benches:
        worst = percentile(bench.to_kube + bench.to_slurm, 0.99)
        goal(f"propagation p99 at a 1 s poll, {bench.size} nodes, Slurm {release}", worst, 2.0, "s", digits=2)


if __name__ == "__main__":
    sys.exit(main())
