"""A Slurm release is one row (sunk.images.RELEASES): no production code compares release strings,
and a release added to the table is followed by every consumer (validation and its messages, the
rendered files, the images' tags, suite and pins, the REST version, the state files' protocol)."""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from pathlib import Path

import pytest
from sunk.runtime.images import recipe
from sunk.runtime.images.build import Builder
from sunk.runtime.slurmrest import versions

from sunk import images
from sunk.images import RELEASES, Release
from sunk.manifests.upgrade import state_guard
from sunk.render import TopologyNode, render_slurm_files, render_topology_conf
from sunk.render.slurm_conf import HEADER
from sunk.spec.errors import SpecError
from sunk.spec.scheduling import TopologySpec
from sunk.spec.upgrade import upgrade_problems
from tests.support.specs import build_spec

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = ("sunk", "components", "runtime", "bench")
TABLE = ROOT / "sunk" / "images.py"
RELEASE_SHAPED = re.compile(r"\d\d\.(0[1-9]|1[0-2])")
"""Slurm's major releases are YY.MM ("24.11", "26.05")."""


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are statements of their own (docstrings and attribute docs)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }


def release_literals(source: str) -> list[tuple[int, str]]:
    """(line, literal) of every string in code (not in a docstring) that is a Slurm release."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and RELEASE_SHAPED.fullmatch(node.value)
    ]


def test_no_production_code_but_the_table_names_a_release() -> None:
    """Code asks the row (release_of(v).named_topologies); a string such as "24.11" in a comparison,
    a default or a branch elsewhere is a release spread over the code again."""
    found = []
    files = [p for top in PRODUCTION for p in sorted((ROOT / top).rglob("*.py"))] + [ROOT / "__main__.py"]
    for path in files:
        if path == TABLE:
            continue
        found += [f"{path.relative_to(ROOT)}:{line}: {text!r}" for line, text in release_literals(path.read_text())]
    assert found == [], "release strings outside sunk/images.py (ask the release's row instead):\n" + "\n".join(found)


def test_the_release_grep_finds_a_planted_comparison() -> None:
    planted = 'def f(spec):\n    """Not on "24.11"."""\n    return spec.slurm.version != "24.11"\n'
    assert release_literals(planted) == [(3, "24.11")]
    assert release_literals('x = "1.2"\ny = f"slurm {v}"\n"""26.05 in a doc"""\n') == []


FAKE = Release(
    "99.01",
    "99.01.3",
    "fakesuite",
    "3.99",
    77,
    rest_api=("v0.0.46", "v0.0.45"),
    metrics=False,
    named_topologies=True,
    block_plugin_at_start=True,
    node_less_tree_root=False,
    probes_gpus=False,
)
"""A release unlike both real ones: 26.05's named topologies and REST versions, 24.11's block
plugin and node-less tree, no metrics endpoints, a slurmd that probes no GPU unasked."""


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Release:
    monkeypatch.setitem(RELEASES, FAKE.version, FAKE)
    return FAKE


def test_validation_asks_the_row_and_its_messages_name_the_releases_that_have_it(fake: Release) -> None:
    tree = {"name": "fabric", "plugin": "tree", "labelKeys": ["example.com/leaf"], "default": True}
    flat = {"name": "plain", "plugin": "flat"}
    spec = build_spec(**{"slurm.version": "99.01", "topologies": [tree, flat]})  # named topologies: yes
    assert spec.release is fake
    build_spec(**{"slurm.version": "99.01", "topology": {"plugin": "block", "labelKeys": ["c"]}})  # block: yes
    with pytest.raises(SpecError) as caught:
        build_spec(**{"slurm.version": "99.01", "controller.metrics": True})
    (problem,) = caught.value.items
    assert problem.path == "controller.metrics"
    assert problem.message.endswith(
        """slurm.version '99.01' has none (slurmctld exits on the key): set it false, or slurm.version "26.05\""""
    )
    # 26.05 refuses the block plugin; the message now offers both releases that start with it.
    with pytest.raises(SpecError) as caught:
        build_spec(**{"topology": {"plugin": "block", "labelKeys": ["c"]}})
    assert 'use plugin tree, slurm.version "24.11", slurm.version "99.01", or a block' in caught.value.items[0].message
    with pytest.raises(SpecError) as caught:
        build_spec(**{"slurm.version": "24.11", "topologies": [tree, flat]})
    assert 'or set slurm.version "26.05" or "99.01" for several' in caught.value.items[0].message
    with pytest.raises(
        SpecError, match=re.escape("'98.11' is not a Slurm release sunk supports; supported: 26.05, 24.11, 99.01")
    ):
        build_spec(**{"slurm.version": "98.11"})
    assert upgrade_problems("26.05", "99.01")[0].message.startswith("'26.05' is 146 releases before '99.01'")


