"""`sunk validate` and `sunk render` as users run them, at 10, 100 and 1,000 NodeSets and 30,000
accounts, and the Pulumi program under mocks at 100 NodeSets.

    .venv/bin/python -m bench.validate_bench                      # everything (a few minutes)
    .venv/bin/python -m bench.validate_bench --sizes 10,100 --no-render   # quicker

Each command is the CLI, whole, in its own process (`python -m sunk validate FILE`, `python -m sunk
render FILE --out DIR`, from the checkout's root, so `sunk render` runs the project's own program):
start-up, the strict YAML read, the spec, the pod gate and (render) the program under Pulumi's mock
engine and the YAML written. The stacks, written to a temporary folder:
- N all-matching NodeSets in one partition (every one in every per-NodeSet check, and each a
  gres file, a ConfigMap, a NodeSet resource, a slurmd pod and a Service for the gate);
- 30,000 accounts in one parent chain (each the parent of the next: the deepest tree), as small as
  YAML writes them, since a stack file holds at most 1 MiB.

Then the program under mocks in this process at 100 NodeSets (sunk.components.render.render_stack:
the stack validated, then the project's __main__.py evaluated), with the counts that say whether
the work is done once: Slurm renders, pod gates, resources registered.

Prints a table, the growth of each command from 100 to 1,000 NodeSets (linear work grows about
10x; quadratic work about 100x) and the GOAL lines: validate at 1,000 NodeSets within 10 s, its
growth from 100 within 12x. Wall time is the user's figure; CPU (the child's user + system time)
tells a loaded machine apart from slow code. Nothing is asserted about time."""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.goals import goal

ROOT = Path(__file__).resolve().parents[1]
GOAL_SECONDS = 10.0
GOAL_GROWTH = 12.0
ACCOUNTS = 30_000
PROGRAM_NODESETS = 100


def nodesets_stack(count: int) -> str:
    """A stack file of `count` all-matching NodeSets, all in one partition."""
    names = [f"n{i}" for i in range(count)]
    lines = [
        "config:",
        "  sunk:operator: true",
        "  sunk:cluster:",
        "    name: big",
        "    tenant: acme",
        "    nodesets:",
    ]
    lines += [
        f"      - {{name: {n}, cpus: 4, memoryMib: 8192, mode: all-matching-nodes, nodeSelector: {{pool: {n}}}}}"
        for n in names
    ]
    lines += ["    partitions:", f"      - {{name: all, default: true, nodesets: [{', '.join(names)}]}}"]
    return "\n".join(lines) + "\n"


