"""Every NodeSet's simulated nodes register from the rendered files and run jobs."""

from __future__ import annotations

import pytest
from sunk.runtime.harness import LocalSlurm

from sunk.spec.cluster import ClusterSpec
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

pytestmark = pytest.mark.slurm

ACME = load_stack("acme-dev", FIXTURE_STACKS).spec


def _sinfo(slurm: LocalSlurm) -> list[list[str]]:
    out = slurm.run("sinfo", "-h", "-N", "-o", "%N|%P|%T|%f|%c|%m", check=True).stdout
    return [line.split("|") for line in out.splitlines()]


def test_every_nodeset_registers_idle_with_its_shape(acme: LocalSlurm, acme_spec: ClusterSpec) -> None:
    rows = _sinfo(acme)
    assert {r[0] for r in rows} == {n.name for n in acme.nodes}
    for node in acme.nodes:
        ns = acme_spec.nodeset(node.nodeset)
        mine = [r for r in rows if r[0] == node.name]
        assert {r[2] for r in mine} == {"idle"}, mine
        _, _, _, features, cpus, memory = mine[0]
        # The NodeSet's name, its features, and sunk_shared for a shared NodeSet (acme-dev's gpu).
        assert (
            features.split(",")
            == ns.slurm_features
            == [
                ns.name,
                *ns.features,
                *(["sunk_shared"] if ns.resource_mode == "shared" else []),
            ]
        )
        assert (int(cpus), int(memory)) == (ns.cpus, ns.memory_mib)
    assert {n.nodeset for n in acme.nodes} == {ns.name for ns in acme_spec.nodesets}


@pytest.mark.parametrize("nodeset", [ns.name for ns in ACME.nodesets])
def test_sbatch_runs_on_each_nodeset(acme: LocalSlurm, nodeset: str) -> None:
    job = acme.sbatch("#!/bin/sh\necho ran on $SLURMD_NODENAME\n", "-C", nodeset, "-o", "/tmp/%j.out")
    acme.wait_job(job)
    out = (acme.root / f"tmp/{job}.out").read_text().split()
    assert out[:2] == ["ran", "on"]
    assert out[2] in {n.name for n in acme.nodes if n.nodeset == nodeset}


@pytest.mark.parametrize("partition", [p.name for p in ACME.partitions])
def test_srun_spans_all_nodes_of_each_partition(acme: LocalSlurm, partition: str) -> None:
    nodesets = set(ACME.partitions[[p.name for p in ACME.partitions].index(partition)].nodesets)
    names = {n.name for n in acme.nodes if n.nodeset in nodesets}
    done = acme.run("srun", "-p", partition, "-N", str(len(names)), "-l", "printenv", "SLURMD_NODENAME", check=True)
    ran = {line.split(": ", 1)[1] for line in done.stdout.splitlines()}
    assert ran == names
