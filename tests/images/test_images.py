"""The built images (make images builds them first; cached by input hash): their OCI config, what
they hold and don't, the refusals of bad builds, and a push to a real registry on loopback."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sunk.runtime.harness.image_process import RuntimeImage
from sunk.runtime.harness.ports import free_ports, listening, wait_until
from sunk.runtime.images import build, debs, recipe
from sunk.runtime.images.build import Builder, BuildError, Built

from sunk.images import MUNGE_UID, ROLES, SLURM_UID, tag_for
from tests.support.tools import bootstrap_tool

SLURM_ROLES = ("slurmctld", "slurmdbd", "slurmrestd", "slurmd", "login")


@pytest.fixture(scope="module")
def images() -> dict[str, Built]:
    builder = Builder()  # every role at once: the layers they need are built in parallel
    return dict(zip(ROLES, builder.build_many(list(ROLES)), strict=True))


def _config(built: Built) -> dict[str, object]:
    done = subprocess.run(
        ["skopeo", "inspect", "--config", f"oci-archive:{built.archive}"], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def _sunk(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sunk", *args], capture_output=True, text=True, timeout=600, env=env, check=False
    )


@pytest.mark.parametrize("role", list(ROLES))
def test_each_image_is_configured_for_what_its_manifests_run(images: dict[str, Built], role: str) -> None:
    built, image = images[role], ROLES[role]
    config = _config(built)
    assert config["architecture"] == "amd64" and config["os"] == "linux"
    inner = config["config"]
    assert isinstance(inner, dict)
    assert inner["User"] == image.user
    assert (inner.get("Cmd") or []) == list(image.cmd)
    assert (inner.get("Entrypoint") or []) == list(image.entrypoint)
    labels = inner["Labels"]
    assert labels["org.opencontainers.image.version"] == tag_for(image)
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert labels["org.opencontainers.image.revision"]
    assert labels["dev.sunk.inputs"] == built.digest
    assert built.reference.endswith(f"/{image.image}:{tag_for(image)}")


def _passwd(root: Path) -> dict[str, int]:
    return {line.split(":")[0]: int(line.split(":")[2]) for line in (root / "etc/passwd").read_text().splitlines()}


@pytest.mark.parametrize("role", list(ROLES))
def test_images_hold_no_docs_no_baked_keys_and_fixed_ids(images: dict[str, Built], role: str) -> None:
    root = Builder().rootfs(role)
    for folder in ("usr/share/doc", "usr/share/man", "usr/share/locale"):
        files = [p for p in (root / folder).rglob("*") if p.is_file()] if (root / folder).exists() else []
        assert files == [], f"{role}: {folder} has {files[:3]}"
    assert not list((root / "var/lib/apt/lists").glob("*_Packages")), role
    assert not (root / "etc/munge/munge.key").exists(), f"{role}: a munge key baked into a public image"
    assert not list((root / "etc/ssh").glob("ssh_host_*")), f"{role}: SSH host keys baked into the image"
    ids = _passwd(root)
    if role in SLURM_ROLES:
        assert (ids["slurm"], ids["munge"]) == (SLURM_UID, MUNGE_UID), role
    if role == "mariadb":
        assert ids["mysql"] == int(ROLES["mariadb"].user)
        assert list((root / "var/lib/mysql").iterdir()) == []  # initialised on first start, on the PVC
    if role == "runtime":
        assert ids["sunk"] == int(ROLES["runtime"].user)


def test_role_images_share_their_base_layers(images: dict[str, Built]) -> None:
    layers = {}
    for role, built in images.items():
        done = subprocess.run(
            ["skopeo", "inspect", f"oci-archive:{built.archive}"], capture_output=True, text=True, check=True
        )
        layers[role] = json.loads(done.stdout)["Layers"]
    assert len({tuple(layers[r][:2]) for r in SLURM_ROLES}) == 1  # base + slurm, stored once by a registry
    # One Debian base under every image of the release; the Slurm-free mariadb image is one image
    # for every release, on Debian stable's base (recipe.family).
    default = Builder().release.version
    assert len({layers[r][0] for r in ROLES if recipe.family(r, default) == default}) == 1
    assert all(len(layers[r]) == 3 for r in SLURM_ROLES)


def test_runtime_image_runs_the_controllers_without_pulumi(runtime_image: RuntimeImage) -> None:
    code = (
        "import sunk.runtime.operator.loop, sunk.runtime.syncer.loop, sunk.runtime.scheduler.loop, sys\n"
        "import importlib.util as u\n"
        "import sunk.runtime.common.kubewatch, msgspec\n"  # the compiled decoder the informers use
        "print(sys.version_info[:2], u.find_spec('pulumi'), u.find_spec('kmock'), msgspec.json.decode(b'[1]'))\n"
    )
    done = runtime_image.jail.run(
        ["python", "-c", code], role="runtime", user=runtime_image.user, env=runtime_image.env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(3, 14) None None [1]"  # Debian sid's python3, the 26.05 family's


def test_build_unpack_leaves_each_root_where_the_harness_and_local_cluster_take_it(
    images: dict[str, Built],
) -> None:
    done = _sunk("images", "build", "slurmctld", "mariadb", "--unpack")
    assert done.returncode == 0, done.stderr
    builder = Builder()
    for role in ("slurmctld", "mariadb"):
        assert images[role].reference in done.stdout
        root = builder.unpacked(role)
        assert (root / "usr" / "bin").is_dir() and (root.parent / "used").is_file()
    # (slurmctld is Debian's alternatives link: its absolute target resolves inside the root only)
    assert "slurmctld" in os.listdir(builder.unpacked("slurmctld") / "usr" / "sbin")
    assert "mariadbd" in os.listdir(builder.unpacked("mariadb") / "usr" / "sbin")


def _tree(root: Path) -> dict[str, tuple[int, int, int, int, str]]:
    """Every path under root: (mode, uid, gid, size of a file, link target)."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(folder) / name
            st = path.lstat()
            size = st.st_size if path.is_file() and not path.is_symlink() else 0
            link = os.readlink(path) if path.is_symlink() else ""
            found[str(path.relative_to(root))] = (st.st_mode, st.st_uid, st.st_gid, size, link)
    return found


