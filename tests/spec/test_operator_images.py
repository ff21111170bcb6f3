"""The operator's image policy and the stack's registry agree: a stack that sets images.registry
and leaves the policy's imagePrefixes alone gets an operator that admits that registry (before:
its default, sunk's own registry, refused every slurmd pod while `sunk validate` said ✓); a policy
that names prefixes refusing the stack's slurmd images is an error naming both fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sunk.policy import pod_problems
from sunk.spec.errors import SpecError
from sunk.stackfile import parse_config, read_stack_file
from tests.support.stacks import FIXTURE_STACKS

ROOT = Path(__file__).resolve().parents[2]


def _config(**operator: Any) -> dict[str, Any]:
    config = dict(read_stack_file(FIXTURE_STACKS / "Pulumi.acme-prod.yaml")["config"])
    config["sunk:operator"] = {"policy": operator} if operator else True
    return config


def test_without_prefixes_the_policy_admits_the_stacks_registry() -> None:
    spec, operator = parse_config(_config(hostPaths=["/mnt/local-nvme"]), "test")
    assert operator is not None and spec.images.registry == "registry.acme.example/hpc"
    assert operator.policy.image_prefixes == ["registry.acme.example/hpc/"]
    slurmd = {"spec": {"containers": [{"name": "slurmd", "image": spec.slurmd_image(spec.nodesets[0]).ref}]}}
    assert pod_problems(operator.policy, slurmd) == []


def test_prefixes_that_refuse_the_stacks_images_name_both_fields() -> None:
    with pytest.raises(SpecError) as info:
        parse_config(_config(imagePrefixes=["ghcr.io/sunk-dev/"]), "test")
    text = str(info.value)
    assert "sunk:operator.policy.imagePrefixes" in text and "sunk:cluster.images (registry or slurmd)" in text
    assert "refuse registry.acme.example/hpc/slurmd:" in text


def test_the_default_registry_keeps_the_default_policy() -> None:
    config = dict(read_stack_file(FIXTURE_STACKS / "Pulumi.acme-dev.yaml")["config"])
    _, operator = parse_config(config, "test")
    assert operator is not None and operator.policy.image_prefixes == ["ghcr.io/sunk-dev/"]
