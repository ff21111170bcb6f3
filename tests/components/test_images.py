"""Every image a rendered manifest names is one sunk builds (sunk.images.ROLES): no stack pulls
an image from elsewhere unless it says so (a NodeSet sidecar, an explicit images.<role>)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from sunk.components.render import Rendered

from sunk.images import ARCHES, DEFAULT_REGISTRY, DEFAULT_SLURM, PYXIS_VARIANT, ROLES, SUPPORTED_SLURM, reference
from sunk.nodeset_resource import API_VERSION as NODESET_API
from sunk.spec.cluster import ClusterSpec

from .conftest import LIBRARY, STACKS

VARIANT_ROLES = ("slurmd", "login")
"""The roles with a pyxis variant (`sunk images build slurmd login --with pyxis`)."""


def ours(registries: set[str]) -> set[str]:
    """Every reference of our images under `registries`: each Slurm release, each architecture,
    and the pyxis variant of the roles that have one."""
    return {
        reference(role, registry, arch, variant, release)
        for role in ROLES
        for registry in registries
        for arch in ARCHES
        for variant in (None, PYXIS_VARIANT)
        for release in SUPPORTED_SLURM
        if variant is None or role in VARIANT_ROLES
    }


def named_images(node: Any) -> Iterator[str]:
    """Container images (`image: <ref>`) anywhere in an object, and a NodeSet's slurmdImage (the
    operator's slurmd and munge containers). Sidecar images in a NodeSet's spec are the stack's
    own ({repository, tag}, not a reference) and are left out."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("image", "slurmdImage") and isinstance(value, str):
                yield value
            else:
                yield from named_images(value)
    elif isinstance(node, list):
        for item in node:
            yield from named_images(item)


def images_of(rendered: Rendered) -> dict[str, str]:
    """Image reference -> the first file that names it."""
    found: dict[str, str] = {}
    for name, text in rendered.files.items():
        for image in named_images(yaml.safe_load(text)):
            found.setdefault(image, name)
    return found


LIBRARY_REGISTRY = "registry.initech.internal/hpc"
"""The registry the library program computes (an Output handed to the spec through `late`)."""


@pytest.mark.parametrize("name", [*STACKS, LIBRARY])
def test_every_image_a_manifest_names_is_one_we_build(
    rendered: dict[str, Rendered], specs: dict[str, ClusterSpec], name: str
) -> None:
    spec = specs.get(name)  # the library program builds its spec in code, on a registry it computes
    registry = (spec.images.registry if spec else LIBRARY_REGISTRY) or DEFAULT_REGISTRY
    found = images_of(rendered[name])
    release = spec.slurm.version if spec else DEFAULT_SLURM
    assert reference("slurmctld", registry, release=release) in found  # the walk reaches the containers
    # The operator (OperatorSpec's own image) stays on the default registry.
    foreign = {image: file for image, file in found.items() if image not in ours({registry, DEFAULT_REGISTRY})}
    assert not foreign, f"{name}: images sunk does not build: {foreign}"


def test_the_stacks_name_the_images_of_every_role_architecture_and_variant(rendered: dict[str, Rendered]) -> None:
    found = set().union(*(images_of(rendered[s]) for s in STACKS))
    assert reference("mariadb") in found  # ours, not docker.io/library/mariadb
    # globex-prod's GB200, on 24.11 (block topology)
    assert reference("slurmd", arch="arm64", variant=PYXIS_VARIANT, release="24.11") in found
    assert reference("login", variant=PYXIS_VARIANT, release="24.11") in found
    assert reference("slurmctld") in found and reference("runtime") in found


def test_the_check_catches_a_foreign_image() -> None:
    official = {"spec": {"containers": [{"name": "mariadb", "image": "docker.io/library/mariadb:11.8"}]}}
    assert list(named_images(official)) == ["docker.io/library/mariadb:11.8"]
    assert "docker.io/library/mariadb:11.8" not in ours({DEFAULT_REGISTRY})
    assert reference("slurmd", "registry.example.com:5000/hpc", "arm64") in ours({"registry.example.com:5000/hpc"})
    assert reference("mariadb", variant=PYXIS_VARIANT) not in ours({DEFAULT_REGISTRY})  # no such image
    nodeset = {"apiVersion": NODESET_API, "spec": {"slurmdImage": "x/slurmd:1", "sidecars": [{"image": {}}]}}
    assert list(named_images(nodeset)) == ["x/slurmd:1"]
