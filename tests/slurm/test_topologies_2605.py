"""Several named topologies (spec `topologies`) on real Slurm 26.05 daemons: one topology.yaml with
a tree (the default), a block and a flat topology, partitions picking one each.

The cluster boots as a stack deploys: slurmctld starts on the deploy-time topology.yaml, which
names no node (the tree is its root switch alone, the block topology is flat until a block
fills); the nodes register dynamically, and the file re-rendered from their labels binds them on
`scontrol reconfigure`, as the NodeSet operator does."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.operator.topology import Reconfigure, TopologyObserved, WriteTopology, config_map, plan_topology
from sunk.runtime.slurmrest import JwtMinter, SlurmRestClient

from sunk import naming
from sunk.render import TopologyNode, render_slurm_files
from sunk.spec import ClusterSpec, load_spec
from tests.slurm.test_logs import HARMLESS, OUTDATED
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slurm

SPINE, LEAF, CLIQUE = "example.com/spine", "example.com/leaf", "nvidia.com/gpu.clique"


def _spec() -> ClusterSpec:
    return load_spec(
        {
            "name": "topos",
            "tenant": "test",
            "slurm": {"version": "26.05"},
            "accounting": {"enabled": False},
            "scheduling": {"preemptType": "none", "preemptMode": "off", "priorityType": "basic"},
            "nodesets": [{"name": "cpu", "replicas": 8, "cpus": 1, "memoryMib": 512}],
            "topologies": [
                {"name": "fabric", "plugin": "tree", "labelKeys": [SPINE, LEAF], "default": True},
                {"name": "nvl", "plugin": "block", "labelKeys": [CLIQUE], "blockSizes": [2]},
                {"name": "plain", "plugin": "flat"},
            ],
            "partitions": [
                {"name": "all", "nodesets": ["cpu"], "default": True},
                {"name": "nvl", "nodesets": ["cpu"], "topology": "nvl"},
                {"name": "anywhere", "nodesets": ["cpu"], "topology": "plain"},
            ],
        }
    )


def _node(i: int) -> SimNode:
    """Nodes two by two under one leaf switch and in one NVLink clique: cpu-0,1 / cpu-2,3 / ..."""
    return SimNode(
        naming.slurm_node_name("cpu", i), "cpu", {SPINE: "sp0", LEAF: f"leaf{i // 2}", CLIQUE: f"nvl{i // 2}"}
    )


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    with LocalSlurm.start(_spec(), [_node(i) for i in range(4)], accounting=False) as cluster:
        yield cluster


def _show(slurm: LocalSlurm, *name: str) -> list[str]:
    return slurm.run("scontrol", "show", "topology", *name, check=True).stdout.split("\n")


def _records(slurm: LocalSlurm, name: str) -> dict[str, set[str]]:
    """`scontrol show topology NAME`: switch or block name -> its nodes (expanded)."""
    out = {}
    for line in _show(slurm, name):
        words = dict(w.split("=", 1) for w in line.split() if "=" in w)
        record = words.get("SwitchName") or words.get("BlockName")
        if record and words.get("Nodes"):
            hosts = slurm.run("scontrol", "show", "hostnames", words["Nodes"], check=True).stdout.split()
            out[record] = set(hosts)
    return out


def _ran_on(slurm: LocalSlurm, *args: str) -> set[str]:
    done = slurm.run("srun", *args, "-l", "printenv", "SLURMD_NODENAME", check=True, timeout=120)
    return {line.split(": ")[1] for line in done.stdout.splitlines()}


def test_deploy_time_file_names_no_node_and_slurmctld_starts_on_it(slurm: LocalSlurm) -> None:
    deployed = render_slurm_files(_spec())["topology.yaml"]
    assert 'switch: "root"' in deployed and "nodes:" not in deployed
    assert "block:" not in deployed  # the block topology is flat until a block fills
    assert "TopologyPlugin" not in slurm.files["slurm.conf"]  # topology.yaml decides
    parts = [line for line in slurm.files["slurm.conf"].splitlines() if line.startswith("PartitionName=")]
    assert {w for line in parts for w in line.split() if w.startswith("Topology=")} == {
        "Topology=nvl",
        "Topology=plain",
    }
    assert "topology.conf" not in slurm.files


def test_each_topology_is_visible_by_name(slurm: LocalSlurm) -> None:
    fabric = _records(slurm, "fabric")
    assert fabric["sp0-leaf0"] == {"cpu-0", "cpu-1"} and fabric["sp0-leaf1"] == {"cpu-2", "cpu-3"}
    assert {"cpu-0", "cpu-1", "cpu-2", "cpu-3"} <= fabric["sp0"]
    nvl = _records(slurm, "nvl")
    assert nvl["nvl0"] == {"cpu-0", "cpu-1"} and nvl["nvl1"] == {"cpu-2", "cpu-3"}
    assert not any(line.startswith("SwitchName=") for line in _show(slurm, "nvl"))
    assert not _records(slurm, "plain")  # flat: no switch, no block
    assert _show(slurm) == _show(slurm, "fabric")  # the default topology is the tree
    shown = slurm.run("scontrol", "show", "partition", "nvl", check=True).stdout.split()
    assert "Topology=nvl" in shown


def test_a_partition_on_the_block_topology_runs_two_node_jobs_inside_a_block(slurm: LocalSlurm) -> None:
    ran = _ran_on(slurm, "-p", "nvl", "-N2")
    assert ran in ({"cpu-0", "cpu-1"}, {"cpu-2", "cpu-3"}, {"cpu-4", "cpu-5"}), ran
    across = slurm.run("srun", "-p", "nvl", "-N2", "-w", "cpu-1,cpu-2", "true", timeout=60)
    assert across.returncode != 0 and "Requested node configuration is not available" in across.stderr


def test_the_default_and_the_flat_topology_run_jobs_across_blocks(slurm: LocalSlurm) -> None:
    assert len(_ran_on(slurm, "-N2")) == 2  # partition `all`, on the default tree
    assert _ran_on(slurm, "-p", "all", "-N2", "-w", "cpu-1,cpu-2") == {"cpu-1", "cpu-2"}
    assert _ran_on(slurm, "-p", "anywhere", "-N2", "-w", "cpu-1,cpu-2") == {"cpu-1", "cpu-2"}


def test_dynamic_nodes_join_their_switch_and_block_on_reconfigure(slurm: LocalSlurm) -> None:
    new = [node for node in (_node(4), _node(5)) if node not in slurm.nodes]
    for node in new:
        slurm.start_slurmd(node)  # re-renders topology.yaml with them
    assert 'block: "nvl2"' in slurm.files["topology.yaml"]
    if new:  # registered, but outside every switch and block until slurmctld reads the file again
        assert "nvl2" not in _records(slurm, "nvl") and "sp0-leaf2" not in _records(slurm, "fabric")
    slurm.reconfigure()
    assert _records(slurm, "nvl")["nvl2"] == {"cpu-4", "cpu-5"}
    assert _records(slurm, "fabric")["sp0-leaf2"] == {"cpu-4", "cpu-5"}
    assert _ran_on(slurm, "-p", "nvl", "-N2", "-w", "cpu-4,cpu-5") == {"cpu-4", "cpu-5"}


def test_the_operators_plan_writes_the_yaml_and_its_reconfigure_binds_new_nodes(slurm: LocalSlurm) -> None:
    """The operator's steps on real daemons: topology.yaml planned from the registered nodes (read
    through slurmrestd) and their labels, put where slurmctld reads it (as the kubelet puts the
    ConfigMap), then the planned reconfigure through slurmrestd binds the new nodes."""
    spec = _spec()
    new = [node for node in (_node(6), _node(7)) if node not in slurm.nodes]
    for node in new:
        slurm.start_slurmd(node)
    if new:
        assert "nvl3" not in _records(slurm, "nvl")
    rest = SlurmRestClient(slurm.rest_url, user="slurm", token=JwtMinter.from_file(slurm.jwt_key_path, "slurm"))
    registered = frozenset(n.name for n in rest.list_nodes())
    assert {"cpu-6", "cpu-7"} <= registered
    nodes = [TopologyNode(n.name, n.labels) for n in slurm.nodes]
    now = datetime.now(UTC)

    def observed(cm: dict[str, object] | None) -> TopologyObserved:
        topologies = tuple(spec.topologies)
        return TopologyObserved("ns", spec.name, spec.topology, (), nodes, cm, registered, "26.05", None, topologies)

    delay = timedelta(seconds=90)
    (write,) = plan_topology(observed(None), now, delay)
    assert isinstance(write, WriteTopology) and write.key == "topology.yaml"
    (slurm.etc / "topology.yaml").write_text(write.text)
    stamp = (now - timedelta(seconds=600)).strftime("%Y-%m-%dT%H:%M:%SZ")
    (action,) = plan_topology(observed(config_map("ns", spec.name, write.text, stamp, write.key)), now, delay)
    assert isinstance(action, Reconfigure)
    rest.reconfigure()
    wait_for("nvl3 in the nvl topology", lambda: _records(slurm, "nvl").get("nvl3"), timeout=120, interval=0.5)
    assert _records(slurm, "nvl")["nvl3"] == {"cpu-6", "cpu-7"}
    assert _records(slurm, "fabric")["sp0-leaf3"] == {"cpu-6", "cpu-7"}
    assert _ran_on(slurm, "-p", "nvl", "-N2", "-w", "cpu-6,cpu-7") == {"cpu-6", "cpu-7"}


def test_slurmctld_logs_no_error_about_the_topologies(slurm: LocalSlurm) -> None:
    harmless = re.compile("|".join(HARMLESS))
    log = (slurm.log_dir / "slurmctld.log").read_text(errors="replace").splitlines()
    bad = [line for line in log if (re.search(r"\b(error|fatal):", line) and not harmless.search(line))]
    assert not bad + [line for line in log if OUTDATED.search(line)], "\n".join(bad)
