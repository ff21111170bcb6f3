"""The exporter against REAL slurmctld + slurmrestd (the harness): for a known workload (running,
pending for resources, pending on a dependency, held, completed; a drained and a draining node),
what it serves on /metrics equals what `squeue`, `sinfo` and `sdiag` print in the same jail.

Slurm moves on its own (scheduler and backfill cycles), so each comparison is made between two
exporter reads that agree with each other: the CLI read in between saw the same cluster."""

from __future__ import annotations

import os
import re
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sunk.runtime.common.health import HealthServer
from sunk.runtime.exporter.loop import Exporter
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.harness.image_process import RuntimeImage
from sunk.runtime.harness.ports import free_ports
from sunk.runtime.slurmrest import JwtMinter, SlurmRestClient

from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

NODES = [SimNode("cpu-0", "cpu"), SimNode("cpu-1", "cpu"), SimNode("gpu-0", "gpu"), SimNode("gpu-1", "gpu")]
Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    with LocalSlurm.start(load_stack("acme-dev", FIXTURE_STACKS).spec, nodes=NODES) as cluster:
        yield cluster


class Served:
    """The exporter as a process serves it: its loop's cycle, its registry over HTTP."""

    def __init__(self, slurm: LocalSlurm) -> None:
        self.rest = SlurmRestClient(
            slurm.rest_url, user="slurm", token=JwtMinter.from_file(slurm.jwt_key_path, "slurm"), retries=0
        )
        self.exporter = Exporter(self.rest)
        self.server = HealthServer(
            free_ports(1)[0],
            self.exporter.registry,
            alive=lambda: (True, ""),
            ready=lambda: (True, ""),
            host="127.0.0.1",
        ).start()

    def scrape(self) -> Series:
        """One collection, then GET /metrics parsed as Prometheus parses it."""
        self.exporter.cycle()
        with urllib.request.urlopen(f"http://127.0.0.1:{self.server.port}/metrics", timeout=10) as reply:
            text = reply.read().decode()
        out: Series = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
        return out

    def close(self) -> None:
        self.server.stop()
        self.rest.close()


@pytest.fixture(scope="module")
def served(slurm: LocalSlurm) -> Iterator[Served]:
    s = Served(slurm)
    yield s
    s.close()


def pick(series: Series, name: str, *keys: str) -> Counter[tuple[str, ...]]:
    """Values of one metric keyed by the given labels (zero values left out, as the CLI has no line)."""
    out: Counter[tuple[str, ...]] = Counter()
    for (n, labels), value in series.items():
        if n == name and value:
            d = dict(labels)
            out[tuple(d[k] for k in keys)] += int(value)
    return out


def lines(slurm: LocalSlurm, *argv: str) -> list[list[str]]:
    out = slurm.run(*argv, check=True).stdout
    return [[f.strip() for f in line.rstrip("|").split("|")] for line in out.splitlines() if line.strip()]


def squeue(slurm: LocalSlurm) -> list[list[str]]:
    return lines(slurm, "squeue", "-a", "-t", "all", "-h", "-o", "%i|%T|%P|%a|%r|%C")


def base_state(sinfo_state: str) -> str:
    """sinfo's %T without the flag characters it appends (`*` not responding, `~` powered down...)."""
    return sinfo_state.rstrip("*~#%$@^-!+")


def gpu_count(gres: str) -> int:
    """`gpu:h100:2`, `gpu:h100:1(IDX:0)`, `(null)` -> 2, 1, 0."""
    return sum(int(m.group(1)) for m in re.finditer(r"gpu(?::[^:(,]+)?:(\d+)", gres))


