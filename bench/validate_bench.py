"""Spec validation at hostile sizes: every check is linear (or n log n) in what the stack lists.

    .venv/bin/python -m bench.validate_bench                  # 10,000 NodeSets, 30,000 accounts
    .venv/bin/python -m bench.validate_bench --nodesets 2000 --accounts 5000   # quicker

Two stacks, each validated as `sunk validate` does (load_spec) and rendered to Slurm files:
- `--nodesets` all-matching NodeSets in one partition (every one in every per-NodeSet check);
- `--accounts` accounts in one parent chain (each the parent of the next: the deepest tree).
A hostile corpus once took 115 s and 152 s on these. Prints the figures and a GOAL line for each
validation and each render (within 10 s); nothing is asserted about time."""

from __future__ import annotations

import argparse
import time
from typing import Any

from sunk.render import render_slurm_files
from sunk.spec import load_spec
from tests.support.goals import goal

GOAL_SECONDS = 10.0


def nodesets_stack(count: int) -> dict[str, Any]:
    names = [f"n{i}" for i in range(count)]
    return {
        "name": "big",
        "tenant": "acme",
        "nodesets": [
            {"name": name, "cpus": 4, "memoryMib": 8192, "mode": "all-matching-nodes", "nodeSelector": {"pool": name}}
            for name in names
        ],
        "partitions": [{"name": "all", "nodesets": names, "default": True}],
    }


def accounts_stack(count: int) -> dict[str, Any]:
    accounts = [{"name": "a0", "users": ["u0"]}]
    accounts += [{"name": f"a{i}", "parent": f"a{i - 1}", "users": [f"u{i}"]} for i in range(1, count)]
    return {
        "name": "deep",
        "tenant": "acme",
        "nodesets": [{"name": "cpu", "cpus": 4, "memoryMib": 8192}],
        "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
        "accounts": accounts,
    }


def timed(label: str, data: dict[str, Any]) -> tuple[float, float]:
    started = time.perf_counter()
    spec = load_spec(data)
    validated = time.perf_counter() - started
    started = time.perf_counter()
    files = render_slurm_files(spec)
    rendered = time.perf_counter() - started
    size = sum(len(body) for body in files.values())
    print(f"{label}: validate {validated:.2f} s, render Slurm files {rendered:.2f} s ({size:,} bytes)")
    return validated, rendered


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodesets", type=int, default=10_000)
    parser.add_argument("--accounts", type=int, default=30_000)
    args = parser.parse_args()
    nodesets, nodesets_render = timed(f"{args.nodesets:,} all-matching NodeSets", nodesets_stack(args.nodesets))
    accounts, accounts_render = timed(f"{args.accounts:,} accounts in one parent chain", accounts_stack(args.accounts))
    goal(f"validate {args.nodesets} nodesets", nodesets, GOAL_SECONDS, unit="s")
    goal(f"validate {args.accounts} accounts", accounts, GOAL_SECONDS, unit="s")
    goal(f"render {args.nodesets} nodesets", nodesets_render, GOAL_SECONDS, unit="s")
    goal(f"render {args.accounts} accounts", accounts_render, GOAL_SECONDS, unit="s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
