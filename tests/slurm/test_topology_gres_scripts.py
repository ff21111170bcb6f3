"""topology.conf and GRES from the spec are accepted by real Slurm; prolog and job_submit.lua run."""

from __future__ import annotations

import re

import pytest
from sunk.runtime.harness import LocalSlurm

from sunk.spec.cluster import ClusterSpec

pytestmark = pytest.mark.slurm


def _switches(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"SwitchName=(\S+).*?Nodes=(\S+)", text)}


def test_topology_lists_rendered_switches_with_registered_nodes(acme: LocalSlurm) -> None:
    rendered = [m.group(1) for m in re.finditer(r"^SwitchName=(\S+)", acme.files["topology.conf"], re.M)]
    assert rendered, acme.files["topology.conf"]
    shown = _switches(acme.run("scontrol", "show", "topology", check=True).stdout)
    assert set(shown) == set(rendered)
    expanded = acme.run("scontrol", "show", "hostnames", ",".join(shown.values()), check=True).stdout.split()
    assert set(expanded) == {n.name for n in acme.nodes}
    # Each NodeSet's nodes share the leaf switch their labels name.
    for node in acme.nodes:
        leaf = "-".join(node.labels[k] for k in acme.spec.topology.label_keys)
        members = acme.run("scontrol", "show", "hostnames", shown[leaf], check=True).stdout.split()
        assert node.name in members


def test_a_job_needing_topology_runs_across_leaves(acme: LocalSlurm) -> None:
    # Before `scontrol reconfigure` this fails: "Requested topology configuration is not available".
    done = acme.run("srun", "-N", str(len(acme.nodes)), "--switches=2", "-l", "true", check=True)
    assert done.returncode == 0


def test_gpu_nodes_offer_their_gres(acme: LocalSlurm, acme_spec: ClusterSpec) -> None:
    for node in acme.nodes:
        ns = acme_spec.nodeset(node.nodeset)
        out = acme.run("scontrol", "show", "node", node.name, check=True).stdout
        gres = re.search(r"\bGres=(\S+)", out)
        assert gres is not None
        expected = f"gpu:{ns.gpus.type}:{ns.gpus.count}" if ns.gpus else "(null)"
        assert gres.group(1) == expected


def test_a_gpu_job_gets_one_gpu(acme: LocalSlurm) -> None:
    script = "echo $SLURM_GPUS_ON_NODE $CUDA_VISIBLE_DEVICES"
    done = acme.run("srun", "-p", "gpu", "--gres=gpu:1", "sh", "-c", script, check=True)
    count, visible = done.stdout.split()
    assert count == "1" and visible in {"0", "1"}
    too_many = acme.run("srun", "-p", "gpu", "--gres=gpu:3", "-t", "1", "--immediate=5", "true")
    assert too_many.returncode != 0  # two GPUs per node (gres-gpu.conf), not three


def test_prolog_from_the_stack_runs_before_each_job(acme: LocalSlurm) -> None:
    job = acme.sbatch("#!/bin/sh\ntrue\n", "-C", "cpu")
    acme.wait_job(job)
    log = (acme.root / "tmp/sunk-prolog.log").read_text().splitlines()
    assert f"prolog job={job}" in log


def test_job_submit_lua_sets_the_comment_unless_given(acme: LocalSlurm) -> None:
    plain = acme.sbatch("#!/bin/sh\ntrue\n", "-C", "cpu")
    mine = acme.sbatch("#!/bin/sh\ntrue\n", "-C", "cpu", "--comment=mine")
    for job, comment in ((plain, "submitted-via-sunk"), (mine, "mine")):
        out = acme.run("scontrol", "show", "job", str(job), check=True).stdout
        assert f"Comment={comment}" in out
