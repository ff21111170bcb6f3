"""The image cache's contents and their removal: the I/O around prune.plan.

`sunk images prune` and every build that adds to the cache (Store.build_many, Store.rootfs)
come here. The plan is pure (prune.py); this module lists what the cache holds, which builds are
current (the builder says: what `sunk images build` would make now for each supported release and
variant), which unpacked roots a running harness or local cluster mounts, and deletes.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from . import prune


class Store(Protocol):
    """What this module needs of the builder (runtime/images/build.py's Builder)."""

    cache: Path

    def buildah(self, *args: str, check: bool = True) -> str: ...

    def remove_image(self, tag: str) -> bool: ...


BUDGET_GIB_DEFAULT = 30.0
"""Default bound of the cache. The current builds of both releases take about 10 GiB (layers,
archives, unpacked roots); the rest is room for a few checkouts' runtime builds side by side."""
BUDGET_ENV = "SUNK_IMAGE_CACHE_GIB"
BUDGET_IDLE_SECONDS = 1800.0
"""Past the budget, a build another checkout may have just made is still left alone this long."""


class CacheError(ValueError):
    """A cache setting that cannot be used; the message names it and what would be valid."""


def cache_dir() -> Path:
    """The image cache: SUNK_CACHE_DIR, else ~/.cache/sunk."""
    return Path(os.environ.get("SUNK_CACHE_DIR") or Path.home() / ".cache" / "sunk")


def budget_bytes(environ: dict[str, str] | os._Environ[str] = os.environ) -> int | None:
    """The byte bound from SUNK_IMAGE_CACHE_GIB (default 30; 0 or "off": no bound)."""
    raw = environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return int(BUDGET_GIB_DEFAULT * 2**30)
    if raw.lower() in ("off", "0"):
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise CacheError(f"{BUDGET_ENV}={raw!r}: give the image cache's bound in GiB (a positive number), or off")
    return int(value * 2**30)


def _mtime(path: Path, default: float = 0.0) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return default


def _tree_size(root: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total


def _note(images: Path, key: str) -> int | None:
    try:
        return int((images / f"{key}.size").read_text())
    except (OSError, ValueError):
        return None


def entries(builder: Store) -> list[prune.Entry]:
    """Everything in the cache that can go, each with its build's key, size and last use."""
    cache = builder.cache
    found = _layers(builder)
    for path in _children(cache / "used"):
        found.append(prune.Entry("stamp", str(path), path.name.replace("+", "-"), 0, _mtime(path)))
    for path in _children(cache / "images"):
        if path.name == ".lock":
            continue
        key = prune.key_of(path.name)
        kind = "scrap" if key is None else "archive" if path.name.endswith(".oci.tar") else "note"
        found.append(prune.Entry(kind, str(path), key or str(path), _size(path), _mtime(path)))
    found += _roots(cache)
    for family in _children(cache / "apt"):
        for path in _children(family):
            found.append(prune.Entry("lists", str(path), f"apt/{family.name}/{path.name}", _size(path), _mtime(path)))
    return found


def _layers(builder: Store) -> list[prune.Entry]:
    """sunk's buildah images, keyed as their archives are."""
    try:
        images = json.loads(builder.buildah("images", "--json", check=False) or "[]") or []
    except ValueError:
        images = []
    found = []
    for image in images:
        for name in image.get("names") or []:
            repo, _, tag = name.rpartition(":")
            if repo.startswith("localhost/sunk-layer/"):
                key = f"{repo.rsplit('/', 1)[-1].replace('+', '-')}-{tag}"
                used = _mtime(builder.cache / "used" / key, float(image.get("created") or 0))
                found.append(prune.Entry("layer", name, key, prune.parse_size(str(image.get("size", ""))), used))
    return found


def _roots(cache: Path) -> list[prune.Entry]:
    """Unpacked roots (sized by their build's note where there is one: no walk of the tree)."""
    found = []
    for path in _children(cache / "rootfs"):
        key = prune.key_of(path.name)
        if key is None or not path.is_dir():
            found.append(prune.Entry("scrap", str(path), str(path), _size(path), _mtime(path)))
            continue
        size = _note(cache / "images", key)
        used = _mtime(path / "used", _mtime(path))  # the stamp rootfs() touches, else the unpack
        found.append(prune.Entry("rootfs", str(path), key, _tree_size(path) if size is None else size, used))
    return found


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def _size(path: Path) -> int:
    if path.is_dir() and not path.is_symlink():
        return _tree_size(path)
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def mounted(builder: Store) -> frozenset[str]:
    """The keys of unpacked roots some process mounts now (a harness's or local cluster's overlay
    lowerdir, in whatever mount namespace): deleting those would pull a running root away."""
    roots = builder.cache / "rootfs"
    names = [p.name for p in _children(roots)]
    if not names:
        return frozenset()
    text = "\n".join(_mountinfos())
    return frozenset(key for name in names if (key := prune.key_of(name)) is not None and f"{roots / name}/" in text)


def _mountinfos() -> Iterator[str]:
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                yield Path(f"/proc/{pid}/mountinfo").read_text()
            except OSError:
                continue


def delete(builder: Store, build: prune.Build) -> list[str]:
    """Deletes one build's entries (layers first: buildah refuses an image a container uses);
    returns what could not be deleted, with why."""
    failed = []
    for entry in sorted(build.entries, key=lambda e: e.kind != "layer"):
        if entry.kind == "layer":
            if not builder.remove_image(entry.name):
                failed.append(f"{entry.name} (buildah rmi refused: a container uses it?)")
            continue
        path = Path(entry.name)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        if path.exists():
            failed.append(f"{path} (still there)")
    return failed


def make_plan(builder: Store, current: frozenset[str], *, keep_seconds: float, budget: int | None) -> prune.Plan:
    return prune.plan(
        entries(builder),
        current=current,
        in_use=mounted(builder),
        now=time.time(),
        keep_seconds=keep_seconds,
        budget=budget,
        budget_idle_seconds=BUDGET_IDLE_SECONDS,
    )
