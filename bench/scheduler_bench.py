"""The Slurm-backed scheduler binding a burst of pods through real slurmctld + slurmrestd.

Run: .venv/bin/python -m bench.scheduler_bench [--pods 200] [--nodes 25] [--cpus 8] [--hold 0.5] [--shares 2]
     .venv/bin/python -m bench.scheduler_bench --nodes 64 --cpus 16 --issue35   (issue 35's runs after it)

The harness boots a one-partition cluster of `--nodes` simulated Slurm nodes with `--cpus` CPUs each
(real slurmctld, slurmdbd, slurmrestd and one slurmd per node, all on this machine); kmock
(tests.support.kubesim), in a process of its own as an API server would be (`--kmock-thread`: in
a thread of the bench, beside its pod creation and simulated kubelet), is the Kubernetes API with
one Node and one slurmd pod per Slurm node, admitting pods as a kubelet would: each Node's
allocatable is its Slurm node's CPUs plus one and its memory plus 2 GiB, and each slurmd pod requests what a shared-mode slurmd does (500m,
1 GiB), so every binding is checked against the Node and any the kubelet would reject shows up as
a kubelet rejection (expected: none) or a withheld bind (`unfit`). The scheduler runs as its own
process (`python -m sunk.runtime.scheduler`, the deployed 1 s poll unless `--interval`, woken by its
pod watch). The slurmd daemons, and with them every job's slurmstepd, run at the lowest CPU weight
(JobSteps): in a cluster they run on the jobs' own nodes, not on these cores. The benchmark
creates `--pods` one-CPU pods at once; a simulated kubelet marks each bound pod Succeeded `--hold`
seconds after its binding, so the scheduler cancels its placeholder job.

The default, 25 nodes x 8 CPUs, has a slot for every pod of the burst: the figures are the
scheduler's own pending -> bound path, which is what the scheduler's latency goals are about. `--nodes 8`
(64 slots) adds queueing behind running pods: most pods then wait for a slot, whatever the
scheduler does.

Prints pods per second (pods / time from the first creation to the last binding), the p50, p95 and
max pending -> bound latency per pod (its creation to the API server accepting its Binding), where
that time goes stage by stage (from the scheduler's and slurmctld's logs), the scheduler's own
counters, the Kubernetes requests of the burst by verb and resource, and the CPU each process used
(the harness daemons, kmock and the scheduler share the machine's cores), the jobs' slurmstepd
apart. Figures only; nothing is asserted about time."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.harness.ports import free_ports
from sunk.runtime.scheduler.settings import Settings

from sunk import keys
from sunk.manifests.runtime import immediate_allocation
from sunk.spec.errors import load_spec
from tests.support.goals import goal
from tests.support.kubesim import KubeSim
from tests.support.kubesim.process import KubeSimProcess

Sim = KubeSim | KubeSimProcess

NS = "bench"
TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """utime+stime+cutime+cstime of one process, seconds (/proc/<pid>/stat fields 14-17)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / TICKS


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy (every core; /proc/stat minus idle and iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values) - values[3] - values[4]) / TICKS


CGROUP_V1 = Path("/sys/fs/cgroup")
LOWEST_SHARES = 2
"""cgroup v1 cpu.shares minimum: the group runs when nothing outside it wants the CPU."""


