"""Switch names from label values that read alike, clash with the built-in switches or are long:
slurmctld 24.11 exits on a name defined twice ("Switch (a-b-c) has already been defined") and on a
SwitchName over 64 characters (measured), so the rendered names must avoid both."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from sunk.runtime.harness import LocalSlurm, SimNode

from sunk.spec import load_spec

pytestmark = pytest.mark.slurm

LONG = "x" * 63  # the longest Kubernetes label value
LABELS = [
    {"spine": "a-b", "leaf": "c"},
    {"spine": "a", "leaf": "b-c"},  # joined, both read a-b-c
    {"spine": "root", "leaf": "unlabeled"},  # built-in switch names
    {"spine": LONG, "leaf": LONG},  # 127 characters joined
    {},  # no labels: the built-in `unlabeled` switch
]


@pytest.fixture(scope="module")
def tree() -> Iterator[LocalSlurm]:
    spec = load_spec(
        {
            "name": "names",
            "tenant": "test",
            "accounting": {"enabled": False},
            "scheduling": {"preemptType": "none", "preemptMode": "off"},
            "nodesets": [{"name": "cpu", "replicas": len(LABELS), "cpus": 1, "memoryMib": 1024}],
            "partitions": [{"name": "all", "nodesets": ["cpu"], "default": True}],
            "topology": {"plugin": "tree", "labelKeys": ["spine", "leaf"]},
        }
    )
    nodes = [SimNode(f"cpu-{i}", "cpu", labels) for i, labels in enumerate(LABELS)]
    with LocalSlurm.start(spec, nodes, accounting=False, restapi=False) as slurm:
        yield slurm


def test_slurmctld_accepts_every_rendered_switch(tree: LocalSlurm) -> None:
    rendered = re.findall(r"^SwitchName=(\S+)", tree.files["topology.conf"], re.M)
    assert len(rendered) == len(set(rendered)) == 10, tree.files["topology.conf"]
    shown = re.findall(r"^SwitchName=(\S+)", tree.run("scontrol", "show", "topology", check=True).stdout, re.M)
    assert sorted(shown) == sorted(rendered)
    assert max(len(name) for name in shown) == 63


def test_a_job_spans_every_switch_through_the_root(tree: LocalSlurm) -> None:
    done = tree.run("srun", f"-N{len(LABELS)}", "-l", "printenv", "SLURMD_NODENAME", check=True)
    assert len(set(done.stdout.split())) == 2 * len(LABELS)  # "i:" prefixes and node names