def cli_view(slurm: LocalSlurm) -> dict[str, Counter[tuple[str, ...]]]:
    """What the Slurm commands print, in the exporter's keys."""
    view: dict[str, Counter[tuple[str, ...]]] = {}
    jobs = squeue(slurm)
    view["jobs"] = Counter((state.lower(), part, acct) for _, state, part, acct, _, _ in jobs)
    view["job_cpus"] = Counter()
    for _, state, part, acct, _, cpus in jobs:
        view["job_cpus"][(state.lower(), part, acct)] += int(cpus)
    view["job_gpus"] = Counter()
    for _, state, part, acct, tres in lines(
        slurm, "squeue", "-a", "-t", "all", "-h", "-O", "JobID:|,State:|,Partition:|,Account:|,tres-alloc:|"
    ):
        found = re.search(r"(?:^|,)gres/gpu=(\d+)", tres)  # allocated TRES when running, requested when pending
        view["job_gpus"][(state.lower(), part, acct)] += int(found.group(1)) if found else 0
    view["pending"] = Counter((part, reason) for _, state, part, _, reason, _ in jobs if state == "PENDING")
    view["pending_by_partition"] = Counter((part,) for _, state, part, *_ in jobs if state == "PENDING")
    rows = lines(slurm, "sinfo", "-N", "-h", "-o", "%N|%R|%T")
    view["partition_nodes"] = Counter((part, base_state(state)) for _, part, state in rows)
    view["nodes"] = Counter((base_state(state),) for _, state in {(n, s) for n, _, s in rows})
    view["partition_cpus"] = Counter()
    for part, aiot in lines(slurm, "sinfo", "-h", "-o", "%R|%C"):
        a, i, o, _ = (int(x) for x in aiot.split("/"))
        view["partition_cpus"].update({(part, "allocated"): a, (part, "idle"): i, (part, "other"): o})
    view["cpus"] = Counter()
    view["memory"] = Counter()
    view["gpus"] = Counter()
    per_node = lines(slurm, "sinfo", "-N", "-h", "-o", "%N|%C|%m|%T")
    gres = {n: (g, u) for n, g, u in lines(slurm, "sinfo", "-N", "-h", "-O", "NodeList:|,Gres:|,GresUsed:|")}
    alloc_mem = {n: int(m) for n, m in lines(slurm, "sinfo", "-N", "-h", "-O", "NodeList:|,AllocMem:|")}
    for node, aiot, memory, _ in {tuple(r) for r in per_node}:
        a, i, o, _ = (int(x) for x in aiot.split("/"))
        view["cpus"].update({("allocated",): a, ("idle",): i, ("other",): o})
        view["memory"].update({("total",): int(memory), ("allocated",): alloc_mem[node.strip()]})
        total, used = gres[node.strip()]
        view["gpus"].update({("total",): gpu_count(total), ("allocated",): gpu_count(used)})
    return {k: +v for k, v in view.items()}  # drop zeros


def exporter_view(series: Series) -> dict[str, Counter[tuple[str, ...]]]:
    view = {
        "jobs": pick(series, "sunk_slurm_jobs", "state", "partition", "account"),
        "job_cpus": pick(series, "sunk_slurm_job_cpus", "state", "partition", "account"),
        "job_gpus": pick(series, "sunk_slurm_job_gpus", "state", "partition", "account"),
        "pending": pick(series, "sunk_slurm_jobs_pending", "partition", "reason"),
        "pending_by_partition": pick(series, "sunk_slurm_pending_wait_seconds_gcount", "partition"),
        "partition_nodes": pick(series, "sunk_slurm_partition_nodes", "partition", "state"),
        "nodes": pick(series, "sunk_slurm_nodes", "state"),
        "partition_cpus": pick(series, "sunk_slurm_partition_cpus", "partition", "state"),
        "cpus": pick(series, "sunk_slurm_cpus", "state"),
    }
    mib = 1024 * 1024
    memory = pick(series, "sunk_slurm_memory_bytes", "state")
    view["memory"] = Counter(
        {
            ("total",): int(series[("sunk_slurm_memory_bytes_total", ())]) // mib,
            ("allocated",): memory[("allocated",)] // mib,
        }
    )
    gpus = pick(series, "sunk_slurm_gpus", "state")
    view["gpus"] = Counter(
        {("total",): int(series[("sunk_slurm_gpus_total", ())]), ("allocated",): gpus[("allocated",)]}
    )
    return {k: +v for k, v in view.items()}


