"""topology.conf from Node labels, table-driven against literal text, and its switch/block names."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from sunk.render import TopologyNode, render_slurm_files, render_topology_conf, render_topology_yaml, unique_names
from sunk.render.slurm_conf import HEADER
from sunk.render.topology import MAX_NAME
from sunk.spec import ClusterSpec
from sunk.spec.scheduling import NamedTopologySpec

MakeSpec = Callable[..., ClusterSpec]  # the make_spec fixture of conftest.py


def body(text: str) -> list[str]:
    """The lines after the header every rendered file starts with."""
    assert text.startswith(HEADER)
    return text.removeprefix(HEADER).splitlines()


def nodes(*rows: tuple[str, dict[str, str]]) -> list[TopologyNode]:
    return [TopologyNode(name, labels) for name, labels in rows]


FABRIC = nodes(
    ("gpu-0", {"fabric": "f1", "spine": "s1", "leaf": "l1"}),
    ("gpu-1", {"fabric": "f1", "spine": "s1", "leaf": "l1"}),
    ("gpu-2", {"fabric": "f1", "spine": "s1", "leaf": "l2"}),
    ("gpu-3", {"fabric": "f1", "spine": "s2", "leaf": "l1"}),
    ("gpu-4", {"fabric": "f2", "spine": "s1", "leaf": "l1"}),
    ("gpu-5", {"fabric": "f2", "spine": "s1"}),  # no leaf label: unlabeled
    ("cpu-0", {}),
)
CLIQUE = "nvidia.com/gpu.clique"
TOPOLOGY_CASES = [
    (
        "tree-three-levels-with-root",
        {"plugin": "tree", "labelKeys": ["fabric", "spine", "leaf"]},
        FABRIC,
        [
            "SwitchName=f1-s1-l1 Nodes=gpu-[0-1]",
            "SwitchName=f1-s1-l2 Nodes=gpu-2",
            "SwitchName=f1-s2-l1 Nodes=gpu-3",
            "SwitchName=f2-s1-l1 Nodes=gpu-4",
            "SwitchName=unlabeled Nodes=cpu-0,gpu-5",
            "SwitchName=f1-s1 Switches=f1-s1-l1,f1-s1-l2",
            "SwitchName=f1-s2 Switches=f1-s2-l1",
            "SwitchName=f2-s1 Switches=f2-s1-l1",
            "SwitchName=f1 Switches=f1-s1,f1-s2",
            "SwitchName=f2 Switches=f2-s1",
            "SwitchName=root Switches=f1,f2,unlabeled",
        ],
    ),
    (
        "tree-one-level-one-switch-no-root",
        {"plugin": "tree", "labelKeys": ["leaf"]},
        nodes(("n1", {"leaf": "a"}), ("n2", {"leaf": "a"}), ("n3", {"leaf": "a"})),
        ["SwitchName=a Nodes=n[1-3]"],
    ),
    (
        "tree-empty-label-value-is-unlabeled",
        {"plugin": "tree", "labelKeys": ["leaf"]},
        nodes(("n1", {"leaf": "a"}), ("n2", {"leaf": ""})),
        ["SwitchName=a Nodes=n1", "SwitchName=unlabeled Nodes=n2", "SwitchName=root Switches=a,unlabeled"],
    ),
    (
        "tree-label-values-made-safe",
        {"plugin": "tree", "labelKeys": ["leaf"]},
        nodes(("n1", {"leaf": "rack 7/a"}), ("n2", {"leaf": "rack_8"})),
        ["SwitchName=rack_7_a Nodes=n1", "SwitchName=rack_8 Nodes=n2", "SwitchName=root Switches=rack_7_a,rack_8"],
    ),
    (
        # Both paths read a-b-c: each gets a suffix hashed from its own values.
        "tree-joined-paths-that-read-alike",
        {"plugin": "tree", "labelKeys": ["spine", "leaf"]},
        nodes(("n1", {"spine": "a-b", "leaf": "c"}), ("n2", {"spine": "a", "leaf": "b-c"})),
        [
            "SwitchName=a-b-c-310c6517 Nodes=n2",
            "SwitchName=a-b-c-97a16767 Nodes=n1",
            "SwitchName=a Switches=a-b-c-310c6517",
            "SwitchName=a-b Switches=a-b-c-97a16767",
            "SwitchName=root Switches=a,a-b",
        ],
    ),
    (
        # A leaf named like a spine one level up (a-b) and the built-in switch names.
        "tree-values-that-clash-with-other-levels-and-built-ins",
        {"plugin": "tree", "labelKeys": ["spine", "leaf"]},
        nodes(
            ("n1", {"spine": "a", "leaf": "b"}),
            ("n2", {"spine": "a-b", "leaf": "x"}),
            ("n3", {"spine": "root", "leaf": "unlabeled"}),
            ("n4", {}),
        ),
        [
            "SwitchName=a-b-3554d2b8 Nodes=n1",
            "SwitchName=a-b-x Nodes=n2",
            "SwitchName=root-unlabeled Nodes=n3",
            "SwitchName=unlabeled Nodes=n4",
            "SwitchName=a Switches=a-b-3554d2b8",
            "SwitchName=a-b-ff096ad9 Switches=a-b-x",
            "SwitchName=root-e1eeb775 Switches=root-unlabeled",
            "SwitchName=root Switches=a,a-b-ff096ad9,root-e1eeb775,unlabeled",
        ],
    ),
    ("tree-no-nodes-yet", {"plugin": "tree", "labelKeys": ["leaf"]}, [], ["SwitchName=root"]),  # 26.05: see below
    (
        "block-with-sizes",
        {"plugin": "block", "labelKeys": [CLIQUE], "blockSizes": [2, 4]},
        nodes(
            ("gb-001", {CLIQUE: "c1"}),
            ("gb-002", {CLIQUE: "c1"}),
            ("gb-003", {CLIQUE: "c2"}),
            ("gb-004", {}),
            ("cpu-0", {}),
        ),
        [
            "BlockName=c1 Nodes=gb-[001-002]",
            # Slurm 24.11 exits on a block smaller than the base block size (2 here).
            "# BlockName=c2 Nodes=gb-003 (fewer nodes than the base block size 2)",
            # Nodes without the label are in no block (no NVLink domain): not a block of their own.
            f"# In no block (no {CLIQUE} label): cpu-0,gb-004",
            "BlockSizes=2,4",
        ],
    ),
    (
        "block-unlabeled-nodes-never-form-a-block",
        {"plugin": "block", "labelKeys": ["clique"]},
        nodes(("n1", {"clique": "a"}), ("n2", {"clique": "a"}), ("c1", {}), ("c2", {}), ("c3", {"clique": ""})),
        ["BlockName=a Nodes=n[1-2]", "# In no block (no clique label): c[1-3]"],
    ),
    (
        "block-without-sizes-smallest-first",
        {"plugin": "block", "labelKeys": ["clique"]},
        nodes(("n1", {"clique": "a"}), ("n2", {"clique": "a"}), ("n3", {"clique": "b"})),
        # Without BlockSizes the first block sets the base size; a smaller one later is fatal.
        ["BlockName=b Nodes=n3", "BlockName=a Nodes=n[1-2]"],
    ),
    (
        "block-without-sizes",
        {"plugin": "block", "labelKeys": ["clique"]},
        nodes(("n1", {"clique": "x"})),
        ["BlockName=x Nodes=n1"],
    ),
    (
        "block-values-that-read-alike",
        {"plugin": "block", "labelKeys": ["clique"], "blockSizes": [1]},
        nodes(("n1", {"clique": "nvl a"}), ("n2", {"clique": "nvl_a"})),
        ["BlockName=nvl_a-be44f8ef Nodes=n1", "BlockName=nvl_a-fbca16ea Nodes=n2", "BlockSizes=1"],
    ),
]


@pytest.mark.parametrize(
    ("id", "topology", "node_list", "expected"), TOPOLOGY_CASES, ids=[c[0] for c in TOPOLOGY_CASES]
)
def test_topology_conf(
    make_spec: MakeSpec, id: str, topology: dict[str, Any], node_list: list[TopologyNode], expected: list[str]
) -> None:
    assert body(render_topology_conf(make_spec(topology=topology), node_list)) == expected


@pytest.mark.parametrize("id", [c[0] for c in TOPOLOGY_CASES if c[2]])
def test_every_switch_and_block_is_defined_once(make_spec: MakeSpec, id: str) -> None:
    _, topology, node_list, _ = next(c for c in TOPOLOGY_CASES if c[0] == id)
    text = render_topology_conf(make_spec(topology=topology), node_list)
    defined = re.findall(r"^(?:SwitchName|BlockName)=(\S+)", text, re.M)
    assert len(defined) == len(set(defined)), defined  # slurmctld exits on a name defined twice
    assert all(len(name) <= MAX_NAME for name in defined)


def test_topology_ignores_node_order_and_duplicates(make_spec: MakeSpec) -> None:
    spec = make_spec(topology={"plugin": "tree", "labelKeys": ["fabric", "spine", "leaf"]})
    assert render_topology_conf(spec, FABRIC) == render_topology_conf(spec, list(reversed(FABRIC)))
    assert render_topology_conf(spec, FABRIC) == render_topology_conf(spec, [*FABRIC, FABRIC[0]])


def test_topology_extra_lines_follow(make_spec: MakeSpec) -> None:
    spec = make_spec(
        topology={"plugin": "block", "labelKeys": ["c"]},
        extraConfig={"topologyConf": ["# keep", "BlockName=spare Nodes=x"]},
    )
    assert body(render_topology_conf(spec, nodes(("n1", {"c": "a"})))) == [
        "BlockName=a Nodes=n1",
        "# keep",
        "BlockName=spare Nodes=x",
    ]


def test_names_defined_by_extra_lines_are_not_reused(make_spec: MakeSpec) -> None:
    spec = make_spec(
        topology={"plugin": "block", "labelKeys": ["c"]}, extraConfig={"topologyConf": ["BlockName=a Nodes=x"]}
    )
    text = body(render_topology_conf(spec, nodes(("n1", {"c": "a"}))))
    assert text[0].startswith("BlockName=a-") and text[1] == "BlockName=a Nodes=x", text
    tree = make_spec(
        topology={"plugin": "tree", "labelKeys": ["leaf"]}, extraConfig={"topologyConf": ["switchname=l1 Nodes=x"]}
    )
    assert body(render_topology_conf(tree, nodes(("n1", {"leaf": "l1"}))))[0].startswith("SwitchName=l1-")


def test_topology_file_only_with_a_plugin(make_spec: MakeSpec) -> None:
    assert "topology.conf" not in render_slurm_files(make_spec())
    spec = make_spec(topology={"plugin": "tree", "labelKeys": ["leaf"]})
    files = render_slurm_files(spec, nodes(("cpu-0", {"leaf": "l1"})))
    assert body(files["topology.conf"]) == ["SwitchName=l1 Nodes=cpu-0"]


# ----- unique_names
def test_names_read_as_the_label_values_when_unambiguous() -> None:
    assert unique_names([("f1", "s1", "l1"), ("f1", "s1"), ("f1",), ("rack.7_b",)]) == {
        ("f1", "s1", "l1"): "f1-s1-l1",
        ("f1", "s1"): "f1-s1",
        ("f1",): "f1",
        ("rack.7_b",): "rack.7_b",
    }


def test_paths_that_read_alike_all_get_distinct_hashed_names() -> None:
    names = unique_names([("a-b", "c"), ("a", "b-c"), ("a-b-c",)])
    assert len(set(names.values())) == 3
    assert all(re.fullmatch(r"a-b-c-[0-9a-f]{8}", n) for n in names.values()), names


def test_reserved_names_are_never_given_out() -> None:
    names = unique_names([("root",), ("unlabeled",), ("s1",)], {"root", "unlabeled"})
    assert names[("s1",)] == "s1"
    assert {names[("root",)][:5], names[("unlabeled",)][:10]} == {"root-", "unlabeled-"}


def test_a_value_spelling_another_paths_hashed_name_pushes_both_to_longer_hashes() -> None:
    first = unique_names([("x", "y"), ("x-y",)])
    taken = first[("x", "y")]  # x-y-<8 hex>
    names = unique_names([("x", "y"), ("x-y",), (taken,)])
    assert len(set(names.values())) == 3
    assert names[("x", "y")] != taken and len(names[("x", "y")]) == len("x-y-") + 16


def test_long_paths_are_cut_to_slurms_limit_with_a_hash() -> None:
    path = ("a" * 63, "b" * 63, "c" * 63)  # label values are at most 63 characters each
    other = ("a" * 63, "b" * 63, "c" * 62 + "d")
    names = unique_names([path, other])
    assert names[path] != names[other]
    assert all(len(n) == MAX_NAME for n in names.values())
    assert names[path].startswith("a" * 54 + "-")


def test_names_do_not_depend_on_order() -> None:
    paths = [("a-b", "c"), ("a", "b-c"), ("root",), ("z",), ("rack 1",), ("rack_1",)]
    shuffled = paths[:]
    random.Random(7).shuffle(shuffled)
    assert unique_names(paths, {"root"}) == unique_names(shuffled, {"root"})


# ----- registered nodes: slurmctld counts only the nodes it knows in a block
def test_a_block_counts_only_registered_nodes_when_told_which(make_spec: MakeSpec) -> None:
    spec = make_spec(topology={"plugin": "block", "labelKeys": ["c"], "blockSizes": [2]})
    rack = nodes(("n1", {"c": "a"}), ("n2", {"c": "a"}))
    assert body(render_topology_conf(spec, rack, registered={"n1"})) == [
        "# BlockName=a Nodes=n[1-2] (fewer registered nodes than the base block size 2)",
        "BlockSizes=2",
    ]
    assert body(render_topology_conf(spec, rack, registered={"n1", "n2", "other"}))[0] == "BlockName=a Nodes=n[1-2]"
    assert render_topology_conf(spec, rack) == render_topology_conf(spec, rack, registered={"n1", "n2"})


def test_without_sizes_registered_nodes_order_the_blocks_and_empty_ones_are_left_out(make_spec: MakeSpec) -> None:
    spec = make_spec(topology={"plugin": "block", "labelKeys": ["c"]})
    listed = nodes(("n1", {"c": "a"}), ("n2", {"c": "a"}), ("n3", {"c": "b"}), ("n4", {"c": "c"}))
    assert body(render_topology_conf(spec, listed, registered={"n1", "n2", "n3"})) == [
        "# BlockName=c Nodes=n4 (none registered)",
        "BlockName=b Nodes=n3",
        "BlockName=a Nodes=n[1-2]",
    ]


def test_a_tree_lists_unregistered_nodes(make_spec: MakeSpec) -> None:
    # topology/tree only logs a lookup failure for a node it does not know yet (measured).
    spec = make_spec(topology={"plugin": "tree", "labelKeys": ["leaf"]})
    listed = nodes(("n1", {"leaf": "l1"}), ("n2", {"leaf": "l1"}))
    assert render_topology_conf(spec, listed, registered=set()) == render_topology_conf(spec, listed)


@pytest.mark.parametrize(
    ("release", "lines"),
    [
        # 26.05 exits on a tree without a switch, 24.11 on a switch with neither nodes nor
        # switches (both measured, and booted by tests/slurm on each release).
        ("26.05", ["SwitchName=root"]),
        ("24.11", []),
    ],
)
def test_a_tree_without_nodes_is_what_each_release_starts_with(
    make_spec: MakeSpec, release: str, lines: list[str]
) -> None:
    spec = make_spec(topology={"plugin": "tree", "labelKeys": ["leaf"]}, slurm={"version": release})
    assert body(render_topology_conf(spec, [])) == lines
    assert body(render_topology_conf(spec.topology, [], release=release)) == lines
    assert body(render_topology_conf(spec, nodes(("n-0", {"leaf": "a"})))) == ["SwitchName=a Nodes=n-0"]


def test_named_topologies_render_one_yaml_with_the_default_marked() -> None:
    named = [
        NamedTopologySpec(name="nvl", plugin="block", label_keys=["clique"], block_sizes=[2]),
        NamedTopologySpec(name="fabric", plugin="tree", label_keys=["leaf"], default=True),
        NamedTopologySpec(name="true", plugin="flat"),
    ]
    rows = nodes(("cpu-0", {"leaf": "l0", "clique": "c0"}), ("cpu-1", {"leaf": "l0", "clique": "c0"}), ("cpu-2", {}))
    text = render_topology_yaml(named, rows)
    assert (
        text
        == HEADER
        + "\n".join(
            [
                "---",
                '- topology: "nvl"',
                "  cluster_default: false",
                "  block:",
                "    block_sizes: [2]",
                "    blocks:",
                '      - block: "c0"',
                '        nodes: "cpu-[0-1]"',
                "  # In no block (no clique label): cpu-2",
                '- topology: "fabric"',
                "  cluster_default: true",
                "  tree:",
                "    switches:",
                '      - switch: "l0"',
                '        nodes: "cpu-[0-1]"',
                '      - switch: "unlabeled"',
                '        nodes: "cpu-2"',
                '      - switch: "root"',
                '        children: "l0,unlabeled"',
                '- topology: "true"',
                "  cluster_default: false",
                "  flat: true",
            ]
        )
        + "\n"
    )
    doc = yaml.safe_load(text)
    assert [t["topology"] for t in doc] == [
        "nvl",
        "fabric",
        "true",
    ]  # a name YAML would read as a boolean stays a string
    assert render_topology_yaml(named, list(reversed(rows))) == text


def test_a_sole_named_topology_is_the_default_and_a_block_without_blocks_is_flat() -> None:
    named = [NamedTopologySpec(name="nvl", plugin="block", label_keys=["clique"])]
    doc = yaml.safe_load(render_topology_yaml(named, []))
    assert doc == [{"topology": "nvl", "cluster_default": True, "flat": True}]
