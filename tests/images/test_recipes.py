"""The image recipes and the manifests agree: one package list per layer, hashes that key the
cache, and every role's image made for the command and user its manifests run. No build here."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sunk.runtime.images import recipe

from sunk.images import DEFAULT_REGISTRY, RELEASES, ROLES, SLURM_UID, reference, repository, tag_for
from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.operator import operator_manifests
from sunk.spec.operator import OperatorSpec
from sunk.stackfile import list_stacks, load_stack
from tests.support.stacks import FIXTURE_STACKS


def test_every_layer_has_one_package_list_without_duplicates() -> None:
    for name in recipe.all_layers():
        layer = recipe.load(name)
        assert len(layer.packages) == len(set(layer.packages)), name
        assert all(" " not in p for p in layer.packages), name


def test_roles_install_what_they_run() -> None:
    packages = {name: set(recipe.load(name).packages) for name in recipe.all_layers()}
    assert {"slurm-client", "munge", "slurm-wlm-jwt-plugin"} <= packages["slurm"]
    assert "slurmctld" in packages["slurmctld"]
    assert {"slurmdbd", "slurm-wlm-mysql-plugin"} <= packages["slurmdbd"]
    assert "slurmrestd" in packages["slurmrestd"]
    assert {"slurmd", "s6", "crun"} <= packages["slurmd"]
    assert {"sackd", "openssh-server", "libpam-sss"} <= packages["login"]
    # Directory users resolve in every Slurm role (sssd sidecars), so SSSD is in the shared layer.
    assert {"sssd-ldap", "libnss-sss"} <= packages["slurm"]
    assert "mariadb-server" in packages["mariadb"]
    assert "python3" in packages["python"]
    # The runtime image has no Pulumi: its Python dependencies are listed apart from the project's.
    wanted = recipe.read_packages(recipe.HERE / "python" / "requirements.txt")
    assert not [w for w in wanted if "pulumi" in w]
    assert {"kubernetes", "httpx", "pydantic", "prometheus-client"} <= set(wanted)


def test_layers_chain_on_shared_bases() -> None:
    assert recipe.chain("slurmctld") == ["base", "slurm", "slurmctld"]
    assert recipe.chain("runtime") == ["base", "python", "runtime"]
    assert recipe.chain("mariadb") == ["base", "mariadb"]
    assert recipe.chain("slurmd+pyxis") == ["base", "slurm", "slurmd", "slurmd+pyxis"]
    assert recipe.load("login+pyxis").role == ROLES["login"]


def test_the_hash_keys_content_not_order() -> None:
    layer = recipe.load("slurmd")
    base = recipe.layer_hash(layer, "parent", "amd64")
    assert recipe.layer_hash(replace(layer, packages=layer.packages[::-1]), "parent", "amd64") == base
    changed = [
        recipe.layer_hash(replace(layer, packages=(*layer.packages, "lua5.1")), "parent", "amd64"),
        recipe.layer_hash(layer, "other-parent", "amd64"),
        recipe.layer_hash(layer, "parent", "arm64"),
        recipe.layer_hash(layer, "parent", "amd64", source="http://mirror.example/debian"),
        recipe.layer_hash(replace(layer, post_install=layer.post_install + "true\n"), "parent", "amd64"),
        recipe.layer_hash(replace(layer, files=((*layer.files, ("/x", 0o644, b"x")))), "parent", "amd64"),
        recipe.layer_hash(layer, "parent", "amd64", release=RELEASES["24.11"]),
        recipe.layer_hash(replace(layer, pins=(("slurmd", "26.05.5-2"),)), "parent", "amd64"),
    ]
    assert len({base, *changed}) == len(changed) + 1


def test_architecture_variant_and_release_tags() -> None:
    slurmd = ROLES["slurmd"]
    assert tag_for(slurmd) == "26.05.5"
    assert tag_for(slurmd, "arm64") == "26.05.5-arm64"
    assert tag_for(slurmd, "arm64", "pyxis") == "26.05.5-pyxis-arm64"
    assert tag_for(slurmd, release="24.11") == "24.11.5"
    assert tag_for(ROLES["mariadb"], release="24.11") == tag_for(ROLES["mariadb"]) == "11.8"
    assert (
        reference("runtime", "registry.example:5000/hpc") == "registry.example:5000/hpc/sunk-runtime:0.1.0-slurm26.05"
    )
    assert reference("runtime", release="24.11") == "ghcr.io/sunk-dev/sunk-runtime:0.1.0-slurm24.11"


def test_every_slurm_package_of_every_release_is_pinned_to_its_release() -> None:
    slurm_packages = {
        p
        for name in (*recipe.all_layers(), "pyxis")
        for p in recipe.read_packages(recipe.HERE / name.split("+")[-1] / "packages.txt")
        if p.startswith(("slurm", "libslurm", "sackd"))
    }
    for version, release in RELEASES.items():
        pins = recipe.read_pins(version)
        assert set(pins) == slurm_packages, version
        # Each pin is a Debian version of the release's own upstream version: no skew inside a family.
        assert all(v.startswith(release.slurm + "-") for v in pins.values()), (version, pins)
        slurmd = recipe.load("slurmd", release=version)
        assert f"slurmd={pins['slurmd']}" in slurmd.install
        assert "s6" in slurmd.install  # not a Slurm package: the suite's own version


def test_the_mariadb_image_is_one_for_every_release_and_slurm_images_are_per_release() -> None:
    assert {recipe.family("mariadb", v) for v in RELEASES} == {"24.11"}
    assert [recipe.family("slurmd+pyxis", v) for v in RELEASES] == list(RELEASES)


def test_a_pin_the_mirror_lost_is_named_with_what_it_has_instead() -> None:
    script = recipe.pin_check_script((("slurmd", "26.05.5-1"), ("slurm-wlm-nvml-plugin", "26.05.5-1")))
    assert "apt-cache madison slurmd" in script and "apt-cache madison slurm-wlm-nvml-plugin" in script
    output = f"noise\n{recipe.MISSING} slurmd 26.05.5-1 26.11.1-1 \n{recipe.MISSING} slurm-wlm-nvml-plugin 26.05.5-1 \n"
    missing = recipe.missing_pins(output)
    assert missing == [
        recipe.MissingPin("slurmd", "26.05.5-1", ("26.11.1-1",)),
        recipe.MissingPin("slurm-wlm-nvml-plugin", "26.05.5-1", ()),
    ]
    message = recipe.missing_pins_message(missing, RELEASES["26.05"], "http://deb.debian.org/debian")
    assert message.startswith("Slurm 26.05 images: Debian sid at http://deb.debian.org/debian no longer has ")
    assert "slurmd 26.05.5-1 (it has 26.11.1-1); slurm-wlm-nvml-plugin 26.05.5-1 (it has none)" in message
    assert "already built stay in the image cache" in message
    assert recipe.missing_pins("all there\n") == []


def _containers(manifests: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(kind/name, pod spec, container) of every container in `manifests`."""
    out = []
    for m in manifests:
        spec = m.get("spec") or {}
        template = spec.get("jobTemplate", {}).get("spec", spec).get("template") if "jobTemplate" in spec else None
        pod = (template or spec.get("template") or {}).get("spec")
        if pod is None:
            continue
        for c in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            out.append((f"{m['kind']}/{m['metadata']['name']}", pod, c))
    return out


