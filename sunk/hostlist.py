"""Slurm hostlist expressions: `gpu-[001-003,007]` <-> names. Pure, deterministic."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

_TRAILING = re.compile(r"^(.*?)(\d+)$")
_GROUP = re.compile(r"([^,\[]*)\[([^\]]+)\]([^,]*)|([^,\[\]]+)")


def compress(names: Iterable[str]) -> str:
    """Compress node names into a hostlist; numbers of one width share brackets."""
    groups: dict[tuple[str, int], set[int]] = defaultdict(set)
    plain: set[str] = set()
    for name in set(names):
        m = _TRAILING.match(name)
        if m:
            groups[(m.group(1), len(m.group(2)))].add(int(m.group(2)))
        else:
            plain.add(name)
    parts = sorted(plain)
    for (prefix, width), numbers in sorted(groups.items()):
        nums = sorted(numbers)
        if len(nums) == 1:
            parts.append(f"{prefix}{nums[0]:0{width}d}")
            continue
        ranges = []
        start = prev = nums[0]
        for n in [*nums[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)


def expand(expr: str) -> list[str]:
    """Expand a hostlist (one bracket group per name) into names, in order."""
    out: list[str] = []
    for m in _GROUP.finditer(expr):
        if m.group(4) is not None:
            out.append(m.group(4))
            continue
        prefix, body, suffix = m.group(1), m.group(2), m.group(3)
        for part in body.split(","):
            lo, _, hi = part.partition("-")
            width = len(lo)
            for n in range(int(lo), int(hi or lo) + 1):
                out.append(f"{prefix}{n:0{width}d}{suffix}")
    return out
