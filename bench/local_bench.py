"""The local cluster beside the old harness, in one run: how long `sunk local up acme-dev` takes to
every pod Ready with the images built (warm: no cluster state), how much memory the whole cluster
holds at its peak, and how long `make demo`'s local scenario takes, next to the harness's boot of
the same stack's Slurm files.

Run: .venv/bin/python bench/local_bench.py [--stack acme-dev] [--no-demo]

The control plane's build is not timed (cached, `sunk local controlplane build`).

Memory: the proportional set size (PSS, so pages the pods share, such as one image's libraries,
count once) of the cluster's process and every process under it (etcd, the API server, the
controllers, the node agents, every pod's processes and namespace holders), sampled each second from `up` until the
NodeSets' slurmd pods are idle in Slurm, then the peak. Page cache and tmpfs are not counted.

`make demo` on a fresh machine also builds the images (bench/images_bench.py measures a cold build);
here they are cached, so the demo line is the cluster's part of it only, and says so.
Nothing is asserted about time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests.support.goals import goal

ROOT = Path(__file__).resolve().parents[1]


def _sunk(*args: str, env: dict[str, str], timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sunk", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def _tree(root: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += parents.get(pid, [])
    return found


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class Sampler(threading.Thread):
    """Sums the PSS of the cluster's process tree each second; `peak` in KiB."""

    def __init__(self, folder: Path) -> None:
        super().__init__(daemon=True)
        self.folder, self.peak, self.stop = folder, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            states = list(self.folder.glob("*/state.json"))
            if states:
                with_tree = _tree(int(json.loads(states[0].read_text())["pid"]))
                self.peak = max(self.peak, sum(_pss_kib(pid) for pid in with_tree))
            self.stop.wait(1.0)


def harness_boot(stack: str) -> float:
    from sunk.runtime.harness.local import LocalSlurm

    from sunk.stackfile import load_stack

    spec = load_stack(stack).spec
    with LocalSlurm.start(spec) as slurm:
        return float(slurm.timings["total"])


def _idle(kubeconfig: str, timeout: float = 600) -> float:
    """Seconds until every NodeSet counts its replicas idle in Slurm."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", kubeconfig, "get", "nodesets", "-A", "-o", "json"],
            capture_output=True,
            text=True,
        )
        items = json.loads(done.stdout)["items"] if done.returncode == 0 else []
        if items and all(
            int((i.get("status") or {}).get("idle", 0)) >= int((i.get("spec") or {}).get("replicas") or 0)
            for i in items
        ):
            return time.monotonic() - started
        time.sleep(1)
    return float("nan")


def measure_up(stack: str, env: dict[str, str]) -> tuple[float, float, float] | None:
    """`sunk local up STACK` on a cluster of its own: (seconds to every pod Ready, seconds to the
    NodeSets idle in Slurm, peak PSS in GiB), or None when up failed (its output printed)."""
    base = Path(tempfile.mkdtemp(prefix="sunk-local-bench-"))
    env = {**env, "SUNK_LOCAL_DIR": str(base)}
    sampler = Sampler(base)
    sampler.start()
    try:
        started = time.monotonic()
        up = _sunk("local", "up", stack, env=env)
        up_s = time.monotonic() - started
        if up.returncode != 0:
            print(up.stdout[-3000:], up.stderr[-3000:], file=sys.stderr)
            return None
        kubeconfig = _sunk("local", "kubeconfig", env=env).stdout.strip()
        idle_s = up_s + _idle(kubeconfig)
        time.sleep(5)  # a few samples of the steady state
    finally:
        sampler.stop.set()
        sampler.join()
        _sunk("local", "down", env=env)
        shutil.rmtree(base, ignore_errors=True)
    return up_s, idle_s, sampler.peak / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="acme-dev")
    parser.add_argument("--no-demo", action="store_true", help="skip the `sunk local demo` timing")
    args = parser.parse_args()
    print(f"cores: {os.cpu_count()}, load average before: {os.getloadavg()[0]:.1f}")
    env = {**os.environ}
    started = time.monotonic()
    built = _sunk("images", "build", env=env)
    if built.returncode != 0:
        print(built.stderr, file=sys.stderr)
        return 1
    print(
        f"sunk images build: {time.monotonic() - started:.1f} s (hash lookups; the runtime image rebuilds when the sources changed)"
    )

    boot = harness_boot(args.stack)
    print(f"old harness boot of {args.stack}'s Slurm files: {boot:.1f} s")

    measured = measure_up(args.stack, env)
    if measured is None:
        return 1
    up_s, idle_s, peak = measured
    print(
        f"sunk local up {args.stack}: every pod Ready in {up_s:.1f} s; "
        f"NodeSets idle in Slurm at {idle_s:.1f} s; whole local cluster, peak PSS: {peak:.2f} GiB"
    )

    demo_s = None
    if not args.no_demo:
        base = Path(tempfile.mkdtemp(prefix="sunk-local-bench-demo-"))
        env["SUNK_LOCAL_DIR"] = str(base)
        started = time.monotonic()
        demo = _sunk("local", "demo", args.stack, env=env)
        demo_s = time.monotonic() - started
        shutil.rmtree(base, ignore_errors=True)
        print(f"sunk local demo {args.stack} (images cached): {demo_s:.1f} s, exit {demo.returncode}")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print()
    goal("local-up-warm-s", up_s, 120, "s", digits=1)
    goal("local-peak-memory-gib", peak, 6, "GiB")
    goal("harness-boot-s (old harness, same run)", boot, 10, "s", digits=1)
    if demo_s is not None:
        goal("make-demo-s (images cached, not a fresh machine)", demo_s, 480, "s", digits=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
