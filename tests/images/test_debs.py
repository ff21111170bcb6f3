"""The verified copy's bookkeeping, without a build: the record beside the pins, the closure of
what a layer needs, the check of each file, and the errors that name what is missing where."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from sunk.runtime.images import debs, recipe

from sunk.images import ARCHES, RELEASES, Arch


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("release", list(RELEASES))
def test_every_pin_is_recorded_at_its_version_with_the_slurm_packages_it_needs(release: str, arch: Arch) -> None:
    pins = recipe.read_pins(release)
    if arch == "arm64":  # Debian builds the NVML plugin for amd64 only (NVIDIA's library)
        pins.pop("slurm-wlm-nvml-plugin")
    record = debs.read_record(release, arch)
    assert {p: record[p].version for p in pins} == pins
    assert {d.arch for d in record.values()} == {arch}
    # Nothing recorded beyond what the pins pull in: the record is the closure, each file a .deb of the pool.
    assert sorted(record) == [d.package for d in debs.closure(pins, record.values())]
    assert all(d.filename.startswith("pool/") and d.filename.endswith(f"_{d.arch}.deb") for d in record.values())
    assert all(len(d.sha256) == 64 and d.size > 0 for d in record.values())


def test_the_closure_follows_same_version_slurm_dependencies_only() -> None:
    record = debs.read_record("26.05", "amd64")
    names = [d.package for d in debs.closure({"libslurm-dev": "26.05.5-1"}, record.values())]
    assert names == ["libslurm-dev", "libslurm45t64"]  # libc6 is the archive's business
    with pytest.raises(KeyError, match=r"the index lacks slurmd 26\.05\.9-1"):
        debs.closure({"slurmd": "26.05.9-1"}, record.values())


def _deb(tmp_path: Path, content: bytes, name: str = "libslurm-dev") -> debs.Deb:
    return debs.Deb(
        name, "1.0-1", "amd64", hashlib.sha256(content).hexdigest(), len(content), f"pool/main/s/x/{name}_1.0-1_amd64.deb", (),
        f"Package: {name}\nVersion: 1.0-1\nFilename: pool/main/s/x/{name}_1.0-1_amd64.deb\nSHA256: x",
    )  # fmt: skip


def test_a_copy_is_used_only_if_it_is_the_recorded_file_and_missing_ones_are_named_with_where(tmp_path: Path) -> None:
    deb = _deb(tmp_path, b"the real package")
    bad, good, cache = tmp_path / "bad", tmp_path / "good", tmp_path / "cache"
    bad.mkdir()
    good.mkdir()
    (bad / deb.basename).write_bytes(b"the real packagf")  # same size, another SHA256
    (good / deb.basename).write_bytes(b"the real package")
    assert debs.locate([deb], [bad, good], None, cache) == {deb.package: good / deb.basename}
    with pytest.raises(debs.CopyError) as caught:
        debs.locate([deb], [bad, cache], "http://127.0.0.1:9/debian", cache)
    assert str(caught.value) == (
        f"no verified copy of libslurm-dev 1.0-1 ({bad / deb.basename}: not the recorded file (SHA256 or size differ); "
        f"{cache / deb.basename}: absent; http://127.0.0.1:9/debian/{deb.filename}: [Errno 111] Connection refused)"
    )
    assert not list(cache.glob("*"))  # a failed fetch leaves nothing


def test_harvest_keeps_verified_downloads_and_the_local_repository_points_at_its_copies(tmp_path: Path) -> None:
    deb, other = _deb(tmp_path, b"one"), _deb(tmp_path, b"two", "libslurm45t64")
    archives = tmp_path / "archives"
    archives.mkdir()
    (archives / deb.basename).write_bytes(b"one")
    (archives / other.basename).write_bytes(b"tampered")
    assert debs.harvest(archives, {deb.package: deb, other.package: other}, tmp_path / "cache") == [deb.package]
    debs.local_repo([deb], {deb.package: tmp_path / "cache" / deb.basename}, tmp_path / "repo")
    assert (tmp_path / "repo" / deb.basename).read_bytes() == b"one"
    assert f"Filename: ./{deb.basename}\n" in (tmp_path / "repo" / "Packages").read_text()