SDIAG = {
    # sdiag line (in its section) -> the exporter's series
    ("", "Jobs submitted"): "sunk_slurm_jobs_submitted_total",
    ("", "Jobs started"): "sunk_slurm_jobs_started_total",
    ("", "Jobs completed"): "sunk_slurm_jobs_completed_total",
    ("", "Jobs canceled"): "sunk_slurm_jobs_canceled_total",
    ("", "Jobs failed"): "sunk_slurm_jobs_failed_total",
    ("", "Agent queue size"): "sunk_slurm_agent_queue_size",
    ("", "DBD Agent queue size"): "sunk_slurm_dbd_agent_queue_size",
    ("main", "Total cycles"): "sunk_slurm_scheduler_cycles_total",
    ("main", "Last cycle"): "sunk_slurm_scheduler_cycle_last_seconds",
    ("main", "Max cycle"): "sunk_slurm_scheduler_cycle_max_seconds",
    ("main", "Mean cycle"): "sunk_slurm_scheduler_cycle_mean_seconds",
    ("main", "Mean depth cycle"): "sunk_slurm_scheduler_mean_depth",
    ("main", "Last queue length"): "sunk_slurm_scheduler_queue_length",
    ("backfill", "Total backfilled jobs (since last slurm start)"): "sunk_slurm_backfilled_jobs_total",
    ("backfill", "Total cycles"): "sunk_slurm_backfill_cycles_total",
    ("backfill", "Last cycle"): "sunk_slurm_backfill_cycle_last_seconds",
    ("backfill", "Max cycle"): "sunk_slurm_backfill_cycle_max_seconds",
    ("backfill", "Last depth cycle"): "sunk_slurm_backfill_last_depth",
    ("backfill", "Last queue length"): "sunk_slurm_backfill_queue_length",
}
SECONDS = {n for n in SDIAG.values() if n.endswith("_seconds")}


def sdiag(slurm: LocalSlurm) -> dict[str, float]:
    """sdiag's numbers in the exporter's names and units (microseconds -> seconds)."""
    section = ""
    out: dict[str, float] = {}
    for line in slurm.run("sdiag", check=True).stdout.splitlines():
        if line.startswith("Main schedule statistics"):
            section = "main"
        elif line.startswith("Backfilling stats"):
            section = "backfill"
        elif not line.startswith("\t") and line.strip() and ":" not in line:
            section = ""
        key, _, value = line.strip().partition(":")
        name = SDIAG.get((section, key.strip())) or SDIAG.get(("", key.strip()))
        if name and value.strip().lstrip("-").isdigit() and name not in out:
            number = float(value.strip())
            out[name] = number * 1e-6 if name in SECONDS else number
    return out


def stable_comparison(served: Served, read_cli: Any) -> tuple[Any, Any]:
    """(exporter, cli) read between two exporter scrapes that agree; retried while Slurm moves
    (backfill and scheduler cycles; on a loaded machine each read takes longer, so more may fall
    between two scrapes)."""
    for _ in range(40):
        before = served.scrape()
        cli = read_cli()
        after = served.scrape()
        if exporter_view(before) == exporter_view(after) and _diag(before) == _diag(after):
            return before, cli
        time.sleep(0.5)
    raise AssertionError("Slurm kept changing between reads")


def _diag(series: Series) -> dict[str, float]:
    return {name: series[(name, ())] for name in SDIAG.values()}


