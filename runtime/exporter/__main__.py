"""`python -m sunk.runtime.exporter`: the long-running exporter process (runtime/common/process.py)."""

from __future__ import annotations

import sys
import threading
import time

from prometheus_client import CollectorRegistry

from ..common.process import Process, run
from ..slurmrest.connect import LONG_READ_RETRIES, LONG_READ_TIMEOUT, SlurmAccess, slurm_command
from ..slurmrest.jobtext import SqueueJobs
from .loop import Exporter
from .settings import Settings
from .slurm import SlurmApi, TextJobReads


def build(settings: Settings) -> Process:
    access = SlurmAccess.from_key_file(
        settings.slurmrestd_url,
        settings.slurm_user,
        settings.jwt_key_file,
        timeout=LONG_READ_TIMEOUT,
        retries=LONG_READ_RETRIES,
    )
    rest = access.client()
    registry = CollectorRegistry()
    slurm: SlurmApi = rest
    squeue = slurm_command("squeue", settings.slurm_conf_file)
    if squeue is not None:
        # Every job through squeue (2,000 jobs in ~0.03 s where slurmrestd spends ~1 s serialising
        # them); nodes, partitions, diag, and the jobs when squeue fails, through slurmrestd.
        jobs = SqueueJobs(access.token, squeue.slurm_conf, command=squeue.command)
        slurm = TextJobReads(rest, jobs, registry=registry)
    exporter = Exporter(slurm, per_user=settings.per_user_metrics, registry=registry)
    stale_after = max(120.0, 5 * settings.collect_interval)

    def alive() -> tuple[bool, str]:
        age = time.monotonic() - exporter.last_cycle_end if exporter.last_cycle_end else 0.0
        return age < stale_after, f"last read ended {age:.0f}s ago"

    def ready() -> tuple[bool, str]:
        # Ready even while Slurm is away: /metrics then says so (sunk_slurm_up 0), which is
        # what the alert needs; an unready pod would drop out of the Service and hide it.
        return True, "serving" if exporter.last_ok else "serving; the last read of Slurm failed"

    def loop(stop: threading.Event) -> None:
        exporter.last_cycle_end = time.monotonic()
        exporter.run(settings.collect_interval, stop)

    return Process(registry, alive, ready, loop, close=rest.close)


def main() -> int:
    return run("exporter", Settings, build)


if __name__ == "__main__":
    sys.exit(main())
