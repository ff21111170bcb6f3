"""Image builds: cold and cached time per layer and role, every image's size, and how fast the
harness boots Slurm from the images.

Run: .venv/bin/python -m bench.images_bench [--keep-cache]

Cold: a new, empty cache (SUNK_CACHE_DIR in a temporary folder): the Debian base from the mirror
with mmdebstrap, each layer with buildah, each role's oci-archive, each role's root taken from its layer.
Cached: the same builds again (hash lookups only). Then acme-dev boots on the harness from those
images (every daemon from its own role's root). Nothing is asserted about time; GOAL lines compare
with the targets in bench/RESULTS.md. The temporary cache is deleted unless --keep-cache.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from sunk.images import ROLES


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep-cache", action="store_true")
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="sunk-images-bench-"))
    os.environ["SUNK_CACHE_DIR"] = str(cache)
    # Imported after SUNK_CACHE_DIR is set: the harness and builder read it.
    from sunk.runtime.harness import LocalSlurm
    from sunk.runtime.images.build import Builder

    from sunk.stackfile import load_stack

    layer_times: dict[str, float] = {}
    marks: dict[str, float] = {}

    def log(text: str) -> None:
        words = text.split()
        if text.startswith("building layer"):
            marks[words[2]] = time.monotonic()
        elif text.startswith("layer") and " built in " in text:
            layer_times[words[1]] = time.monotonic() - marks[words[1]]

    try:
        builder = Builder(log=log)
        print(f"cold cache: {cache}\n")
        print(f"{'role':<11} {'cold (incl. new layers)':>24} {'unpack':>8} {'cached':>8} {'rootfs':>9} {'archive':>9}")
        cold_total = cached_total = 0.0
        sizes: dict[str, int] = {}
        for role in ROLES:
            started = time.monotonic()
            built = builder.build(role)
            cold = time.monotonic() - started
            started = time.monotonic()
            builder.rootfs(role)
            unpack = time.monotonic() - started
            started = time.monotonic()
            Builder().build(role)  # a new builder: hashes recomputed, images found in the cache
            cached = time.monotonic() - started
            cold_total += cold + unpack
            cached_total += cached
            sizes[role] = built.size
            print(
                f"{role:<11} {cold:>22.1f} s {unpack:>6.1f} s {cached:>6.2f} s "
                f"{built.size / 2**20:>5.0f} MiB {built.archive_size / 2**20:>5.0f} MiB"
            )
        print("\nlayers built (s): " + ", ".join(f"{k} {v:.1f}" for k, v in layer_times.items()))
        started = time.monotonic()
        with LocalSlurm.start(load_stack("acme-dev").spec) as slurm:
            boot = time.monotonic() - started
            print(f"\nacme-dev harness from the images ({', '.join(slurm.roles)}): {boot:.1f} s {slurm.timings}")
            job = slurm.sbatch("#!/bin/sh\nsrun hostname\n")
            slurm.wait_job(job)
        slurm_largest = max(sizes[r] for r in ROLES if ROLES[r].parent == "slurm") / 2**20
        print()
        print(
            f"GOAL cold build and unpack, all {len(ROLES)} images: {cold_total:.0f} s (goal 600 s) "
            f"{'ok' if cold_total <= 600 else 'short'}"
        )
        print(
            f"GOAL cached build, all images: {cached_total:.1f} s (goal 10 s) {'ok' if cached_total <= 10 else 'short'}"
        )
        print(f"GOAL harness boot from the images: {boot:.1f} s (goal 10 s) {'ok' if boot <= 10 else 'short'}")
        print(
            f"GOAL largest Slurm role image: {slurm_largest:.0f} MiB (goal 250 MiB) "
            f"{'ok' if slurm_largest <= 250 else 'short'}"
        )
    finally:
        if not args.keep_cache:
            shutil.rmtree(cache, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
