"""Named topologies (spec `topologies`, Slurm 26.05) through the components under Pulumi's mock
engine: one operator-maintained ConfigMap holds topology.yaml, which the controller and the
NodeSet pods mount, and the NodeSet resource carries the topologies the operator renders it from."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from sunk.components.offline import Evaluation, Registration, evaluate

from sunk.render import render_slurm_files
from sunk.spec import load_spec

SPEC = {
    "name": "topos",
    "tenant": "test",
    "slurm": {"version": "26.05"},
    "nodesets": [{"name": "cpu", "replicas": 4, "cpus": 2, "memoryMib": 1024}],
    "topologies": [
        {"name": "fabric", "plugin": "tree", "labelKeys": ["example.com/leaf"], "default": True},
        {"name": "nvl", "plugin": "block", "labelKeys": ["nvidia.com/gpu.clique"], "blockSizes": [2]},
    ],
    "partitions": [
        {"name": "all", "nodesets": ["cpu"], "default": True},
        {"name": "nvl", "nodesets": ["cpu"], "topology": "nvl"},
    ],
}
PROGRAM = f"""
from sunk.api import ClusterSpec, SlurmCluster

SlurmCluster("topos", ClusterSpec.model_validate({SPEC!r}))
"""


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory: pytest.TempPathFactory) -> Evaluation:
    folder: Path = tmp_path_factory.mktemp("topologies-program")
    (folder / "__main__.py").write_text(textwrap.dedent(PROGRAM))
    return evaluate(folder / "__main__.py", stack="dev", config={})


def _kind(evaluation: Evaluation, kind: str) -> list[Registration]:
    return [r for r in evaluation.kubernetes() if r.inputs["kind"] == kind]


def test_topology_yaml_is_one_config_map_left_to_the_operator(evaluation: Evaluation) -> None:
    maps = {r.inputs["metadata"]["name"]: r for r in _kind(evaluation, "ConfigMap")}
    topo = maps["topos-topology"]
    expected = render_slurm_files(load_spec(SPEC))["topology.yaml"]
    assert topo.inputs["data"] == {"topology.yaml": expected}
    assert topo.ignore_changes == ("data",)
    assert topo.inputs["metadata"]["annotations"]["slurm.sunk.dev/slurm-file"] == "topology.yaml"
    assert not [r for r in maps.values() if "topology.conf" in (r.inputs.get("data") or {})]
    doc = yaml.safe_load(expected)
    assert [(t["topology"], t["cluster_default"]) for t in doc] == [("fabric", True), ("nvl", False)]
    slurm_conf = next(r for r in maps.values() if "slurm.conf" in (r.inputs.get("data") or {}))
    assert "Topology=nvl" in slurm_conf.inputs["data"]["slurm.conf"]
    assert "TopologyPlugin" not in slurm_conf.inputs["data"]["slurm.conf"]


def test_the_controller_mounts_topology_yaml(evaluation: Evaluation) -> None:
    (controller,) = [r for r in _kind(evaluation, "StatefulSet") if r.inputs["metadata"]["name"] == "topos-controller"]
    items = [
        item
        for volume in controller.inputs["spec"]["template"]["spec"]["volumes"]
        for source in (volume.get("projected") or {}).get("sources", [])
        if (source.get("configMap") or {}).get("name") == "topos-topology"
        for item in source["configMap"]["items"]
    ]
    assert items == [{"key": "topology.yaml", "path": "topology.yaml"}]


def test_the_nodeset_carries_the_topologies_and_the_operator_may_write_them(evaluation: Evaluation) -> None:
    (nodeset,) = _kind(evaluation, "NodeSet")
    assert [t["name"] for t in nodeset.inputs["spec"]["topologies"]] == ["fabric", "nvl"]
    rules = [rule for role in _kind(evaluation, "Role") for rule in role.inputs["rules"]]
    assert any(rule.get("resourceNames") == ["topos-topology"] and "patch" in rule["verbs"] for rule in rules)
