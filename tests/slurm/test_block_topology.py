"""globex-prod's shape on real Slurm: auth/slurm (no munged) and topology/block from Node labels.

The stack's blockSizes (18 nodes per NVL72 clique) would need 18 simulated nodes per block: Slurm
24.11 rejects a block with fewer registered nodes than the base block size (measured: slurmctld
exits with "children count lower than bblock_node_cnt"). So the cliques here have 2 nodes and
blockSizes [2, 4]; everything else is the stack as written."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sunk.runtime.harness import LocalSlurm, SimNode

from sunk import naming
from sunk.stackfile import load_stack

pytestmark = pytest.mark.slurm

CLIQUE = "nvidia.com/gpu.clique"


@pytest.fixture(scope="module")
def globex_prod() -> Iterator[LocalSlurm]:
    spec = load_stack("globex-prod").spec
    assert spec.auth.type == "slurm" and spec.topology.plugin == "block"
    spec = spec.model_copy(update={"topology": spec.topology.model_copy(update={"block_sizes": [2, 4]})})
    nodes = [
        SimNode("gb200-0", "gb200", {CLIQUE: "nvl-a"}),
        SimNode("gb200-1", "gb200", {CLIQUE: "nvl-a"}),
        SimNode("gb200-2", "gb200", {CLIQUE: "nvl-b"}),
        SimNode("gb200-3", "gb200", {CLIQUE: "nvl-b"}),
        SimNode("cpu-0", "cpu"),  # no clique label: the renderer's `unlabeled` block
        SimNode("cpu-1", "cpu"),
    ]
    with LocalSlurm.start(spec, nodes) as slurm:
        yield slurm


def test_auth_slurm_runs_without_munged(globex_prod: LocalSlurm) -> None:
    assert "munged" not in globex_prod.jail.processes
    assert "AuthType=auth/slurm" in globex_prod.files["slurm.conf"]
    done = globex_prod.run("srun", "-p", "cpu", "-N2", "-l", "printenv", "SLURMD_NODENAME", check=True)
    assert sorted(line.split(": ")[1] for line in done.stdout.splitlines()) == ["cpu-0", "cpu-1"]


def test_blocks_from_clique_labels_are_accepted(globex_prod: LocalSlurm) -> None:
    shown = globex_prod.run("scontrol", "show", "topology", check=True).stdout
    assert "BlockName=nvl-a BlockIndex=0 Nodes=gb200-[0-1] BlockSize=2" in shown
    assert "BlockName=nvl-b BlockIndex=1 Nodes=gb200-[2-3] BlockSize=2" in shown
    assert "Nodes=cpu-[0-1]" in shown


def test_a_job_is_placed_in_whole_blocks(globex_prod: LocalSlurm) -> None:
    done = globex_prod.run("srun", "-p", "gpu", "-N2", "--segment=2", "-l", "printenv", "SLURMD_NODENAME", check=True)
    ran = sorted(line.split(": ")[1] for line in done.stdout.splitlines())
    assert ran in (["gb200-0", "gb200-1"], ["gb200-2", "gb200-3"])
    gpus = globex_prod.run("srun", "-p", "gpu", "--gres=gpu:gb200:4", "printenv", "SLURM_GPUS_ON_NODE", check=True)
    assert gpus.stdout.strip() == "4"


def test_slurmrestd_works_with_auth_slurm(globex_prod: LocalSlurm) -> None:
    headers = {"X-SLURM-USER-NAME": "slurm", "X-SLURM-USER-TOKEN": globex_prod.token()}
    resp = httpx.get(f"{globex_prod.rest_url}/slurm/{naming.SLURMRESTD_API}/nodes/", headers=headers, timeout=30)
    assert resp.status_code == 200, resp.text
    assert {n["name"] for n in resp.json()["nodes"]} == {n.name for n in globex_prod.nodes}


def test_an_underfilled_clique_does_not_stop_slurmctld(globex_prod: LocalSlurm) -> None:
    # One node of a new clique: a block below the base size (2) would make slurmctld exit on
    # reconfigure; the renderer leaves it commented out instead.
    globex_prod.start_slurmd(SimNode("gb200-4", "gb200", {CLIQUE: "nvl-c"}))
    assert "# BlockName=nvl-c Nodes=gb200-4 (fewer nodes" in globex_prod.files["topology.conf"]
    globex_prod.reconfigure()
    assert "is UP" in globex_prod.run("scontrol", "ping", check=True).stdout
    lonely = globex_prod.run("srun", "-p", "gpu", "-w", "gb200-4", "-t", "1", "--immediate=5", "true")
    assert "Requested topology configuration is not available" in lonely.stderr
    globex_prod.run("srun", "-p", "gpu", "-N4", "true", check=True)