@pytest.mark.parametrize("role", ["slurmrestd", "runtime", "mariadb"])
def test_a_root_taken_from_its_layer_is_what_umoci_unpacks_from_the_archive(
    images: dict[str, Built], role: str, tmp_path: Path
) -> None:
    """The local cluster and the harness run roots written straight from the built layers (no
    archive, no unpack): the same files, owners, modes and links, and the same process, as the
    oci-archive that is pushed gives under umoci."""
    builder = Builder()._family(role)
    builder.write_bundle(role, tmp_path / "direct")
    layout = tmp_path / "oci"
    subprocess.run(["skopeo", "copy", "-q", f"oci-archive:{images[role].archive}", f"oci:{layout}:image"], check=True)
    subprocess.run(["umoci", "unpack", "--image", f"{layout}:image", str(tmp_path / "umoci")], check=True)
    direct, unpacked = _tree(tmp_path / "direct" / "rootfs"), _tree(tmp_path / "umoci" / "rootfs")
    assert len(direct) > 1000
    assert sorted(set(direct) ^ set(unpacked)) == []
    assert {p: v for p, v in direct.items() if unpacked[p] != v} == {}
    assert os.stat(tmp_path / "direct" / "rootfs").st_mode == os.stat(tmp_path / "umoci" / "rootfs").st_mode
    mine = json.loads((tmp_path / "direct" / "config.json").read_text())["process"]
    theirs = json.loads((tmp_path / "umoci" / "config.json").read_text())["process"]
    assert {k: mine[k] for k in ("user", "args", "env", "cwd")} == {
        k: theirs[k] for k in ("user", "args", "env", "cwd")
    }


def test_bad_input_gets_one_line_naming_the_cause(tmp_path: Path) -> None:
    done = _sunk("images", "build", "slurmctl")
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "sunk images build: unknown role 'slurmctl': one of slurmctld, slurmdbd, slurmrestd, slurmd, login, mariadb, runtime"
    )
    empty = tmp_path / "bin"
    empty.mkdir()
    done = _sunk("images", "build", "slurmd", env={**os.environ, "PATH": str(empty)})
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "sunk images build: buildah, mmdebstrap not installed: apt-get install buildah mmdebstrap "
        "(or bash .ci/bootstrap)"
    )


def test_an_unreachable_mirror_fails_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    (closed,) = free_ports(1)
    cache = tmp_path / "cache"
    env = {**os.environ, "SUNK_CACHE_DIR": str(cache), "SUNK_DEBIAN_MIRROR": f"http://127.0.0.1:{closed}/debian"}
    done = _sunk("images", "build", "slurmctld", env=env)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("sunk images: building layer base"), lines
    assert lines[1].startswith(f"sunk images build: mmdebstrap sid from http://127.0.0.1:{closed}/debian failed")
    builder = Builder(cache=cache)
    assert builder.buildah("containers", "--quiet") == ""
    assert builder.buildah("images", "--quiet") == ""
    assert [p.name for p in (cache / "images").iterdir()] == [".lock"]


