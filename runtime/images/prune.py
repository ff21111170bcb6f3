"""What to delete from the image cache: a pure plan over what the cache holds (no I/O, no clock).

The cache (~/.cache/sunk) keeps, per build of a layer, a buildah image (vfs: a whole copy of its
root), and per role an oci-archive, a size note, an unpacked root filesystem and a use stamp.
Every one of them carries the build's key, `<layer>-<arch>-<release>-<input hash>`, so the
entries of one build are judged together: a build is kept while it is one of the current inputs
of a supported release (what `sunk images build` would make now), while a running root mounts
it, or while it was used recently; the rest goes (`sunk images prune`). A byte budget goes
further: past it, the least recently used builds that are neither current nor in use go, as long
as they have been idle a little while (another checkout sharing the cache may have just built
them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

KEY = re.compile(r"^(?P<key>[a-z0-9-]+-(?:amd64|arm64)-(?:\d+\.\d+-)?[0-9a-f]{16})(?:\.oci\.tar|\.size)?$")
"""A cache name that ends with a build's key: a rootfs folder, an archive, a size note, a stamp.
Builds from before keys named their release (`runtime-amd64-<hash>`) match too: never current."""


def key_of(name: str) -> str | None:
    """The build key a cache file or folder name carries, or None (a partial file, a temp folder)."""
    found = KEY.match(name)
    return found.group("key") if found else None


@dataclass(frozen=True)
class Entry:
    """One thing in the cache that can be deleted on its own."""

    kind: str
    """layer (a buildah image), archive, note, rootfs, stamp, lists (apt's), scrap (a leftover)."""
    name: str
    """What deleting it takes: the buildah tag, or the path."""
    key: str
    """The build it belongs to (or its own name, for an entry of no build)."""
    size: int
    """Bytes it holds (a buildah image's size as buildah reports it)."""
    used: float
    """When it was last used (epoch seconds)."""


@dataclass(frozen=True)
class Build:
    """The entries of one key, deleted together."""

    key: str
    entries: tuple[Entry, ...]

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries)

    @property
    def used(self) -> float:
        return max(e.used for e in self.entries)


@dataclass(frozen=True)
class Plan:
    delete: tuple[Build, ...]
    kept: tuple[Build, ...]
    total: int
    """Bytes the cache holds before the plan."""

    @property
    def freed(self) -> int:
        return sum(b.size for b in self.delete)


def group(entries: Iterable[Entry]) -> list[Build]:
    keys: dict[str, list[Entry]] = {}
    for entry in entries:
        keys.setdefault(entry.key, []).append(entry)
    return [Build(k, tuple(sorted(v, key=lambda e: (e.kind, e.name)))) for k, v in sorted(keys.items())]


def plan(
    entries: Sequence[Entry],
    *,
    current: frozenset[str],
    in_use: frozenset[str],
    now: float,
    keep_seconds: float,
    budget: int | None = None,
    budget_idle_seconds: float = 0.0,
) -> Plan:
    """Deletes every build that is not current, not in use and unused for `keep_seconds`. Then,
    while the cache is over `budget` bytes, the other builds that are not current nor in use and
    idle for at least `budget_idle_seconds`, least recently used first."""
    builds = group(entries)
    total = sum(b.size for b in builds)
    movable = [b for b in builds if b.key not in current and b.key not in in_use]
    delete = [b for b in movable if now - b.used >= keep_seconds]
    left = total - sum(b.size for b in delete)
    if budget is not None and left > budget:
        for build in sorted((b for b in movable if b not in delete), key=lambda b: (b.used, b.key)):
            if left <= budget:
                break
            if now - build.used >= budget_idle_seconds:
                delete.append(build)
                left -= build.size
    gone = {b.key for b in delete}
    return Plan(
        delete=tuple(sorted(delete, key=lambda b: b.key)),
        kept=tuple(b for b in builds if b.key not in gone),
        total=total,
    )


UNITS = {"b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4}


def parse_size(text: str) -> int:
    """buildah's human size ("79.8 MB", decimal units) in bytes; 0 if unreadable."""
    found = re.match(r"^\s*([\d.]+)\s*([kKMGT]?B)\s*$", text)
    if not found:
        return 0
    return int(float(found.group(1)) * UNITS[found.group(2).lower()])
