"""`sunk demo` and `sunk slurm-up`: a stack's rendered Slurm files on real local daemons."""

from __future__ import annotations

import argparse
import logging
import shlex
import signal
import sys
import time
from types import FrameType

from sunk.render import TopologyNode, render_slurm_files
from sunk.spec.cluster import ClusterSpec
from sunk.spec.errors import SpecError
from sunk.stackfile import load_stack

from .layout import default_nodes
from .local import LocalSlurm

SAMPLE_JOB = """#!/bin/sh
# sunk demo: one task per node, each reporting where it ran.
srun -l sh -c 'echo "task $SLURM_PROCID on $SLURMD_NODENAME (job $SLURM_JOB_ID, partition $SLURM_JOB_PARTITION)"'
sleep 2
"""


def _section(title: str, body: str = "") -> None:
    print(f"\n── {title} " + "─" * max(0, 70 - len(title)))
    if body:
        print(body.rstrip("\n"))


def _load(stack: str) -> ClusterSpec | None:
    try:
        spec = load_stack(stack).spec
    except SpecError as err:
        print(f"✗ {stack}: invalid\n{err}", file=sys.stderr)
        return None
    except FileNotFoundError as err:
        print(f"✗ {stack}: {err}", file=sys.stderr)
        return None
    print(f"✓ {stack}: valid — cluster {spec.name} (tenant {spec.tenant}), {len(spec.nodesets)} nodeset(s)")
    return spec


def _timings(slurm: LocalSlurm) -> str:
    t = slurm.timings
    build = f"image build or unpack {t['build']:.0f} s, " if "build" in t else ""
    return (
        f"{t['total']:.1f} s ({build}overlay mounts {t['mount']:.1f} s, "
        f"daemons {t['daemons']:.1f} s incl. munged/MariaDB/slurmdbd {t['base']:.1f} s)"
    )


def _multi_node_partition(spec: ClusterSpec, slurm: LocalSlurm) -> tuple[str, int]:
    """The default partition (else the first) and how many of its nodes run (at most 2)."""
    part = next((p for p in spec.partitions if p.default), spec.partitions[0])
    running = [n for n in slurm.nodes if n.nodeset in part.nodesets]
    return part.name, min(2, len(running))


def cmd_demo(args: argparse.Namespace) -> int:
    if args.debug:
        logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
    spec = _load(args.stack)
    if spec is None:
        return 1
    files = render_slurm_files(spec, [TopologyNode(n.name, n.labels) for n in default_nodes(spec)])
    _section(
        "rendered Slurm files", "\n".join(f"  {rel} ({len(text.splitlines())} lines)" for rel, text in files.items())
    )
    try:
        with LocalSlurm.start(spec) as slurm:
            _section(
                "booted on real Slurm daemons",
                f"  start-up: {_timings(slurm)}\n  roots: {slurm.jail.workdir}/roots ({', '.join(slurm.roles)})",
            )
            partition, count = _multi_node_partition(spec, slurm)
            if count == 0:
                print(f"✗ partition {partition} has no running node", file=sys.stderr)
                return 1
            job = slurm.sbatch(SAMPLE_JOB, "-p", partition, "-N", str(count), "-J", "sunk-demo", "-o", "/tmp/%j.out")
            slurm.wait_job(job, {"RUNNING", "COMPLETED"})
            _section("sinfo", slurm.run("sinfo", "-N", "-l", check=True).stdout)
            _section("squeue (sample job running)", slurm.run("squeue", check=True).stdout)
            state = slurm.wait_job(job, {"COMPLETED"})
            _section(f"sample job {job}: {state}", (slurm.root / f"tmp/{job}.out").read_text())
            if slurm.accounting:
                slurm.wait_accounted(job)
                fields = "JobID,JobName,Partition,NodeList,AllocCPUS,State,Elapsed,Comment%24"
                _section("sacct", slurm.run("sacct", "-j", str(job), "-o", fields, check=True).stdout)
            if spec.topology_file is not None:
                _section("scontrol show topology", slurm.run("scontrol", "show", "topology", check=True).stdout)
            if slurm.restapi:
                ping = slurm.run("scontrol", "ping", check=True).stdout.strip()
                _section("slurmrestd", f"  {slurm.rest_url} (JWT), slurmctld: {ping}")
            print("\ntearing down…")
    except KeyboardInterrupt:
        print("\ninterrupted; torn down", file=sys.stderr)
        return 130
    except Exception as err:  # a demo reports any failure and exits non-zero
        print(f"\n✗ demo failed: {err}", file=sys.stderr)
        return 1
    print("✓ demo done: daemons stopped, work folder (overlay uppers, logs) deleted")
    return 0


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def cmd_slurm_up(args: argparse.Namespace) -> int:
    if args.debug:
        logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
    spec = _load(args.stack)
    if spec is None:
        return 1
    signal.signal(signal.SIGTERM, _raise_interrupt)  # `kill <pid>` tears down like Ctrl-C
    try:
        with LocalSlurm.start(spec, accounting=not args.no_accounting) as slurm:
            client = slurm.jail.workdir / "sunk-client"
            client.write_text(
                "#!/bin/sh\nexec " + shlex.join(slurm.jail.command(["$@"], role="login")).replace("'$@'", '"$@"') + "\n"
            )
            client.chmod(0o755)
            print(f"\nSlurm is up in {_timings(slurm)}.")
            print(f"  run Slurm clients:  {client} sinfo   ({client} sbatch --wrap 'srun hostname', …)")
            print(f"  daemon logs:        {slurm.log_dir}/")
            if slurm.restapi:
                print(f"  slurmrestd:         {slurm.rest_url}")
                print(f"  a token:            {client} scontrol token username=slurm lifespan=3600")
                print("                      (headers X-SLURM-USER-NAME: slurm, X-SLURM-USER-TOKEN: <token>)")
            print("Ctrl-C stops the daemons and deletes the copy.", flush=True)
            deadline = time.monotonic() + args.seconds if args.seconds else None
            while deadline is None or time.monotonic() < deadline:
                time.sleep(0.5)
    except KeyboardInterrupt:
        print("\nstopped; torn down")
        return 0
    print("torn down")
    return 0
