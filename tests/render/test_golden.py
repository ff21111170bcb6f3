"""Every rendered Slurm file of every stack, byte for byte against tests/golden/slurm/<stack>/.

Regenerate with `pytest tests/render --update-golden` and review the diff."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping
from typing import Any

import pytest
import yaml

from sunk.render import TopologyNode, render_slurm_files
from sunk.spec import ClusterSpec, load_spec
from sunk.stackfile import CLUSTER_KEY, list_stacks, load_stack, stack_path
from tests.support.stacks import FIXTURE_STACKS

STACKS = list_stacks(FIXTURE_STACKS)
GoldenCheck = Callable[[str, Mapping[str, str]], None]  # the golden fixture of tests/conftest.py


def golden_nodes(spec: ClusterSpec) -> list[TopologyNode]:
    """Nodes labelled so topology.conf is non-trivial.

    Tree: four nodes per NodeSet; nodes 0-1 share the lowest switch, node 2 hangs off a sibling
    leaf under the same upper levels, node 3 has no labels. Each NodeSet gets its own upper
    levels, so several NodeSets also get a root switch.
    Block: a GPU NodeSet fills one base block (nodes 0..base-1), starts a second clique with one
    node, and has one node without the label; NodeSets without GPUs get four unlabelled nodes
    (no NVLink domain)."""
    keys = spec.topology.label_keys
    out = []
    for j, ns in enumerate(spec.nodesets):
        if spec.topology.plugin == "block":
            base = spec.topology.base_block_size or 2
            count = base + 2 if ns.gpus else 4
            short = keys[0].rsplit("/", 1)[-1].replace(".", "-")
            for i in range(count):
                labelled = ns.gpus is not None and i <= base
                labels: dict[str, str] = {keys[0]: f"{short}{j}{i // base}"} if labelled else {}
                out.append(TopologyNode(f"{ns.name}-{i}", labels))
            continue
        for i in range(4):
            labels = {}
            if i < 3:
                for depth, key in enumerate(keys):
                    short = key.rsplit("/", 1)[-1].replace(".", "-")
                    labels[key] = f"{short}{j}" if depth < len(keys) - 1 else f"{short}{j}{i // 2}"
            out.append(TopologyNode(f"{ns.name}-{i}", labels))
    return out


def stack_files(stack: str) -> dict[str, str]:
    spec = load_stack(stack, FIXTURE_STACKS).spec
    return render_slurm_files(spec, golden_nodes(spec))


def test_there_are_four_stacks() -> None:
    assert STACKS == ["acme-dev", "acme-prod", "globex-dev", "globex-prod"]


@pytest.mark.parametrize("stack", STACKS)
def test_golden(stack: str, golden: GoldenCheck) -> None:
    golden(f"slurm/{stack}", stack_files(stack))


def test_golden_topology_is_non_trivial() -> None:
    tree = stack_files("acme-prod")["topology.conf"]
    assert "SwitchName=root Switches=" in tree and "SwitchName=unlabeled Nodes=cpu-3,h100-3" in tree
    assert re.search(r"^SwitchName=\S+ Nodes=h100-\[0-1\]$", tree, re.M)
    block = stack_files("globex-prod")["topology.conf"].splitlines()
    assert block[1:] == [
        "BlockName=gpu-clique00 Nodes=gb200-[0-17]",
        "# BlockName=gpu-clique01 Nodes=gb200-18 (fewer nodes than the base block size 18)",
        "# In no block (no nvidia.com/gpu.clique label): cpu-[0-3],gb200-19",
        "BlockSizes=18,36,72",
    ]


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: _shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@pytest.mark.parametrize("stack", STACKS)
def test_rendering_is_deterministic(stack: str) -> None:
    raw = yaml.safe_load(stack_path(stack, FIXTURE_STACKS).read_text())["config"][CLUSTER_KEY]
    first = stack_files(stack)
    assert stack_files(stack) == first
    reordered = 0
    for seed in range(3):
        rng = random.Random(seed)
        data = _shuffled(raw, rng)
        reordered += json.dumps(data) != json.dumps(raw)
        spec = load_spec(data)
        nodes = golden_nodes(spec)
        rng.shuffle(nodes)
        again = render_slurm_files(spec, nodes)
        assert list(again) == list(first)
        assert again == first
    assert reordered, "the shuffles never changed the key order"


# A value that looks like a credential: a password-ish setting, a private key, or a long base64 run.
SECRETISH = re.compile(
    r"(?i)^\s*\S*(pass(word)?|secret|token|credential)\S*\s*=|PRIVATE KEY|[A-Za-z0-9+/]{40,}={0,2}", re.M
)


def test_secret_detector_catches_what_it_should() -> None:
    for leak in (
        "StoragePass=x",
        "ldap_default_authtok_password = x",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
        "k=" + "A1b2" * 12,
    ):
        assert SECRETISH.search(leak), leak
    assert not SECRETISH.search("AuthAltParameters=jwt_key=/etc/slurm/jwt/jwt_hs256.key")


@pytest.mark.parametrize("stack", STACKS)
def test_no_rendered_file_holds_a_secret(stack: str) -> None:
    spec = load_stack(stack, FIXTURE_STACKS).spec
    refs = [
        ref.name
        for ref in (
            spec.accounting.external.password_secret if spec.accounting.external else None,
            spec.auth.ldap.bind_password_secret if spec.auth.ldap else None,
            spec.auth.key.existing_secret,
            spec.auth.jwt.existing_secret,
        )
        if ref is not None
    ]
    for rel, text in stack_files(stack).items():
        assert not SECRETISH.search(text), f"{stack}/{rel}: {SECRETISH.search(text)}"
        for name in refs:  # the Secret's name is not a secret, but nothing rendered needs it either
            assert name not in text, f"{stack}/{rel} names Secret {name}"
