"""Which image each role runs: ours by default (sunk.images), moved by `images.registry`, and an
image the stack sets stays as given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sunk import images
from sunk.render.files import PYXIS_SO
from sunk.spec import ClusterSpec, load_spec
from sunk.spec.scheduling import PyxisSpec
from sunk.spec.services import ROLE_OF, Images
from tests.support.specs import MINIMAL, build_spec

MIRROR = "registry.example.com:5000/hpc"


def spec(**changes: Any) -> ClusterSpec:
    return build_spec(**changes)


def test_images_has_one_field_per_role_we_build() -> None:
    assert set(ROLE_OF) == set(Images.model_fields) - {"registry", "pull_secrets"}
    assert sorted(ROLE_OF.values()) == sorted(images.ROLES)


def test_every_default_is_the_image_we_build() -> None:
    s = spec()
    assert s.images.mariadb.ref == images.reference("mariadb") == "ghcr.io/sunk-dev/mariadb:11.8"
    assert s.images.controller.ref == images.reference("slurmctld") == "ghcr.io/sunk-dev/slurmctld:26.05.5"
    assert s.images.runtime.ref == images.reference("runtime") == "ghcr.io/sunk-dev/sunk-runtime:0.1.0-slurm26.05"
    assert s.slurmd_image(s.nodesets[0]).ref == images.reference("slurmd")
    assert s.login_image.ref == images.reference("login")


def test_registry_moves_every_image_the_stack_did_not_set() -> None:
    own = {"repository": "ghcr.io/acme/slurmctld", "tag": "custom"}
    s = spec(images={"registry": MIRROR, "controller": own})
    assert s.images.controller.ref == "ghcr.io/acme/slurmctld:custom"
    assert s.images.accounting.ref == f"{MIRROR}/slurmdbd:26.05.5"
    assert s.images.mariadb.ref == f"{MIRROR}/mariadb:11.8"
    assert s.images.runtime.ref == f"{MIRROR}/sunk-runtime:0.1.0-slurm26.05"
    assert s.login_image.ref == f"{MIRROR}/login:26.05.5"
    assert s.slurmd_image(s.nodesets[0]).ref == f"{MIRROR}/slurmd:26.05.5"
    # What the registry filled in stays a default: a dump and reload gives the same spec.
    assert s.images.model_fields_set == {"registry", "controller"}
    assert load_spec(s.model_dump(mode="json", by_alias=True, exclude_unset=True)) == s


def test_each_slurm_release_has_its_own_image_family_and_the_stacks_images_stay() -> None:
    old = spec(slurm={"version": "24.11"})
    assert old.images.controller.ref == "ghcr.io/sunk-dev/slurmctld:24.11.5"
    assert old.images.runtime.ref == "ghcr.io/sunk-dev/sunk-runtime:0.1.0-slurm24.11"
    assert old.slurmd_image(old.nodesets[0]).ref == "ghcr.io/sunk-dev/slurmd:24.11.5"
    assert old.images.mariadb.ref == "ghcr.io/sunk-dev/mariadb:11.8"  # one MariaDB for every release
    own = {"repository": "ghcr.io/acme/slurmctld", "tag": "custom"}
    mirrored = spec(slurm={"version": "24.11"}, images={"registry": MIRROR, "controller": own})
    assert mirrored.images.controller.ref == "ghcr.io/acme/slurmctld:custom"
    assert mirrored.images.accounting.ref == f"{MIRROR}/slurmdbd:24.11.5"
    assert mirrored.login_image.ref == f"{MIRROR}/login:24.11.5"
    assert mirrored.images.model_fields_set == {"registry", "controller"}
    assert load_spec(mirrored.model_dump(mode="json", by_alias=True, exclude_unset=True)) == mirrored


def test_a_nodeset_image_wins_over_images_slurmd() -> None:
    own = {"repository": "ghcr.io/acme/slurmd", "tag": "cuda"}
    s = spec(images={"registry": MIRROR}, nodesets=[{**MINIMAL["nodesets"][0], "image": own}])
    assert s.slurmd_image(s.nodesets[0]).ref == "ghcr.io/acme/slurmd:cuda"


def test_a_nodeset_gets_the_slurmd_image_of_its_architecture() -> None:
    arm = {"name": "gb200", "cpus": 144, "memoryMib": 880_000, "architecture": "arm64"}
    nodesets = [MINIMAL["nodesets"][0], arm]
    partitions = [{"name": "batch", "nodesets": ["cpu", "gb200"]}]
    s = spec(nodesets=nodesets, partitions=partitions)
    assert s.slurmd_image(s.nodesets[0]).ref == "ghcr.io/sunk-dev/slurmd:26.05.5"
    assert s.slurmd_image(s.nodesets[1]).ref == "ghcr.io/sunk-dev/slurmd:26.05.5-arm64"
    assert s.nodesets[1].pod_node_selector == {"kubernetes.io/arch": "arm64"}
    mirrored = spec(nodesets=nodesets, partitions=partitions, images={"registry": MIRROR})
    assert mirrored.slurmd_image(mirrored.nodesets[1]).ref == f"{MIRROR}/slurmd:26.05.5-arm64"
    # A slurmd image the stack sets is used as given on every architecture (a multi-arch image).
    multi = {"repository": "ghcr.io/acme/slurmd", "tag": "multi"}
    own = spec(nodesets=nodesets, partitions=partitions, images={"slurmd": multi})
    assert {own.slurmd_image(n).ref for n in own.nodesets} == {"ghcr.io/acme/slurmd:multi"}


def test_the_architecture_selector_joins_the_stacks_own() -> None:
    selector = {"node.kubernetes.io/instance-type": "GB200x4", "kubernetes.io/arch": "arm64"}
    ns = spec(nodesets=[{**MINIMAL["nodesets"][0], "architecture": "arm64", "nodeSelector": selector}]).nodesets[0]
    assert ns.pod_node_selector == {"kubernetes.io/arch": "arm64", "node.kubernetes.io/instance-type": "GB200x4"}


def test_pyxis_picks_the_pyxis_variant_of_every_default_slurmd_and_login_image() -> None:
    arm = {"name": "gb200", "cpus": 144, "memoryMib": 880_000, "architecture": "arm64"}
    own = {"name": "own", "cpus": 4, "memoryMib": 4096, "image": {"repository": "ghcr.io/acme/slurmd", "tag": "p"}}
    nodesets = [MINIMAL["nodesets"][0], arm, own]
    partitions = [{"name": "batch", "nodesets": ["cpu", "gb200", "own"]}]
    s = spec(nodesets=nodesets, partitions=partitions, pyxis={"enabled": True})
    assert [s.slurmd_image(n).ref for n in s.nodesets] == [
        "ghcr.io/sunk-dev/slurmd:26.05.5-pyxis",
        "ghcr.io/sunk-dev/slurmd:26.05.5-pyxis-arm64",
        "ghcr.io/acme/slurmd:p",  # set by the stack: used as given
    ]
    assert s.login_image.ref == "ghcr.io/sunk-dev/login:26.05.5-pyxis"
    assert s.images.controller.ref == "ghcr.io/sunk-dev/slurmctld:26.05.5"  # loads no SPANK plugin
    login = {"repository": "ghcr.io/acme/login", "tag": "p"}
    given = spec(pyxis={"enabled": True}, images={"registry": MIRROR, "login": login})
    assert given.login_image.ref == "ghcr.io/acme/login:p"
    assert given.slurmd_image(given.nodesets[0]).ref == f"{MIRROR}/slurmd:26.05.5-pyxis"


def test_plugstack_conf_names_the_plugin_where_the_pyxis_stage_links_it_and_the_docs_say() -> None:
    stage = (Path(__file__).parents[2] / "runtime/images/pyxis/post-install.sh").read_text()
    assert PYXIS_SO.startswith(images.SPANK_DIR + "/") and PYXIS_SO in stage
    assert PYXIS_SO in (PyxisSpec.model_fields["enabled"].description or "")
