"""globex-prod as written, on real Slurm: auth/slurm (no munged) and topology/block with the
stack's BlockSizes 18,36,72, so one GB200 NVL72 rack (18 trays) is a base block.

Measured on 24.11 (see the spec's TopologySpec.block_sizes): slurmctld exits on a block with fewer
registered nodes than the base size, so a rack still filling stays a comment in topology.conf and
its nodes run no job in the gpu partition; nodes without the clique label (the cpu NodeSet) are in
no block, and a partition without block nodes schedules them as if there were no topology."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sunk.runtime.harness import LocalSlurm, SimNode

from sunk import naming
from sunk.render import TopologyNode, render_topology_conf
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

pytestmark = pytest.mark.slurm

CLIQUE = "nvidia.com/gpu.clique"
RACK = 18  # GB200 NVL72: 18 compute trays (nodes) of 4 GPUs share one NVLink domain


def _ran_on(stdout: str) -> list[str]:
    return sorted({line.split(": ")[1] for line in stdout.splitlines()})


def _hosts(slurm: LocalSlurm, hostlist: str) -> list[str]:
    return sorted(slurm.run("scontrol", "show", "hostnames", hostlist, check=True).stdout.split())


@pytest.fixture(scope="module")
def globex_prod() -> Iterator[LocalSlurm]:
    spec = load_stack("globex-prod", FIXTURE_STACKS).spec
    assert spec.auth.type == "slurm" and spec.topology.plugin == "block"
    assert spec.topology.block_sizes == [RACK, 2 * RACK, 4 * RACK]
    cpu = spec.nodeset("cpu").desired_replicas
    assert cpu is not None and cpu < RACK  # too few to fill a block: fine in a partition of their own
    nodes = [SimNode(f"gb200-{i}", "gb200", {CLIQUE: "nvl72-a"}) for i in range(RACK)]
    nodes.append(SimNode(f"gb200-{RACK}", "gb200", {CLIQUE: "nvl72-b"}))  # the first tray of a second rack
    nodes += [SimNode(naming.slurm_node_name("cpu", i), "cpu") for i in range(cpu)]  # no clique label
    with LocalSlurm.start(spec, nodes) as slurm:
        print(f"\nLocalSlurm globex-prod ({len(nodes)} nodes) start-up: {slurm.timings}")
        yield slurm


def test_auth_slurm_runs_without_munged(globex_prod: LocalSlurm) -> None:
    assert not [name for name in globex_prod.jail.processes if name.startswith("munged")]
    assert "AuthType=auth/slurm" in globex_prod.files["slurm.conf"]


def test_the_full_rack_is_a_block_and_the_rest_is_in_none(globex_prod: LocalSlurm) -> None:
    conf = globex_prod.files["topology.conf"].splitlines()
    assert "BlockName=nvl72-a Nodes=gb200-[0-17]" in conf
    assert f"# BlockName=nvl72-b Nodes=gb200-{RACK} (fewer nodes than the base block size {RACK})" in conf
    assert f"# In no block (no {CLIQUE} label): cpu-[0-3]" in conf
    shown = globex_prod.run("scontrol", "show", "topology", check=True).stdout.splitlines()
    assert [line.split()[0] for line in shown] == ["BlockName=nvl72-a"], shown
    assert f"BlockSize={RACK}" in shown[0]
    block_nodes = shown[0].split("Nodes=")[1].split()[0]
    assert _hosts(globex_prod, block_nodes) == sorted(f"gb200-{i}" for i in range(RACK))


def test_the_cpu_partition_runs_jobs_on_every_cpu_node(globex_prod: LocalSlurm) -> None:
    cpus = sorted(n.name for n in globex_prod.nodes if n.nodeset == "cpu")
    done = globex_prod.run("srun", "-p", "cpu", f"-N{len(cpus)}", "-l", "printenv", "SLURMD_NODENAME", check=True)
    assert _ran_on(done.stdout) == cpus
    one = globex_prod.run("srun", "-p", "cpu", "-w", cpus[-1], "printenv", "SLURMD_NODENAME", check=True)
    assert one.stdout.strip() == cpus[-1]


def test_the_gpu_partition_runs_jobs_inside_the_rack(globex_prod: LocalSlurm) -> None:
    rack = sorted(f"gb200-{i}" for i in range(RACK))
    whole = globex_prod.run("srun", "-p", "gpu", f"-N{RACK}", "-l", "printenv", "SLURMD_NODENAME", check=True)
    assert _ran_on(whole.stdout) == rack
    pair = globex_prod.run("srun", "-N2", "-l", "printenv", "SLURMD_NODENAME", check=True)  # gpu is the default
    assert set(_ran_on(pair.stdout)) <= set(rack)
    gpus = globex_prod.run("srun", "--gres=gpu:gb200:4", "printenv", "SLURM_GPUS_ON_NODE", check=True)
    assert gpus.stdout.strip() == "4"


def test_a_tray_of_an_unfilled_rack_runs_no_job(globex_prod: LocalSlurm) -> None:
    lonely = globex_prod.run("srun", "-p", "gpu", "-w", f"gb200-{RACK}", "-t", "1", "--immediate=5", "true")
    assert "Requested topology configuration is not available" in lonely.stderr
    more = globex_prod.run("srun", "-p", "gpu", f"-N{RACK + 1}", "-t", "1", "--immediate=5", "true")
    assert more.returncode != 0  # 19 nodes fit in no block: the rack-b tray does not count


def test_slurmrestd_works_with_auth_slurm(globex_prod: LocalSlurm) -> None:
    headers = {"X-SLURM-USER-NAME": "slurm", "X-SLURM-USER-TOKEN": globex_prod.token()}
    resp = httpx.get(f"{globex_prod.rest_url}/slurm/{naming.SLURMRESTD_API}/nodes/", headers=headers, timeout=30)
    assert resp.status_code == 200, resp.text
    assert {n["name"] for n in resp.json()["nodes"]} == {n.name for n in globex_prod.nodes}


def test_a_rack_whose_pods_are_scheduled_but_not_registered_stays_a_comment(globex_prod: LocalSlurm) -> None:
    # The operator lists every scheduled slurmd pod; slurmctld counts only registered nodes in a
    # block and exits below the base size, so the operator renders with the registered set.
    started = [TopologyNode(n.name, n.labels) for n in globex_prod.nodes]
    pending = [TopologyNode(f"gb200-{i}", {CLIQUE: "nvl72-c"}) for i in range(100, 100 + RACK)]
    registered = globex_prod.run("sinfo", "-h", "-N", "-o", "%N", check=True).stdout.split()
    text = render_topology_conf(globex_prod.spec, [*started, *pending], registered=registered)
    assert "# BlockName=nvl72-c Nodes=gb200-[100-117] (fewer registered nodes than the base block size 18)" in text
    (globex_prod.etc / "topology.conf").write_text(text)
    globex_prod.reconfigure()
    assert "is UP" in globex_prod.run("scontrol", "ping", check=True).stdout


def test_a_second_rack_joins_once_full_and_jobs_span_two_racks(globex_prod: LocalSlurm) -> None:
    # Runs last in this module: it grows the cluster to two full racks.
    for i in range(RACK + 1, 2 * RACK):
        globex_prod.start_slurmd(SimNode(f"gb200-{i}", "gb200", {CLIQUE: "nvl72-b"}))
    assert "BlockName=nvl72-b Nodes=gb200-[18-35]" in globex_prod.files["topology.conf"].splitlines()
    globex_prod.reconfigure()
    shown = globex_prod.run("scontrol", "show", "topology", check=True).stdout
    assert "BlockName=nvl72-b BlockIndex=1" in shown and f"BlockSize={2 * RACK}" in shown  # aggregated
    # 36 slurmd re-register after the reconfigure; on a loaded 2-core machine that took over a
    # minute once (srun waits, "queued and waiting for resources"), so give it room.
    done = globex_prod.run(
        "srun", "-p", "gpu", f"-N{2 * RACK}", "-l", "printenv", "SLURMD_NODENAME", check=True, timeout=300
    )
    assert _ran_on(done.stdout) == sorted(f"gb200-{i}" for i in range(2 * RACK))