class JobSteps:
    """The slurmd daemons and everything they start (each job's slurmstepd and the job's own
    processes) in cgroup v1 groups of their own, on two counts:

    - on a cluster these run on the jobs' own nodes, not on the cores of slurmctld, slurmrestd, the
      scheduler and the API server. Here 200 slurmstepd starting at once would take those cores:
      the kernel shares CPU per thread, so one daemon thread gets ~1/200th of it. In a cpu group
      with the lowest weight (cpu.shares=2) they run on what the rest leaves; they still run;
    - they exit before /proc can be read, but a cpuacct group counts every process it ever held:
      its usage minus the slurmd daemons' own CPU is the jobs' side, printed apart.

    Needs root and cgroup v1 cpu and cpuacct hierarchies (this machine's); elsewhere neither
    happens, and the jobs' CPU stays in "elsewhere" (cpu() is None)."""

    def __init__(self, slurmd: list[int], shares: int = LOWEST_SHARES) -> None:
        self.slurmd = slurmd
        name = f"sunk-scheduler-bench-{os.getpid()}"
        self.groups = [CGROUP_V1 / "cpu" / name, CGROUP_V1 / "cpuacct" / name]
        self.ok = True
        try:
            for group in self.groups:
                group.mkdir()
            (self.groups[0] / "cpu.shares").write_text(str(shares))
            for group in self.groups:
                for pid in slurmd:
                    (group / "cgroup.procs").write_text(str(pid))
        except OSError:
            self.close()
            self.ok = False

    def cpu(self) -> float | None:
        if not self.ok:
            return None
        total = int((self.groups[1] / "cpuacct.usage").read_text()) / 1e9
        # Clock ticks (cutime) against nanoseconds: clamped, a job-less burst reads a tick below zero.
        return max(0.0, total - sum(process_cpu(pid) for pid in self.slurmd))

    def close(self) -> None:
        """Every process still in a group back to the parent group, then the groups removed
        (retried: a slurmstepd may fork while its group is being emptied)."""
        for group in self.groups:
            for _ in range(50):
                if not group.exists():
                    break
                for pid in (group / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):  # exited meanwhile
                        (group.parent / "cgroup.procs").write_text(pid)
                try:
                    group.rmdir()
                except OSError:
                    time.sleep(0.1)


def cpu_sample(slurm: LocalSlurm, scheduler: int, steps: JobSteps, kmock: int | None) -> dict[str, float]:
    """Where the CPU goes: the scheduler, kmock (its process, or this one when `kmock` is None),
    this process (the simulated kubelet, pod creation), slurmctld, slurmrestd, the slurmd daemons,
    the jobs' slurmstepd (JobSteps), and the whole machine (other load is the rest)."""
    out = {"scheduler": process_cpu(scheduler)}
    if kmock is None:
        out["kmock+bench"] = time.process_time()
    else:
        out |= {"kmock": process_cpu(kmock), "bench": time.process_time()}
    for name, proc in slurm.jail.processes.items():
        key = "slurmd" if name.startswith("slurmd-") else name
        if key in ("slurmctld", "slurmrestd", "slurmd"):
            out[key] = out.get(key, 0.0) + process_cpu(proc.pid)
    stepd = steps.cpu()
    if stepd is not None:
        out["slurmstepd+jobs"] = stepd
    out["machine"] = machine_busy()
    return out


SUBMITTED = re.compile(r"^(\S+ \S+) INFO \S+: submitted job (\d+) for sunk-pod:[^/]+/([^/]+)/")
BOUND = re.compile(r"^(\S+ \S+) INFO \S+: bound [^/]+/(\S+) to .*, ([\d.]+) s after reading the job's state")
ALLOCATED = re.compile(r"^\[(\S+)\] sched: (?:Allocate |_slurm_rpc_allocate_resources )JobId=(\d+) ")
"""slurmctld's log of a job started: by its scheduling pass (a batch job) or in the request itself
(an immediate allocation)."""


def stages(scheduler_log: str, slurmctld_log: str, created: dict[str, float], bound: dict[str, float]) -> None:
    """Where each pod's wait goes, from the scheduler's log (submitted; bound and how long after
    the job list it acted on was read), slurmctld's (the job allocated) and kmock's binding times.
    All on this machine's wall clock (the logs' timestamps have millisecond resolution)."""
    submitted: dict[str, float] = {}
    pod_of: dict[int, str] = {}
    read: dict[str, float] = {}
    for line in scheduler_log.splitlines():
        if m := SUBMITTED.match(line):
            submitted[m.group(3)] = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            pod_of[int(m.group(2))] = m.group(3)
        elif m := BOUND.match(line):
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            read[m.group(2)] = at - float(m.group(3))
    allocated: dict[str, float] = {}
    for line in slurmctld_log.splitlines():
        if (m := ALLOCATED.match(line)) and int(m.group(2)) in pod_of:
            allocated[pod_of[int(m.group(2))]] = datetime.fromisoformat(m.group(1)).timestamp()
    steps = [
        ("created -> submitted (scheduler saw the pod, slurmrestd took the job)", created, submitted),
        ("submitted -> allocated (slurmctld started the job; < 0: in the request)", submitted, allocated),
        ("allocated -> job state read (the read that saw it running)", allocated, read),
        ("job state read -> bound (API server took the Binding)", read, bound),
    ]
    print("stages per pod (p50 / p95 / max):")
    for label, start, end in steps:
        spans = [end[name] - start[name] for name in created if name in start and name in end]
        if not spans:
            print(f"  {label}: no data")
            continue
        print(
            f"  {label}: {percentile(spans, 0.5):.2f} / {percentile(spans, 0.95):.2f} / {max(spans):.2f} s"
            f" ({len(spans)} pods)"
        )