def accounts_stack(count: int) -> str:
    """A stack file of `count` accounts in one parent chain, in one flow sequence: 30,000 accounts
    written one per line (about 37 bytes each) would pass the 1 MiB a stack file may hold."""
    lines = ["config:", "  sunk:cluster:", "    name: deep", "    tenant: acme"]
    lines += ["    nodesets: [{name: cpu, cpus: 4, memoryMib: 8192}]"]
    lines += ["    partitions: [{name: batch, nodesets: [cpu], default: true}]"]
    chain = ["{name: a0, users: [u0]}", *(f"{{name: a{i}, parent: a{i - 1}}}" for i in range(1, count))]
    lines += [f"    accounts: [{', '.join(chain)}]"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float


def run_cli(*args: str) -> Timing:
    """One `sunk` command in its own process, from the checkout's root; it must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sunk", *args], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"sunk {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu)


def row(stack: str, command: str, t: Timing) -> None:
    print(f"{stack:<44} {command:<14} {t.wall:>8.2f} {t.cpu:>8.2f}", flush=True)


def median(runs: list[Timing]) -> Timing:
    return Timing(statistics.median(r.wall for r in runs), statistics.median(r.cpu for r in runs))


@contextlib.contextmanager
def counting(module: Any, name: str, counts: dict[str, int], label: str) -> Iterator[None]:
    """Count the calls of `module.name` (where its callers look it up) while the block runs."""
    original: Callable[..., Any] = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        counts[label] = counts.get(label, 0) + 1
        return original(*args, **kwargs)

    setattr(module, name, counted)
    try:
        yield
    finally:
        setattr(module, name, original)


def program_under_mocks(path: Path) -> tuple[Timing, dict[str, int]]:
    """The project's program for the stack under Pulumi's mock engine, in this process, as `sunk
    render` runs it; with how many Slurm renders and pod gates it took and what it registered."""
    from sunk.components.render import render_stack

    import sunk.manifests.config as config
    import sunk.podgate as podgate

    counts: dict[str, int] = {}
    cpu = time.process_time()
    started = time.perf_counter()
    with (
        counting(config, "render_slurm_files", counts, "Slurm renders"),
        counting(podgate, "_problems", counts, "pod gates"),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        rendered = render_stack(str(path))
    timing = Timing(time.perf_counter() - started, time.process_time() - cpu)
    counts["resources registered"] = len(rendered.evaluation.registrations)
    counts["objects rendered"] = len(rendered.files)
    return timing, counts


def validate_counts(path: Path) -> dict[str, int]:
    """What `sunk validate` does for the stack, counted in this process (load_stack is its work)."""
    import sunk.manifests.config as config
    import sunk.podgate as podgate
    from sunk.stackfile import load_stack

    counts: dict[str, int] = {}
    with (
        counting(config, "render_slurm_files", counts, "Slurm renders"),
        counting(podgate, "_problems", counts, "pod gates"),
    ):
        load_stack(str(path))
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,100,1000", help="NodeSet counts, comma-separated (default 10,100,1000)")
    parser.add_argument("--accounts", type=int, default=ACCOUNTS)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each validate (the median is shown)")
    parser.add_argument("--no-render", action="store_true", help="skip `sunk render` and the program under mocks")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    validate: dict[int, Timing] = {}
    render: dict[int, Timing] = {}
    with tempfile.TemporaryDirectory(prefix="sunk-validate-bench-") as tmp:
        folder = Path(tmp)
        stacks = {n: folder / f"Pulumi.bench-n{n}.yaml" for n in sizes}
        for n, path in stacks.items():
            path.write_text(nodesets_stack(n))
        accounts = folder / f"Pulumi.bench-a{args.accounts}.yaml"
        accounts.write_text(accounts_stack(args.accounts))
        print(f"{'stack':<44} {'command':<14} {'wall s':>8} {'CPU s':>8}", flush=True)
        for n, path in stacks.items():
            validate[n] = median([run_cli("validate", str(path)) for _ in range(args.repeat)])
            row(f"{n:,} NodeSets ({path.stat().st_size:,} bytes)", "sunk validate", validate[n])
            if not args.no_render:
                render[n] = run_cli("render", str(path), "--out", str(folder / f"out-{n}"))
                row(f"{n:,} NodeSets", "sunk render", render[n])
        label = f"{args.accounts:,} accounts in one chain ({accounts.stat().st_size:,} bytes)"
        accounts_validate = median([run_cli("validate", str(accounts)) for _ in range(args.repeat)])
        row(label, "sunk validate", accounts_validate)
        if not args.no_render:
            row(label, "sunk render", run_cli("render", str(accounts), "--out", str(folder / "out-a")))
        largest = max(sizes)
        print(f"\nsunk validate of {largest:,} NodeSets, counted in-process: {validate_counts(stacks[largest])}")
        if not args.no_render:
            program = folder / f"Pulumi.bench-p{PROGRAM_NODESETS}.yaml"
            program.write_text(nodesets_stack(PROGRAM_NODESETS))
            timing, counts = program_under_mocks(program)
            print(
                f"the program under mocks, {PROGRAM_NODESETS} NodeSets: wall {timing.wall:.2f} s, CPU "
                f"{timing.cpu:.2f} s; {counts}"
            )
    for small, big in itertools.pairwise(sizes):
        grew = f"sunk validate {validate[big].wall / validate[small].wall:.1f}x (CPU {validate[big].cpu / validate[small].cpu:.1f}x)"
        if big in render:
            grew += f", sunk render {render[big].wall / render[small].wall:.1f}x (CPU {render[big].cpu / render[small].cpu:.1f}x)"
        print(f"growth {small:,} -> {big:,} NodeSets ({big / small:g}x the NodeSets): {grew}")
    print()
    if 1000 in validate:
        goal("validate-1000-nodesets", validate[1000].wall, GOAL_SECONDS, unit="s")
    if 1000 in validate and 100 in validate:
        goal("validate-growth-1000-over-100", validate[1000].wall / validate[100].wall, GOAL_GROWTH)
    goal(f"validate-{args.accounts}-accounts", accounts_validate.wall, GOAL_SECONDS, unit="s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
