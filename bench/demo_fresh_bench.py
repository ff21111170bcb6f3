"""`make demo` as on a fresh machine: a clean clone of this checkout's committed HEAD, an empty
image cache and no pip cache, so the run creates the virtualenv, builds every image the default
stack names from the Debian mirror and runs the demo (`sunk local demo acme-dev`: up, the
scenario, down). Prints the time of each of make's steps and

    GOAL demo_fresh: <seconds> s (goal 480 s) ok|short

Run: .venv/bin/python -m bench.demo_fresh_bench [--keep] [--under DIR]

What it does not redo: the apt packages .ci/bootstrap would install (the machine has them; on a
bare Debian they add the download of mmdebstrap, buildah, skopeo, umoci, slapd and a few more).
The image cache is a new folder ($SUNK_CACHE_DIR), never ~/.cache/sunk, and is removed at the end
(with --keep it stays, printed); a cold cache of one release takes several GiB, so the run stops
make (and says so) if the disk's free space falls under FLOOR_GIB. Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.support.goals import goal

ROOT = Path(__file__).resolve().parents[1]
GOAL_S = 480.0
"""The issue's goal: `make demo` on a fresh machine, images included, in 8 minutes."""
FLOOR_GIB = 1.5
"""Free disk below which the run is stopped: other work on the machine needs the rest."""
STEPS = {"bash .ci/bootstrap": "bootstrap", "sunk images build": "images", "sunk local demo": "demo"}
"""make's echo of each recipe line of `demo` (Makefile) -> the step it starts."""


def _free_gib(path: Path) -> float:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize / 2**30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the clone and its image cache")
    parser.add_argument("--under", type=Path, help="folder for the clone and the cache (default: the temp dir)")
    parser.add_argument("--rev", help="check this revision out in the clone (an earlier one, to compare)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="sunk-demo-fresh-", dir=args.under))
    clone = base / "sunk"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    if args.rev:
        subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", args.rev], check=True)
    head = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    env = {
        **os.environ,
        "SUNK_CACHE_DIR": str(base / "cache"),
        "SUNK_LOCAL_DIR": str(base / "local"),
        "PIP_NO_CACHE_DIR": "1",
        "TMPDIR": str(base / "tmp"),  # pip's and the image builder's scratch, counted with the run
    }
    (base / "tmp").mkdir()
    env.pop("VIRTUAL_ENV", None)
    print(f"clone of {head.stdout.strip()} in {clone}; cores {os.cpu_count()}, load {os.getloadavg()[0]:.1f}")
    print(f"free disk {_free_gib(base):.1f} GiB", flush=True)
    started = time.monotonic()
    marks: dict[str, float] = {}
    make = subprocess.Popen(
        ["make", "demo"], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    stopped: list[str] = []

    def watch_disk() -> None:
        while make.poll() is None:
            if _free_gib(base) < FLOOR_GIB:
                stopped.append(f"free disk under {FLOOR_GIB} GiB")
                os.killpg(make.pid, signal.SIGTERM)
                return
            time.sleep(2)

    threading.Thread(target=watch_disk, daemon=True).start()
    tail: list[str] = []
    assert make.stdout is not None
    for line in make.stdout:
        for echo, step in STEPS.items():
            if echo in line and step not in marks:
                marks[step] = time.monotonic() - started
        tail = [*tail[-60:], line.rstrip()]
        if line.startswith("sunk images: layer ") or ("built in" in line and line.startswith("ghcr.io")):
            print(f"  [{time.monotonic() - started:5.0f} s] {line.rstrip()}", flush=True)
    code = make.wait()
    total = time.monotonic() - started
    if code != 0 or stopped:
        print("\n".join(tail), file=sys.stderr)
        print(f"make demo failed (exit {code}{'; ' + stopped[0] if stopped else ''})", file=sys.stderr)
    ends = [*list(marks.values())[1:], total]
    for (step, at), end in zip(marks.items(), ends, strict=True):
        print(f"  {step}: {end - at:.0f} s")
    print(f"make demo, fresh: {total:.0f} s, exit {code}; load after {os.getloadavg()[0]:.1f}")
    if args.keep:
        print(f"kept: {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    if code != 0 or stopped:
        return 1
    goal("demo_fresh", total, GOAL_S, "s", digits=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