def spec(nodes: int, cpus: int, depth: int):  # type: ignore[no-untyped-def]
    return load_spec(
        {
            "name": "sched",
            "tenant": "bench",
            # shared: slurmd requests only its overhead, and placeholder jobs ask for sunk_shared nodes.
            "nodesets": [{"name": "cpu", "replicas": nodes, "cpus": cpus, "memoryMib": 4096, "resourceMode": "shared"}],
            "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
            # slurmctld's event-driven pass starts at most default_queue_depth (100) jobs; the rest of
            # a burst then waits for the periodic passes (~30 s, measured 2026-11): look deeper.
            "scheduling": {"schedulerParameters": ["batch_sched_delay=0", f"default_queue_depth={depth}"]},
        }
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def metrics(port: int) -> dict[str, float]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
    except OSError:
        return {}  # not listening yet
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("sunk_scheduler_") and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = out.get(name, 0.0) + float(value)
    return out


def wait(what: str, check, timeout: float) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def kubelet(api: client.CoreV1Api, sim: Sim, hold: float, stop: threading.Event) -> None:
    """Marks each bound pod Succeeded `hold` seconds after its binding (its work is done)."""
    finished: set[tuple[str, str]] = set()
    while not stop.is_set():
        now = time.monotonic()
        for (ns, name), at in sim.bound_at.items():
            if (ns, name) not in finished and now - at >= hold:
                reply: Any = api.patch_namespaced_pod_status(
                    name,
                    ns,
                    {"status": {"phase": "Succeeded"}},
                    _content_type="application/merge-patch+json",
                    _preload_content=False,
                )
                reply.read()  # to the end: only then does the connection go back to the pool
                finished.add((ns, name))
        stop.wait(0.05)


POD_SPEC: Any = {
    "schedulerName": "sunk-scheduler",
    "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "10Mi"}}}],
}

Pods = list[tuple[str, dict[str, str]]]
"""Pods to create, in order: name and annotations."""


def singles(prefix: str, count: int) -> Pods:
    return [(f"{prefix}-{i:04d}", {}) for i in range(count)]


def gang(name: str, size: int) -> Pods:
    """An all-or-nothing group of `size` one-CPU pods: one Slurm job of `size` nodes."""
    return [(f"{name}-{i:03d}", {keys.GROUP: name, keys.GROUP_SIZE: str(size)}) for i in range(size)]


def create(api: client.CoreV1Api, pods: Pods) -> dict[str, float]:
    """Creates the pods one after the other (as a controller scaling up does); their creation times."""
    created: dict[str, float] = {}
    for name, notes in pods:
        pod: Any = {"metadata": {"name": name, "annotations": notes}, "spec": POD_SPEC}
        reply: Any = api.create_namespaced_pod(NS, pod, _preload_content=False)
        reply.read()  # (see kubelet())
        created[name] = time.monotonic()
    return created


def bound_of(sim: Sim, names: set[str] | dict[str, float]) -> dict[str, float]:
    return {name: at for (ns, name), at in sim.bound_at.items() if ns == NS and name in names}


def settle(slurm: LocalSlurm) -> None:
    """Until the last run's placeholders are gone (its pods succeeded, the scheduler cancelled
    their jobs) and the nodes idle, so the next run starts on the empty cluster the first did."""
    deadline = time.monotonic() + 300
    while left := slurm.run("squeue", "-h", "-o", "%T").stdout.split():
        if time.monotonic() > deadline:  # slurmstepd runs at the lowest weight: a busy machine delays it
            print(f"  (starting with {len(left)} jobs of the last run still there: {sorted(set(left))})")
            break
        time.sleep(0.5)
    time.sleep(2)


@dataclass(frozen=True)
class Run:
    latencies: list[float]
    """Each pod's creation -> the API server accepting its Binding, seconds."""
    rate: float
    """Pods bound per second, from the first creation to the last binding."""
    created: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    """Each pod's creation and binding, time.monotonic()."""

    @property
    def p99(self) -> float:
        return percentile(self.latencies, 0.99)


Sampler = Callable[[], dict[str, float]]
"""cpu_sample for this run's processes."""


def scenario(sim: Sim, api: client.CoreV1Api, sample: Sampler, label: str, pods: Pods, timeout: float) -> Run:
    """Creates `pods` and waits until every one is bound."""
    before = sample()
    created = create(api, pods)
    wait(f"{label}: {len(pods)} bindings", lambda: len(bound_of(sim, created)) >= len(created), timeout)
    after = sample()
    bound = bound_of(sim, created)
    first, last = min(created.values()), max(bound.values())
    latencies = [bound[name] - at for name, at in created.items()]
    print(
        f"{label}: {len(pods)} pods created in {max(created.values()) - first:.2f} s, "
        f"bound in {last - first:.2f} s, {len(pods) / (last - first):.1f} pods/s; "
        f"pending -> bound p50 {percentile(latencies, 0.5):.2f} s, p95 {percentile(latencies, 0.95):.2f} s, "
        f"p99 {percentile(latencies, 0.99):.2f} s, max {max(latencies):.2f} s; CPU-seconds over it: "
        + ", ".join(f"{k} {after[k] - before[k]:.2f}" for k in before)
    )
    return Run(latencies, len(pods) / (last - first), created, bound)


UNPLACEABLE_ROUNDS = 3
"""Pairs of runs of the base burst, behind an unplaceable gang and without it, alternated. One
200-pod run's p99 is its second-slowest pod, and two runs of the same burst without any gang
differed by more than the goal's 10 % (1.47 and 2.20 s, 2026-12-05): the goal compares the p99 of
each side's pooled pods (600 a side), measured under the same conditions in turn."""


def pooled(runs: Sequence[Run]) -> Run:
    """The runs' pods as one sample (their latencies together; the mean of their rates)."""
    return Run([x for run in runs for x in run.latencies], statistics.fmean(run.rate for run in runs))


@dataclass(frozen=True)
class Issue35:
    behind: Run
    """The base burst behind an unplaceable gang, UNPLACEABLE_ROUNDS runs pooled."""
    again: Run
    """The base burst without it, as many runs, each right after one behind it, pooled."""
    mixed: Run
    gang_after: float
    """Seconds from the 64-pod gang's last member created to its last member bound."""


def issue35(sim: Sim, api: client.CoreV1Api, sample: Sampler, slurm: LocalSlurm, nodes: int, base: int) -> Issue35:
    """Issue 35's runs, after the `base`-pod burst on the same cluster and scheduler process:
    the same burst behind an unplaceable gang (one member more than the cluster has nodes:
    Slurm refuses it, and it is retried with backoff), the same burst again without it, a
    1,000-pod burst of singles and 8-pod gangs, and a 64-pod gang."""
    print("issue 35's runs, after the burst whose figures follow them:")
    behinds: list[Run] = []
    agains: list[Run] = []
    for round_ in range(1, UNPLACEABLE_ROUNDS + 1):
        settle(slurm)
        stuck = gang(f"stuck-{round_}", nodes + 1)
        create(api, stuck)
        label = f"{base} pods behind an unplaceable {nodes + 1}-pod gang (round {round_} of {UNPLACEABLE_ROUNDS})"
        behinds.append(scenario(sim, api, sample, label, singles(f"behind-{round_}", base), 120))
        for name, _ in stuck:
            reply: Any = api.delete_namespaced_pod(name, NS, _preload_content=False)
            reply.read()
        settle(slurm)
        label = f"{base} pods, no gang (round {round_} of {UNPLACEABLE_ROUNDS})"
        agains.append(scenario(sim, api, sample, label, singles(f"again-{round_}", base), 120))
    behind, again = pooled(behinds), pooled(agains)
    print(
        f"pooled, {len(behind.latencies)} pods a side: p99 behind the gang {behind.p99:.2f} s, "
        f"without it {again.p99:.2f} s (runs: {', '.join(f'{r.p99:.2f}' for r in behinds)} / "
        f"{', '.join(f'{r.p99:.2f}' for r in agains)} s)"
    )
    settle(slurm)
    mixed: Pods = []
    for g in range(50):  # 400 gang members and 600 singles, interleaved as several workloads scale at once
        mixed += gang(f"mix-{g:02d}", 8) + singles(f"mix-{g:02d}-s", 12)
    burst = scenario(sim, api, sample, "1,000 pods: 600 singles and 50 gangs of 8", mixed, 600)
    settle(slurm)
    members = gang("g64", 64)
    created = create(api, members)
    wait("the 64-pod gang bound", lambda: len(bound_of(sim, created)) >= 64, 120)
    bound = bound_of(sim, created)
    gang_after = max(bound.values()) - max(created.values())
    spread = max(created.values()) - min(created.values())
    print(f"64-pod gang: members created in {spread:.2f} s, all bound {gang_after:.2f} s after the last one")
    return Issue35(behind, again, burst, gang_after)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--nodes", type=int, default=25, help="simulated Slurm nodes (one slurmd each)")
    parser.add_argument("--cpus", type=int, default=8, help="CPUs per Slurm node; one pod takes one")
    parser.add_argument("--hold", type=float, default=0.5, help="seconds a bound pod runs before it succeeds")
    parser.add_argument(
        "--interval",
        type=float,
        default=Settings.model_fields["interval"].default,
        help="scheduler poll interval (seconds; default: the deployed one, SUNK_SCHEDULER_INTERVAL's default)",
    )
    parser.add_argument(
        "--batch-only",
        action="store_true",
        help="queued batch placeholders only (SUNK_IMMEDIATE_ALLOCATION=false), not the deployed immediate allocations first",
    )
    parser.add_argument(
        "--shares",
        type=int,
        default=LOWEST_SHARES,
        help="cgroup v1 cpu.shares of the slurmd daemons and their jobs together (1024: one ordinary process)",
    )
    parser.add_argument(
        "--issue35",
        action="store_true",
        help="after the burst, issue 35's runs on the same cluster and scheduler (use --nodes 64 --cpus 16): "
        "behind an unplaceable gang, 1,000 mixed pods, a 64-pod gang",
    )
    parser.add_argument(
        "--kmock-thread",
        action="store_true",
        help="serve kmock from a thread of this process, beside the pod creation and the simulated kubelet "
        "(as before 2026-12-06), not from a process of its own",
    )
    parser.add_argument("--profile", metavar="FILE", help="run the scheduler under cProfile, stats to FILE")
    parser.add_argument(
        "--keep-logs", action="store_true", help="keep the scheduler's and slurmctld's logs (their folder is printed)"
    )
    args = parser.parse_args()

    load_before = os.getloadavg()[0]  # the burst's own slurmstepd raise it: this is the machine's
    started = time.monotonic()
    nodes = [SimNode(f"cpu-{i}", "cpu") for i in range(args.nodes)]
    with (
        LocalSlurm.start(
            spec(args.nodes, args.cpus, max(100, args.pods, 1000 if args.issue35 else 0)), nodes=nodes
        ) as slurm,
        KubeSim() if args.kmock_thread else KubeSimProcess() as sim,
    ):
        print(f"harness up in {time.monotonic() - started:.1f} s: {args.nodes} Slurm nodes x {args.cpus} CPUs")
        api = client.CoreV1Api(sim.api_client())
        sim.add_namespace(NS)
        allocatable = {"cpu": str(args.cpus + 1), "memory": f"{4096 + 2048}Mi", "pods": "110"}
        shared = {"requests": {"cpu": "500m", "memory": "1Gi"}}  # a shared-mode slurmd's own overhead
        for node in nodes:
            kube_node: Any = {"metadata": {"name": f"k8s-{node.name}"}, "status": {"allocatable": allocatable}}
            api.create_node(kube_node, _preload_content=False)
            slurmd: Any = {
                "metadata": {"name": f"slurmd-{node.name}", "labels": {keys.NODESET: "cpu"}},
                "spec": {
                    "hostname": node.name,
                    "nodeName": f"k8s-{node.name}",
                    "containers": [{"name": "slurmd", "resources": shared}],
                },
            }
            api.create_namespaced_pod(slurm.spec.ns, slurmd, _preload_content=False)

        workdir = Path(tempfile.mkdtemp(prefix="sunk-sched-bench-"))
        port = free_ports(1)[0]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "KUBECONFIG": str(sim.kubeconfig(workdir / "kubeconfig")),
            "SUNK_CLUSTER": slurm.spec.name,
            "SUNK_NAMESPACE": slurm.spec.ns,
            "SUNK_SLURMRESTD_URL": slurm.rest_url,
            "SUNK_JWT_KEY_FILE": str(slurm.jwt_key_path),
            "SUNK_METRICS_PORT": str(port),
            "SUNK_SCHEDULER_INTERVAL": str(args.interval),
            "SUNK_POD_NAMESPACES": NS,
            # As the Deployment sets it for this spec (sunk.manifests.runtime.immediate_allocation).
            "SUNK_IMMEDIATE_ALLOCATION": str(immediate_allocation(slurm.spec) and not args.batch_only).lower(),
            "SUNK_LOG_LEVEL": "INFO",  # each submit and bind, for the stages below
        }
        log = (workdir / "scheduler.log").open("wb")
        profile = ["-m", "cProfile", "-o", args.profile] if args.profile else []
        command = [sys.executable, *profile, "-m", "sunk.runtime.scheduler"]
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=log)
        stop = threading.Event()
        steps = JobSteps([p.pid for n, p in slurm.jail.processes.items() if n.startswith("slurmd-")], args.shares)
        try:
            wait("scheduler /readyz", lambda: metrics(port).get("sunk_scheduler_last_success_timestamp_seconds"), 30)
            threading.Thread(target=kubelet, args=(api, sim, args.hold, stop), daemon=True).start()

            wall = time.time() - time.monotonic()  # monotonic -> wall clock, as the logs are
            kmock = sim.pid if isinstance(sim, KubeSimProcess) else None

            def sample() -> dict[str, float]:
                return cpu_sample(slurm, proc.pid, steps, kmock)

            cpu_before = sample()
            requests_before = sim.requests
            first = time.monotonic()
            created = create(api, singles("pod", args.pods))
            creation = time.monotonic() - first
            wait(f"{args.pods} bindings", lambda: len(sim.bound_at) >= args.pods, timeout=60 + 2 * args.pods)
            bound = bound_of(sim, created)
            last = max(bound.values())
            latencies = [bound[name] - at for name, at in created.items()]
            cpu_after = sample()
            requests = sim.requests - requests_before
            counters = metrics(port)
            binds = sum(1 for ns, _, _ in sim.bindings if ns == NS)
            later = issue35(sim, api, sample, slurm, args.nodes, args.pods) if args.issue35 else None
        finally:
            stop.set()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
            steps.close()

        slots = args.nodes * args.cpus
        print(f"{args.pods} pods created in {creation:.2f} s; {slots} CPU slots; pods hold {args.hold} s after binding")
        print(
            f"bound {len(bound)} pods ({binds} bindings) in {last - first:.2f} s: {len(bound) / (last - first):.1f} pods/s"
        )
        print(
            "pending -> bound latency: "
            f"p50 {percentile(latencies, 0.50):.2f} s, p95 {percentile(latencies, 0.95):.2f} s, "
            f"max {max(latencies):.2f} s, mean {statistics.fmean(latencies):.2f} s"
        )
        ctld_log = slurm.jail.log_path("slurmctld").read_text()
        (workdir / "slurmctld.log").write_text(ctld_log)  # kept with the scheduler's log
        stages(
            (workdir / "scheduler.log").read_text(),
            ctld_log,
            {name: at + wall for name, at in created.items()},
            {name: at + wall for name, at in bound.items()},
        )
        if later is not None:
            print("the 1,000-pod mixed burst, its singles (a gang's job is not one pod's):")
            stages(
                (workdir / "scheduler.log").read_text(),
                ctld_log,
                {name: at + wall for name, at in later.mixed.created.items()},
                {name: at + wall for name, at in later.mixed.bound.items()},
            )
        print(f"kubelet model: {len(sim.rejections)} pods rejected at admission")
        wanted = (
            "submits_total",
            "binds_total",
            "unfit_total",
            "reroutes_total",
            "cancels_total",
            "rejects_total",
            "errors_total",
            "cycle_seconds_count",
        )
        print(
            "scheduler: "
            + ", ".join(f"{w.removesuffix('_total')} {counters.get('sunk_scheduler_' + w, 0):.0f}" for w in wanted)
            + f", mean cycle {counters['sunk_scheduler_cycle_seconds_sum'] / counters['sunk_scheduler_cycle_seconds_count'] * 1000:.0f} ms"
        )
        kinds = {
            name.split('"')[1]: value
            for name, value in counters.items()
            if name.startswith("sunk_scheduler_placeholders_total{")
        }
        print(
            "placeholders: "
            + (", ".join(f"{kind} {n:.0f}" for kind, n in sorted(kinds.items())) or "none counted")
            + f" (immediate allocations {'on' if env['SUNK_IMMEDIATE_ALLOCATION'] == 'true' else 'off'})"
        )
        per_action = sorted(
            (name.split('"')[1], counters[name], counters[name.replace("_count", "_sum")])
            for name in counters
            if name.startswith("sunk_scheduler_action_seconds_count")
        )
        print("per action: " + ", ".join(f"{a} {n:.0f} x {s / n * 1000:.1f} ms" for a, n, s in per_action))
        obs_n, obs_s = counters["sunk_scheduler_observe_seconds_count"], counters["sunk_scheduler_observe_seconds_sum"]
        print(f"observe (list pods, slurmd pods, jobs, Nodes to bind to): {obs_n:.0f} x {obs_s / obs_n * 1000:.1f} ms")
        print(
            "Kubernetes API requests during the burst (all clients): "
            + ", ".join(f"{verb} {resource} {n}" for (verb, resource), n in sorted(requests.items()))
        )
        used = {k: cpu_after[k] - cpu_before[k] for k in cpu_before}
        known = sum(v for k, v in used.items() if k != "machine")
        span = time.monotonic() - first
        print(
            f"CPU from the first creation to the last binding and sampling ({span:.1f} s wall, {os.cpu_count()} cores): "
            + ", ".join(f"{k} {v:.2f} s" for k, v in used.items() if k != "machine")
            + f"; machine {used['machine']:.2f} s busy, of which {max(0.0, used['machine'] - known):.2f} s elsewhere"
            + (" (other load)" if "slurmstepd+jobs" in used else " (slurmstepd, other load)")
            + f"; load average {load_before:.2f} before the run, {os.getloadavg()[0]:.1f} after it"
        )
        print(json.dumps({"pods": args.pods, "pods_per_s": round(len(bound) / (last - first), 2)}))
        if args.keep_logs:
            print(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        burst = f"{args.pods}-pod burst, {slots} slots"
        goal(
            f"scheduler pods bound per second, {burst}",
            len(bound) / (last - first),
            50,
            at_least=True,
            digits=1,
        )
        goal(f"scheduler p50 pending -> bound, {burst}", percentile(latencies, 0.50), 1.0, "s")
        goal(f"scheduler p95 pending -> bound, {burst}", percentile(latencies, 0.95), 2.0, "s")
        if later is not None:
            base = Run(latencies, len(bound) / (last - first))
            goal(
                f"scheduler 1,000-pod mixed burst, pods bound per second (goal: the {args.pods}-pod burst's)",
                later.mixed.rate,
                round(base.rate, 1),
                at_least=True,
                digits=1,
            )
            goal("scheduler p99 pending -> bound, 1,000-pod mixed burst", later.mixed.p99, 3.0, "s")
            goal("scheduler 64-pod gang bound after its last member arrives", later.gang_after, 2.0, "s")
            goal(
                f"scheduler p99 behind an unplaceable gang / without it, {UNPLACEABLE_ROUNDS} runs of "
                f"{args.pods} pods a side, alternated ({later.behind.p99:.2f} s / {later.again.p99:.2f} s)",
                later.behind.p99 / later.again.p99,
                1.10,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
