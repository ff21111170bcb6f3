"""`sunk render` wall time: one stack from a cold process, and a matrix of stacks (one per tenant
and environment, as CI renders them), through the real Pulumi program under the mock engine.

    .venv/bin/python -m bench.render_bench                 # one stack x3, then a 100-stack matrix
    .venv/bin/python -m bench.render_bench --matrix 20     # quicker

Prints the figures and one GOAL line per goal (the render goals: one stack <= 2 s, 100 stacks <= 60 s).
Nothing is asserted about time."""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.goals import goal

ROOT = Path(__file__).resolve().parents[1]
SUNK = str(Path(sys.executable).with_name("sunk"))


def render(stacks: list[str], out: Path, *extra: str) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [SUNK, "render", *stacks, "--out", str(out), *extra], cwd=ROOT, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"sunk render {' '.join(stacks)} failed:\n{done.stderr}")
    return time.monotonic() - started


def matrix_stacks(folder: Path, count: int) -> list[Path]:
    """`count` stack files: acme-dev's cluster under another tenant name each."""
    source = (ROOT / "stacks" / "Pulumi.acme-dev.yaml").read_text()
    paths = []
    for i in range(count):
        path = folder / f"Pulumi.t{i:03d}-dev.yaml"
        path.write_text(source.replace("tenant: acme", f"tenant: t{i:03d}"))
        paths.append(path)
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--matrix", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 1, help="worker processes for the matrix")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sunk-render-bench-") as tmp:
        work = Path(tmp)
        singles = [render(["acme-dev"], work / f"single-{i}") for i in range(3)]
        files = len(list((work / "single-0").iterdir()))
        print(f"one stack (acme-dev, {files} objects): " + ", ".join(f"{s:.2f} s" for s in singles))
        stacks = matrix_stacks(work, args.matrix)
        matrix = work / "matrix"
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        total = render([str(p) for p in stacks], matrix, "--jobs", str(args.parallel))
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
        rendered = sorted(matrix.iterdir())
        objects = sum(len(list(d.iterdir())) for d in rendered)
        if len(rendered) != args.matrix:
            raise RuntimeError(f"{len(rendered)} stack folders for {args.matrix} stacks")
        print(
            f"{args.matrix} stacks in one `sunk render` ({args.parallel} worker processes): {total:.1f} s wall, "
            f"{objects} objects, {total / args.matrix:.2f} s per stack; {cpu:.1f} s CPU in all "
            f"({cpu / total:.2f} cores busy of {os.cpu_count()}; load average {os.getloadavg()[0]:.1f})"
        )
    goal("render one stack, cold process", statistics.median(singles), 2.0, "s")
    goal(f"render a {args.matrix}-stack matrix", total, 60.0 * args.matrix / 100, "s", digits=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
