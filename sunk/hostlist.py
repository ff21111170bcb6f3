"""Slurm hostlist expressions: `gpu-[001-003,007]` <-> names. Pure, deterministic."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

_TRAILING = re.compile(r"^(.*?)(\d+)$")
_GROUP = re.compile(r"([^,\[]*)\[([^\]]+)\]([^,]*)|([^,\[\]]+)")


def compress(names: Iterable[str]) -> str:
    """Compress node names into a hostlist. Unpadded numbers of any width share brackets
    (`n[9-11]`); zero-padded ones share brackets with the numbers of their width (`n[09-11]`)."""
    digits_by_prefix: dict[str, set[str]] = defaultdict(set)
    plain: set[str] = set()
    for name in set(names):
        m = _TRAILING.match(name)
        if m:
            digits_by_prefix[m.group(1)].add(m.group(2))
        else:
            plain.add(name)
    groups: dict[tuple[str, int], set[int]] = defaultdict(set)
    for prefix, all_digits in digits_by_prefix.items():
        padded = {len(d) for d in all_digits if len(d) > 1 and d[0] == "0"}
        for d in all_digits:
            # width 0: printed as is; a padded width keeps its zeros (`010` is not `10`)
            groups[(prefix, len(d) if len(d) in padded else 0)].add(int(d))
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