def test_rendered_files_follow_the_row(fake: Release) -> None:
    gpu = {
        "name": "gpu",
        "mode": "all-matching-nodes",
        "cpus": 4,
        "memoryMib": 4096,
        "gpus": {"type": "h100", "count": 8},
    }
    cpu = {"name": "cpu", "cpus": 4, "memoryMib": 4096}
    partitions = [{"name": "batch", "nodesets": ["cpu", "gpu"], "default": True}]
    for version, cpu_lines in (("26.05", ["AutoDetect=off"]), ("99.01", [])):
        spec = build_spec(**{"slurm.version": version, "nodesets": [cpu, gpu], "partitions": partitions})
        assert render_slurm_files(spec, [])["gres-cpu.conf"].removeprefix(HEADER).splitlines() == cpu_lines, version
    tree = TopologySpec(plugin="tree", label_keys=["leaf"])
    no_nodes: list[TopologyNode] = []
    assert render_topology_conf(tree, no_nodes, release="26.05").endswith("SwitchName=root\n")
    assert "SwitchName" not in render_topology_conf(tree, no_nodes, release="99.01")


def test_images_follow_the_row(fake: Release, tmp_path: Path) -> None:
    spec = build_spec(**{"slurm.version": "99.01"})
    assert spec.images.controller.ref == "ghcr.io/sunk-dev/slurmctld:99.01.3"
    assert spec.images.runtime.ref == "ghcr.io/sunk-dev/sunk-runtime:0.1.0-slurm99.01"
    (tmp_path / "pins").mkdir()
    (tmp_path / "pins" / "99.01.txt").write_text("slurmd 99.01.3-1\n")
    assert recipe.read_pins("99.01", tmp_path) == {"slurmd": "99.01.3-1"}
    builder = Builder(release="99.01", cache=tmp_path)
    assert (builder.release.suite, builder.site_packages) == ("fakesuite", "/usr/local/lib/python3.99/dist-packages")
    layer = recipe.load("slurmd", release="26.05")
    assert recipe.layer_hash(layer, "p", "amd64", release=fake) != recipe.layer_hash(
        layer, "p", "amd64", release=RELEASES["26.05"]
    )
    message = recipe.missing_pins_message([recipe.MissingPin("slurmd", "99.01.3-1", ())], fake, "http://m")
    assert message.startswith("Slurm 99.01 images: Debian fakesuite at http://m no longer has slurmd 99.01.3-1")
    assert fake.debs("arm64") == "99.01-arm64.Packages"


def test_the_rest_version_and_the_state_protocol_follow_the_row(fake: Release, monkeypatch: pytest.MonkeyPatch) -> None:
    assert versions.preferred("99.01") == "v0.0.45"  # v0.0.46 served, not spoken
    assert versions.preferred("24.11") == "v0.0.42"
    with pytest.raises(
        ValueError, match=re.escape("the Slurm releases 26.05, 24.11, 99.01 serve no data_parser version in common")
    ):
        versions.fallback()  # 24.11 serves up to v0.0.42, the fake from v0.0.45
    monkeypatch.setattr(images, "RELEASES", {"26.05": RELEASES["26.05"], "99.01": fake})
    assert versions.fallback() == "v0.0.45"  # 24.11 gone: the newest both rows serve
    monkeypatch.setattr(images, "RELEASES", {"99.01": replace(fake, rest_api=("v0.0.46",))})
    with pytest.raises(
        versions.NoCommonVersion, match=re.escape("serves data_parser v0.0.46; this sunk speaks v0.0.45, v0.0.42")
    ):
        versions.preferred("99.01")
    monkeypatch.undo()
    monkeypatch.setitem(RELEASES, FAKE.version, FAKE)
    assert "45=26.05 42=24.11 77=99.01" in state_guard(build_spec())


def test_the_nodeset_resource_defaults_to_the_default_release() -> None:
    from sunk.nodeset_resource import NodeSetResourceSpec

    assert NodeSetResourceSpec.model_fields["slurm_version"].default == images.DEFAULT_SLURM


@pytest.mark.parametrize("version", list(RELEASES))
def test_the_client_speaks_a_version_of_every_real_release(version: str) -> None:
    assert versions.preferred(version) in RELEASES[version].rest_api
    assert versions.fallback() in RELEASES[version].rest_api