MAIN = {"slurmctld": "slurmctld", "slurmrestd": "slurmrestd", "sshd": "login", "mariadb": "mariadb"}
"""Main containers whose command (or image entrypoint) the image's config must match."""


@pytest.mark.parametrize("stack", list_stacks(FIXTURE_STACKS))
def test_manifests_run_what_the_images_are_made_for(stack: str) -> None:
    spec = load_stack(stack, FIXTURE_STACKS).spec
    registry = getattr(spec.images, "registry", None) or DEFAULT_REGISTRY
    # The operator from the same registry (a stack with a private mirror runs it from there too).
    release = spec.slurm.version
    operator = OperatorSpec(image=spec.images.resolve("runtime", release=release))
    manifests = [*cluster_manifests(spec), *operator_manifests(operator)]
    tags = {  # the stack's own release: no image of another one
        role: {
            tag_for(ROLES[role], arch, variant, release) for arch in ("amd64", "arm64") for variant in (None, "pyxis")
        }
        for role in ROLES
    }
    seen = set()
    for where, pod, c in _containers(manifests):
        repo, _, tag = c["image"].rpartition(":")
        role = next((r for r in ROLES if repo.endswith("/" + ROLES[r].image)), None)
        if role is None:
            continue  # a user's own sidecar image
        assert repo == repository(role, registry), f"{where}: {c['image']} is not from {registry}"
        assert tag in tags[role], f"{where}: {c['image']} is not a tag sunk builds"
        seen.add(role)
        if c["name"] in MAIN and MAIN[c["name"]] == role:
            image = ROLES[role]
            if image.entrypoint:
                assert "command" not in c, f"{where}: {role} runs through its image's entrypoint"
            elif c["command"][:2] == ["/bin/sh", "-c"]:
                # A start script (slurmctld-start.sh) runs the image's own command as its child.
                assert " ".join(image.cmd) in c["command"][2], where
            elif c["name"] != "sshd":
                assert c["command"][0] == image.cmd[0], where
            uid = (c.get("securityContext") or {}).get("runAsUser", (pod.get("securityContext") or {}).get("runAsUser"))
            expected = {"slurm": SLURM_UID, "root": 0, "nobody": 65534}.get(image.user)
            if expected is None:
                expected = int(image.user)
            if uid is not None:
                assert uid == expected, f"{where}: runs as {uid}, the {role} image is made for {image.user}"
    assert {"slurmctld", "runtime"} <= seen


def test_older_builds_are_reclaimed_only_once_unused_for_a_while(tmp_path: Path) -> None:
    """Several checkouts share one image cache (a CI clone beside a working tree): a build another
    checkout still uses must not vanish under it when this one builds a newer version."""
    import os
    import time

    from sunk.runtime.images.build import KEEP_UNUSED_SECONDS, reclaimable

    roots = {name: tmp_path / f"slurmd-amd64-{name}" for name in ("new", "in-use", "stale", "never-stamped")}
    for name, root in roots.items():
        root.mkdir()
        if name != "never-stamped":
            (root / "used").touch()
    hours_ago = time.time() - KEEP_UNUSED_SECONDS - 60
    os.utime(roots["stale"] / "used", (hours_ago, hours_ago))
    gone = reclaimable(sorted(tmp_path.iterdir()), roots["new"], lambda path: path / "used")
    assert gone == [roots["never-stamped"], roots["stale"]]