def wait_for(slurm: LocalSlurm, want: dict[int, tuple[str, str]], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    seen: dict[int, tuple[str, str]] = {}
    while time.monotonic() < deadline:
        seen = {int(i): (state, reason) for i, state, _, _, reason, _ in squeue(slurm)}
        if all(seen.get(job) == w for job, w in want.items()):
            return
        time.sleep(0.5)
    raise AssertionError(f"jobs never reached {want}: {seen}")


def test_the_exporter_serves_what_squeue_sinfo_and_sdiag_print(slurm: LocalSlurm, served: Served) -> None:
    sleep = "#!/bin/sh\nsleep 600\n"
    completed = slurm.sbatch("#!/bin/sh\ntrue\n", "-p", "batch", "-w", "cpu-1")
    assert slurm.wait_job(completed) == "COMPLETED"
    running = slurm.sbatch(sleep, "-p", "batch", "-w", "cpu-0", "--exclusive")
    gpu_job = slurm.sbatch(sleep, "-p", "gpu", "-w", "gpu-0", "--gres=gpu:1", "-c", "2")
    wait_for(slurm, {running: ("RUNNING", "None"), gpu_job: ("RUNNING", "None")})
    slurm.run("scontrol", "update", "nodename=cpu-1", "state=drain", "reason=exporter test", check=True)
    slurm.run("scontrol", "update", "nodename=gpu-0", "state=drain", "reason=exporter test", check=True)
    try:
        # Waits for cpu-0 (a reason code squeue prints as is; for some, ReqNodeNotAvail among them,
        # squeue prints a description naming nodes, which the exporter never makes a label of).
        resources = slurm.sbatch(sleep, "-p", "batch", "-w", "cpu-0")
        dependent = slurm.sbatch(sleep, "-p", "batch", f"--dependency=afterok:{running}")
        held = slurm.sbatch(sleep, "-p", "gpu", "-H", "--gres=gpu:2")
        wait_for(
            slurm,
            {
                completed: ("COMPLETED", "None"),
                running: ("RUNNING", "None"),
                gpu_job: ("RUNNING", "None"),
                resources: ("PENDING", "Resources"),
                dependent: ("PENDING", "Dependency"),
                held: ("PENDING", "JobHeldUser"),
            },
        )

        series, cli = stable_comparison(served, lambda: cli_view(slurm))
        got = exporter_view(series)
        assert got == cli
        # The workload is what the test meant, so the equality above covers every case it names.
        assert got["pending"] == {("batch", "Resources"): 1, ("batch", "Dependency"): 1, ("gpu", "JobHeldUser"): 1}
        assert got["jobs"][("completed", "batch", "root")] == 1 and got["jobs"][("running", "batch", "root")] == 1
        assert got["nodes"] == {("drained",): 1, ("draining",): 1, ("allocated",): 1, ("idle",): 1}
        assert got["gpus"] == {("total",): 4, ("allocated",): 1}
        # GPUs by account: the running job's allocated GPU, the held job's requested two.
        assert got["job_gpus"] == {("running", "gpu", "root"): 1, ("pending", "gpu", "root"): 2}
        assert got["partition_cpus"][("gpu", "other")] == 14  # gpu-0's free CPUs, drained: neither idle nor allocated
        # The queue's wait distribution holds every pending job once, in ascending buckets.
        buckets = pick(series, "sunk_slurm_pending_wait_seconds_bucket", "partition", "le")
        assert buckets[("batch", "+Inf")] == 2 and buckets[("gpu", "+Inf")] == 1
        assert buckets[("batch", "60")] <= buckets[("batch", "300")] <= buckets[("batch", "+Inf")]

        # Backfill runs every bf_interval (30 s by default): wait for one cycle, so its numbers are not all 0.
        deadline = time.monotonic() + 90
        while sdiag(slurm)["sunk_slurm_backfill_cycles_total"] < 1:
            assert time.monotonic() < deadline, "no backfill cycle in 90 s"
            time.sleep(1)
        series, printed = stable_comparison(served, lambda: sdiag(slurm))
        assert printed["sunk_slurm_backfill_cycles_total"] >= 1 and printed["sunk_slurm_scheduler_cycles_total"] >= 1
        assert _diag(series) == pytest.approx(printed)
        assert printed["sunk_slurm_jobs_submitted_total"] >= 6  # this module's jobs at least
        assert series[("sunk_slurm_up", ())] == 1
    finally:  # the drains go; the jobs stay: the next tests read them
        for node in ("cpu-1", "gpu-0"):
            slurm.run("scontrol", "update", f"nodename={node}", "state=resume", check=True)


def test_slurm_unreachable_is_up_0_and_no_stale_numbers(slurm: LocalSlurm, served: Served) -> None:
    assert served.scrape()[("sunk_slurm_up", ())] == 1
    slurm.stop_slurmrestd()
    try:
        series = served.scrape()
        assert series[("sunk_slurm_up", ())] == 0
        assert not [name for name, _ in series if name.startswith("sunk_slurm_") and name != "sunk_slurm_up"]
        assert series[("sunk_exporter_errors_total", (("endpoint", "jobs"),))] >= 1
    finally:
        slurm.start_slurmrestd()
    assert served.scrape()[("sunk_slurm_up", ())] == 1


def test_the_process_from_the_runtime_image_serves_the_same(
    slurm: LocalSlurm, served: Served, tmp_path: Path, runtime_image: RuntimeImage
) -> None:
    """`python -m sunk.runtime.exporter` from the runtime image, configured from the environment as
    its Deployment configures it (jobs through squeue), serves what the in-process exporter serves
    through slurmrestd, and stops on SIGTERM."""
    (port,) = free_ports(1)
    env = {
        "PATH": os.environ["PATH"],
        "SUNK_CLUSTER": slurm.spec.name,
        "SUNK_NAMESPACE": slurm.spec.ns,
        "SUNK_SLURMRESTD_URL": slurm.rest_url,
        "SUNK_JWT_KEY_FILE": str(slurm.jwt_key_path),
        "SUNK_METRICS_PORT": str(port),
        "SUNK_COLLECT_INTERVAL": "5",
        "SUNK_PER_USER_METRICS": "true",
        # slurm.conf as the Deployment mounts it: every job read through the image's squeue.
        "SUNK_SLURM_CONF_FILE": str(slurm.etc / "slurm.conf"),
    }
    log = tmp_path / "exporter.log"
    with log.open("wb") as out:
        proc = runtime_image.popen("sunk.runtime.exporter", env, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 120
        text = ""
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"exporter process: exit {proc.poll()}\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
                    text = reply.read().decode()
            except OSError:
                continue
            if "sunk_slurm_up 1.0" not in text:
                continue
            got = {
                (s.name, tuple(sorted(s.labels.items()))): s.value
                for f in text_string_to_metric_families(text)
                for s in f.samples
            }
            mine, theirs = exporter_view(got), exporter_view(served.scrape())
            nodes = (mine["nodes"], theirs["nodes"])
            # GPUs by account through the image's squeue (tres-alloc) and through slurmrestd.
            gpus = (mine["job_gpus"], theirs["job_gpus"])
            jobs = Counter(state.lower() for _, state, *_ in squeue(slurm))
            users = (pick(got, "sunk_slurm_user_jobs", "state"), Counter({(s,): n for s, n in jobs.items()}))
            # The process collects every 5 s: a job or node that changed since (a finished job
            # leaving squeue after MinJobAge, say) agrees again at its next collection.
            if nodes[0] == nodes[1] and users[0] == users[1] and gpus[0] == gpus[1]:
                break
            assert time.monotonic() < deadline, (nodes, users, gpus)
        assert gpus[0], "the module's GPU jobs"
        # The jobs were read through squeue (as the image's user, with a token only), none fell back.
        assert got[("sunk_exporter_job_reads_total", (("via", "squeue"),))] >= 1, text
        assert ("sunk_exporter_job_reads_total", (("via", "slurmrestd"),)) not in got
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert proc.returncode == 0, log.read_text()[-2000:]
