"""The image cache stays bounded: the pure plan of what to delete, the listing of a (fake) cache
folder, and `sunk images prune` on one. No image is built here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sunk.runtime.images import cache, prune
from sunk.runtime.images.build import Builder, BuildError
from sunk.runtime.images.prune import Entry

NOW = 1_800_000_000.0
HOUR = 3600.0
OLD = "runtime-amd64-26.05-00000000000000aa"
NEW = "runtime-amd64-26.05-00000000000000bb"
CUR = "slurmctld-amd64-26.05-00000000000000cc"


def _build(key: str, used: float, size: int = 100) -> list[Entry]:
    """A build as the cache holds it: a buildah image, an archive and an unpacked root."""
    return [
        Entry(
            "layer", f"localhost/sunk-layer/{key.split('-amd64')[0]}:amd64-{key.split('-amd64-')[1]}", key, size, used
        ),
        Entry("archive", f"/c/images/{key}.oci.tar", key, size // 2, used - HOUR),
        Entry("rootfs", f"/c/rootfs/{key}", key, size, used),
    ]


def _plan(entries: list[Entry], **kw: object) -> prune.Plan:
    args: dict[str, object] = {
        "current": frozenset({CUR}),
        "in_use": frozenset(),
        "now": NOW,
        "keep_seconds": 6 * HOUR,
        **kw,
    }
    return prune.plan(entries, **args)  # type: ignore[arg-type]


def test_a_build_neither_current_nor_used_for_the_keep_time_goes_whole() -> None:
    entries = [*_build(OLD, NOW - 7 * HOUR), *_build(NEW, NOW - 1 * HOUR), *_build(CUR, NOW - 50 * HOUR)]
    plan = _plan(entries)
    assert [b.key for b in plan.delete] == [OLD]
    assert {e.kind for e in plan.delete[0].entries} == {"layer", "archive", "rootfs"}
    assert plan.freed == 250
    assert plan.total == 750
    assert {b.key for b in plan.kept} == {NEW, CUR}  # recent, and current however old


def test_a_build_counts_as_used_when_any_of_its_entries_was() -> None:
    entries = [*_build(OLD, NOW - 7 * HOUR), Entry("stamp", "/c/used/" + OLD, OLD, 0, NOW - 60)]
    assert _plan(entries).delete == ()


def test_a_mounted_root_is_kept_however_old_and_over_budget() -> None:
    entries = _build(OLD, NOW - 70 * HOUR)
    assert _plan(entries, in_use=frozenset({OLD}), budget=1).delete == ()


def test_past_the_budget_the_least_recently_used_others_go_until_under_it() -> None:
    a, b, c = (f"runtime-amd64-26.05-00000000000000{x}" for x in ("a1", "a2", "a3"))
    entries = [
        *_build(a, NOW - 3 * HOUR, 1000),
        *_build(b, NOW - 2 * HOUR, 1000),
        *_build(c, NOW - 1 * HOUR, 1000),
        *_build(CUR, NOW - 9 * HOUR, 1000),
    ]  # 2500 bytes each, 10000 in all
    plan = _plan(entries, budget=6000, budget_idle_seconds=1800)
    assert [x.key for x in plan.delete] == [a, b]  # 10000 - 2 * 2500 <= 6000: c stays
    assert plan.total - plan.freed == 5000


def test_past_the_budget_a_build_just_made_stays_and_current_ones_never_go() -> None:
    fresh = "runtime-amd64-26.05-00000000000000f1"
    entries = [*_build(fresh, NOW - 60, 1000), *_build(CUR, NOW - 99 * HOUR, 1000)]
    plan = _plan(entries, budget=10, budget_idle_seconds=1800)
    assert plan.delete == ()
    assert plan.total - plan.freed == 5000  # still over: the caller says so


def test_scraps_and_old_style_names_are_builds_of_their_own() -> None:
    entries = [
        Entry("scrap", "/c/images/x.1234.partial", "/c/images/x.1234.partial", 7, NOW - 8 * HOUR),
        Entry("note", "/c/images/runtime-amd64-0a05944ce65f62b3.size", "runtime-amd64-0a05944ce65f62b3", 9, NOW),
    ]
    assert [b.key for b in _plan(entries, keep_seconds=0).delete] == [
        "/c/images/x.1234.partial",
        "runtime-amd64-0a05944ce65f62b3",
    ]


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("login-amd64-26.05-79bb9b0199ccf89b.oci.tar", "login-amd64-26.05-79bb9b0199ccf89b"),
        ("login-amd64-26.05-79bb9b0199ccf89b.size", "login-amd64-26.05-79bb9b0199ccf89b"),
        ("slurmd-pyxis-arm64-24.11-79bb9b0199ccf89b", "slurmd-pyxis-arm64-24.11-79bb9b0199ccf89b"),
        ("runtime-amd64-0a05944ce65f62b3.size", "runtime-amd64-0a05944ce65f62b3"),
        ("login-amd64-26.05-79bb9b0199ccf89b.oci.1234.partial", None),
        (".slurmd-rslikjqx", None),
        (".lock", None),
    ],
)
def test_the_build_key_of_each_kind_of_cache_name(name: str, key: str | None) -> None:
    assert prune.key_of(name) == key


def test_buildahs_sizes_are_decimal() -> None:
    assert prune.parse_size("79.8 MB") == 79_800_000
    assert prune.parse_size("1.2 GB") == 1_200_000_000
    assert prune.parse_size("512 B") == 512
    assert prune.parse_size("unknown") == 0


def test_the_budget_comes_from_the_environment_and_a_bad_one_is_named() -> None:
    assert cache.budget_bytes({}) == 30 * 2**30
    assert cache.budget_bytes({"SUNK_IMAGE_CACHE_GIB": "12.5"}) == int(12.5 * 2**30)
    assert cache.budget_bytes({"SUNK_IMAGE_CACHE_GIB": "off"}) is None
    for bad in ("lots", "-3", "nan"):
        with pytest.raises(cache.CacheError, match=r"SUNK_IMAGE_CACHE_GIB=.*positive number"):
            cache.budget_bytes({"SUNK_IMAGE_CACHE_GIB": bad})


class FakeBuildah:
    """The part of Builder cache.py uses, over a plain folder: `buildah images --json` from a list."""

    def __init__(self, root: Path, images: list[dict[str, object]]) -> None:
        self.cache = root
        self.images = images
        self.removed: list[str] = []

    def buildah(self, *args: str, check: bool = True) -> str:
        assert args == ("images", "--json")
        return json.dumps(self.images)

    def remove_image(self, tag: str) -> bool:
        self.removed.append(tag)
        return True


def _touch(path: Path, content: str = "x", age: float = 0.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def test_the_listing_of_a_cache_folder_keys_every_entry_of_a_build(tmp_path: Path) -> None:
    key = "slurmd-amd64-26.05-79bb9b0199ccf89b"
    _touch(tmp_path / "images" / f"{key}.oci.tar", "a" * 50)
    _touch(tmp_path / "images" / f"{key}.size", "4096")
    _touch(tmp_path / "images" / ".lock")
    _touch(tmp_path / "images" / "x.oci.77.partial", "p" * 3)
    _touch(tmp_path / "rootfs" / key / "rootfs" / "bin" / "sh", "s" * 10)
    _touch(tmp_path / "rootfs" / key / "used", "", age=10)
    _touch(tmp_path / "used" / key, "", age=20)
    _touch(tmp_path / "apt" / "amd64-26.05" / "0123456789abcdef" / "Packages", "l" * 30)
    fake = FakeBuildah(
        tmp_path,
        [
            {"names": ["localhost/sunk-layer/slurmd:amd64-26.05-79bb9b0199ccf89b"], "size": "1.5 kB", "created": 5},
            {"names": ["docker.io/library/other:1"], "size": "9 GB", "created": 5},
        ],
    )
    found = {(e.kind, e.key, e.size) for e in cache.entries(fake)}
    assert found == {
        ("layer", key, 1500),
        ("stamp", key, 0),
        ("archive", key, 50),
        ("note", key, 4),
        ("scrap", str(tmp_path / "images" / "x.oci.77.partial"), 3),
        ("rootfs", key, 4096),  # the size note, not a walk of the tree
        ("lists", "apt/amd64-26.05/0123456789abcdef", 30),
    }
    build = next(b for b in prune.group(cache.entries(fake)) if b.key == key)
    assert cache.delete(fake, build) == []
    assert fake.removed == ["localhost/sunk-layer/slurmd:amd64-26.05-79bb9b0199ccf89b"]
    assert sorted(p.name for p in (tmp_path / "images").iterdir()) == [".lock", "x.oci.77.partial"]
    assert list((tmp_path / "rootfs").iterdir()) == []
    assert list((tmp_path / "used").iterdir()) == []


def test_a_root_some_process_mounts_is_in_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    used, idle = "slurmd-amd64-26.05-79bb9b0199ccf89b", "login-amd64-26.05-79bb9b0199ccf89b"
    for key in (used, idle):
        (tmp_path / "rootfs" / key / "rootfs").mkdir(parents=True)
    line = f"301 300 0:77 / /merged rw - overlay overlay rw,lowerdir={tmp_path}/rootfs/{used}/rootfs,upperdir=/u\n"
    monkeypatch.setattr(cache, "_mountinfos", lambda: iter(["22 1 8:1 / / rw - ext4 /dev/vda rw\n", line]))
    assert cache.mounted(FakeBuildah(tmp_path, [])) == {used}


def test_the_current_builds_are_every_layer_of_both_releases(tmp_path: Path) -> None:
    builder = Builder(cache=tmp_path, log=lambda _: None)
    keys = builder.current_keys()
    assert builder.key("slurmctld") in keys and builder.key("base") in keys
    assert Builder(release="24.11", cache=tmp_path).key("mariadb") in keys
    assert builder.key("slurmd+pyxis") in keys
    assert {k.split("-amd64-")[1][:5] for k in keys} == {"26.05", "24.11"}
    assert not tmp_path.exists() or list(tmp_path.iterdir()) == []  # nothing written to say so


def test_a_bad_cache_bound_stops_a_build_before_anything_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache_dir = tmp_path / "cache"
    env = {**os.environ, "SUNK_CACHE_DIR": str(cache_dir), "SUNK_IMAGE_CACHE_GIB": "plenty"}
    done = subprocess.run(
        [sys.executable, "-m", "sunk", "images", "build", "slurmctld"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 1
    assert "SUNK_IMAGE_CACHE_GIB='plenty'" in done.stderr and "Traceback" not in done.stderr
    assert not cache_dir.exists()
    monkeypatch.setenv("SUNK_IMAGE_CACHE_GIB", "-1")
    with pytest.raises(BuildError, match="SUNK_IMAGE_CACHE_GIB='-1'"):
        Builder(cache=cache_dir).build_many(["slurmctld"])
    assert not cache_dir.exists()


def _prune(cache_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SUNK_CACHE_DIR": str(cache_dir)}
    return subprocess.run(
        [sys.executable, "-m", "sunk", "images", "prune", *args], capture_output=True, text=True, env=env
    )


def test_sunk_images_prune_lists_with_dry_run_then_removes_only_stale_builds(tmp_path: Path) -> None:
    current = Builder(cache=tmp_path).key("slurmctld")
    stale = "slurmctld-amd64-26.05-00000000deadbeef"
    recent = "slurmctld-amd64-26.05-00000000feedf00d"
    for key, age in ((current, 99 * HOUR), (stale, 7 * HOUR), (recent, HOUR)):
        _touch(tmp_path / "images" / f"{key}.oci.tar", "a" * 2048, age=age)
        _touch(tmp_path / "rootfs" / key / "used", "", age=age)
        _touch(tmp_path / "images" / f"{key}.size", "1048576", age=age)
    dry = _prune(tmp_path, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"would remove {stale}" in dry.stdout
    assert current not in dry.stdout and recent not in dry.stdout
    assert "would remove 1 build(s)" in dry.stdout
    assert (tmp_path / "images" / f"{stale}.oci.tar").exists()  # a dry run deletes nothing
    done = _prune(tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"removed {stale}" in done.stdout
    left = {p.name for p in (tmp_path / "images").iterdir()} | {p.name for p in (tmp_path / "rootfs").iterdir()}
    assert not any(stale in name for name in left)
    assert {f"{current}.oci.tar", f"{recent}.oci.tar", current, recent} <= left
    assert "removed" in _prune(tmp_path, "--older-than", "0").stdout
    assert not (tmp_path / "images" / f"{recent}.oci.tar").exists()
    assert (tmp_path / "images" / f"{current}.oci.tar").exists()


def test_sunk_images_prune_refuses_bad_numbers(tmp_path: Path) -> None:
    for args, says in ((("--older-than", "-1"), "--older-than -1"), (("--max-gib", "0"), "--max-gib 0")):
        done = _prune(tmp_path, *args)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr
