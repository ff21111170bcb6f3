"""`python -m sunk.runtime.exporter`: the long-running exporter process (runtime/common/process.py)."""

from __future__ import annotations

import logging
import shutil
import sys
import threading
import time

from prometheus_client import CollectorRegistry

from ..common.process import Process, run
from ..slurmrest import JwtMinter, SlurmRestClient
from ..slurmrest.jobtext import SqueueJobs
from .loop import Exporter
from .settings import Settings
from .slurm import SlurmApi, TextJobReads

log = logging.getLogger(__name__)


def build(settings: Settings) -> Process:
    token = JwtMinter.from_file(settings.jwt_key_file, settings.slurm_user)
    rest = SlurmRestClient(
        settings.slurmrestd_url,
        user=settings.slurm_user,
        token=token,
        # slurmrestd waits ~9 s for an unreachable slurmctld before answering 502: one retry,
        # the next interval is the real retry.
        timeout=30.0,
        retries=1,
    )
    registry = CollectorRegistry()
    slurm: SlurmApi = rest
    squeue = shutil.which("squeue")
    if settings.slurm_conf_file is not None and squeue is not None:
        # Every job through squeue (2,000 jobs in ~0.03 s where slurmrestd spends ~1 s serialising
        # them); nodes, partitions, diag, and the jobs when squeue fails, through slurmrestd.
        slurm = TextJobReads(rest, SqueueJobs(token, settings.slurm_conf_file, command=(squeue,)), registry=registry)
    elif settings.slurm_conf_file is not None:
        log.warning("no squeue in this image: every job read goes through slurmrestd")
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