def test_a_pinned_version_the_mirror_lost_stops_the_build_naming_it_and_keeps_the_cache(
    images: dict[str, Built], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The day Debian replaces 26.05.5 with 26.11: the build stops before apt installs anything,
    naming each missing version and what the mirror has, and every image built before is kept."""
    pins = recipe.read_pins("26.05")
    lost = {**pins, "slurmctld": "26.05.99-1"}
    monkeypatch.setattr(recipe, "read_pins", lambda release, root=recipe.HERE: lost if release == "26.05" else pins)
    builder = Builder(release="26.05")
    with pytest.raises(BuildError) as caught:
        builder.build("slurmctld")
    assert str(caught.value).startswith(
        "Slurm 26.05 images: Debian sid at http://deb.debian.org/debian no longer has slurmctld 26.05.99-1 (it has 26.05.5-1)"
    ), caught.value
    assert "; no verified copy either: " in str(caught.value)
    assert str(caught.value).endswith(
        "26.05-amd64.Packages does not record slurmctld 26.05.99-1 (docs/slurm-releases.md)"
    )
    assert builder.buildah("containers", "--quiet") == ""
    assert images["slurmctld"].archive.is_file()  # the image built from the real pins stays
    monkeypatch.undo()
    assert Builder(release="26.05").build("slurmctld").archive == images["slurmctld"].archive


def test_a_variant_whose_sources_are_unreachable_is_refused_before_building(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (closed,) = free_ports(1)
    monkeypatch.setitem(build.SOURCES, "pyxis", (f"http://127.0.0.1:{closed}/enroot.deb",))
    builder = Builder(cache=tmp_path)
    with pytest.raises(BuildError, match=rf"--with pyxis: cannot fetch http://127.0.0.1:{closed}/enroot.deb"):
        builder.build("slurmd", variant="pyxis")
    assert not (tmp_path / "buildah").exists()
    with pytest.raises(BuildError, match="--with pyxis applies to slurmd, login, not slurmctld"):
        builder.build("slurmctld", variant="pyxis")


def test_a_foreign_architecture_needs_a_qemu_binfmt_handler(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(build, "BINFMT", tmp_path)
    monkeypatch.setattr(build, "host_arch", lambda: "amd64")
    with pytest.raises(BuildError, match="cannot build arm64 images on this amd64 host: no qemu-aarch64"):
        build.check_arch("arm64")
    (tmp_path / "qemu-aarch64").write_text("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n")
    assert build.check_arch("arm64") == "arm64"
    with pytest.raises(BuildError, match="unknown architecture 'riscv64'"):
        build.check_arch("riscv64")


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    """A real OCI registry (Distribution, Debian's docker-registry) on a loopback port."""
    binary = bootstrap_tool("docker-registry")
    (port,) = free_ports(1)
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: error\n"
        f"storage:\n  filesystem:\n    rootdirectory: {tmp_path / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    proc = subprocess.Popen([binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until("registry", lambda: listening(port), timeout=60, alive=proc)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def test_push_copies_images_to_a_registry(images: dict[str, Built], registry: str) -> None:
    started = time.monotonic()
    done = _sunk("images", "push", "slurmctld", "runtime", "--registry", f"{registry}/hpc", "--insecure")
    assert done.returncode == 0, done.stderr
    assert f"pushed {registry}/hpc/slurmctld:26.05.5" in done.stdout
    assert f"pushed {registry}/hpc/sunk-runtime:0.1.0-slurm26.05" in done.stdout
    assert f"images: {{registry: {registry}/hpc}}" in done.stdout
    inspect = subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false", f"docker://{registry}/hpc/slurmctld:26.05.5"],
        capture_output=True,
        text=True,
        check=True,
    )
    pushed = json.loads(inspect.stdout)
    assert pushed["Labels"]["dev.sunk.inputs"] == images["slurmctld"].digest
    assert pushed["Architecture"] == "amd64"
    done = _sunk("images", "push", "slurmd", "--registry", f"{registry}/hpc", "--tag", "rc1", "--insecure")
    assert done.returncode == 0 and f"pushed {registry}/hpc/slurmd:rc1" in done.stdout
    print(f"pushed 3 images in {time.monotonic() - started:.1f} s")


def test_push_to_an_unreachable_registry_fails_in_one_line(images: dict[str, Built]) -> None:
    (closed,) = free_ports(1)
    done = _sunk("images", "push", "slurmd", "--registry", f"127.0.0.1:{closed}/hpc", "--insecure")
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"sunk images push: pushing 127.0.0.1:{closed}/hpc/slurmd:{tag_for(ROLES['slurmd'])} failed: "
    )
    assert len(done.stderr.strip().splitlines()) == 1


def _without(index: str, version: str) -> str:
    """A Packages index as the archive's will read once it dropped the Slurm packages of `version`."""
    stanzas = index.split("\n\n")
    kept = [
        s for s in stanzas if not (f"\nVersion: {version}\n" in s and re.search(r"^(Source|Package): slurm", s, re.M))
    ]
    return "\n\n".join(kept)


