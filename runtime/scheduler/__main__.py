"""`python -m sunk.runtime.scheduler`: the scheduler process (runtime/common/process.py)."""

from __future__ import annotations

import sys
import threading

from ..common.process import Process, run
from ..slurmrest import JwtMinter, SlurmRestClient
from .kube import OfficialKube
from .loop import Scheduler
from .metrics import Health, Metrics
from .settings import Settings
from .slurm import RestSlurm


def build(settings: Settings) -> Process:
    kube = OfficialKube.from_environment(component=settings.scheduler_name)
    rest = SlurmRestClient(
        settings.slurmrestd_url,
        user=settings.slurm_user,
        token=JwtMinter.from_file(settings.jwt_key_file, settings.slurm_user),
    )
    metrics = Metrics()
    # Not ready / not live after three missed cycles (at least 30 s, so slow cycles are no alarm).
    health = Health(stale_after=max(30.0, 3 * settings.interval))
    scheduler = Scheduler(
        kube,
        RestSlurm(rest, cwd=settings.job_cwd),
        scheduler_name=settings.scheduler_name,
        namespace=settings.namespace,
        pod_namespaces=settings.pod_namespaces,
        metrics=metrics,
        health=health,
        grace=settings.bind_grace,
    )

    def loop(stop: threading.Event) -> None:
        wake = threading.Event()
        for ns in settings.pod_namespaces:
            threading.Thread(
                target=kube.watch_pods,
                args=(settings.scheduler_name, ns, stop, wake),
                name=f"sunk-scheduler-watch-{ns}",
                daemon=True,
            ).start()
        scheduler.run(stop, settings.interval, wake)

    def close() -> None:
        scheduler.close()
        rest.close()

    return Process(metrics.registry, health.alive, health.ready, loop, close=close)


def main() -> int:
    return run("scheduler", Settings, build)


if __name__ == "__main__":
    sys.exit(main())