def test_an_archive_that_lost_the_pinned_slurm_builds_from_the_verified_copy_and_refuses_a_tampered_one(
    images: dict[str, Built], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The day sid moves to 26.11, seen by apt: the archive's index no longer lists 26.05.5-1 (the
    package lists the build reads are the real ones with those entries removed). The slurm layer,
    on the base already built, installs every pinned package from a verified copy (SUNK_SLURM_DEBS),
    with nothing from the mirror's pool; a copy with one byte changed stops the build naming the
    package, its version and each place looked at."""
    builder = Builder(release="26.05")
    version = recipe.read_pins("26.05")["slurmd"]
    # Fresh lists, filtered: the build reads them as they are (younger than LISTS_MAX_AGE).
    lists = tmp_path / "apt"
    shutil.copytree(builder._lists_home(), lists)
    for index in lists.glob("*/*_Packages"):
        index.write_text(_without(index.read_text(), version))
    for folder in lists.iterdir():
        os.utime(folder)
    monkeypatch.setattr(Builder, "_lists_home", lambda self: lists)
    # Another slurm layer than the cached one (its post-install differs by a comment), on the same base.
    real_load = recipe.load
    monkeypatch.setattr(
        recipe,
        "load",
        lambda name, root=recipe.HERE, release=None: (
            replace(layer, post_install=layer.post_install + "\n# the verified-copy proof\n")
            if (layer := real_load(name, root, release)).name == "slurm"
            else layer
        ),
    )
    monkeypatch.setattr(Builder, "_prune", lambda self, name, keep: None)
    # The copy: the recorded files, verified, from this machine's cache of them (every build keeps
    # what it downloaded), else fetched from the mirror's pool.
    record = debs.read_record("26.05", "amd64")
    copy = tmp_path / "copy"
    copy.mkdir()
    slurm = recipe.load("slurm", release="26.05")
    needed = debs.closure(dict(slurm.pins), record.values())
    found = debs.locate(needed, [debs.cache_folder(builder.cache, "26.05", "amd64")], builder.mirror, copy)
    for deb in needed:
        if found[deb.package] != copy / deb.basename:
            shutil.copyfile(found[deb.package], copy / deb.basename)
    # From here on the build sees no cache of its own: the copy in SUNK_SLURM_DEBS alone.
    monkeypatch.setattr(debs, "cache_folder", lambda cache, release, arch: tmp_path / "cache-debs")
    monkeypatch.setenv(debs.ENV, str(copy))
    logs: list[str] = []
    builder = Builder(release="26.05", log=logs.append)
    builder.pool = False
    assert builder.digest("base") == Builder(release="26.05").digest("base")  # the base built before
    tag = builder.tag("slurm")
    try:
        started = time.monotonic()
        builder._build_layer("slurm")
        print(f"slurm layer from the verified copy: {time.monotonic() - started:.1f} s")
        assert any(
            line.startswith(f"Slurm 26.05 images: Debian sid at {builder.mirror} no longer has slurm-client {version}")
            and line.endswith(f"installs {len(needed)} package(s) from the verified copy in {copy}")
            for line in logs
        ), logs
        container = builder.buildah("from", "--pull-never", tag)
        try:
            shown = builder.buildah(
                "run", "--isolation", "chroot", container, "--", "dpkg-query", "-W", *(d.package for d in needed)
            )
        finally:
            builder.buildah("rm", container, check=False)
        assert sorted(shown.splitlines()) == sorted(f"{d.package}\t{version}" for d in needed)
        assert builder.remove_image(tag)
        # One byte changed in one file of the copy: refused before apt runs.
        client = copy / record["slurm-client"].basename
        data = bytearray(client.read_bytes())
        data[len(data) // 2] ^= 0xFF
        client.write_bytes(bytes(data))
        started = time.monotonic()
        with pytest.raises(BuildError) as caught:
            builder._build_layer("slurm")
        print(f"tampered copy refused in {time.monotonic() - started:.1f} s")
        assert str(caught.value) == (
            f"Slurm 26.05 images: Debian sid at {builder.mirror} no longer has "
            + "; ".join(f"{p} {version} (it has none)" for p, _ in slurm.pins)
            + f"; no verified copy of slurm-client {version} ({client}: not the recorded file (SHA256 or size "
            f"differ); {tmp_path / 'cache-debs' / client.name}: absent)"
        )
        mine = f"sunk-build-slurm-{builder.digest('slurm')}-"
        assert mine not in builder.buildah("containers", "--format", "{{.ContainerName}}")  # others may build beside
    finally:
        builder.remove_image(tag)
