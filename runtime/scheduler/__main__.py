"""`python -m sunk.runtime.scheduler`: the scheduler process (settings from the environment)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from ..common.health import HealthServer
from ..common.settings import SettingsError
from ..slurmrest import JwtMinter, SlurmRestClient
from .kube import OfficialKube
from .loop import Scheduler
from .metrics import Health, Metrics
from .settings import Settings
from .slurm import RestSlurm


def main() -> int:
    logging.basicConfig(level=os.environ.get("SUNK_LOG_LEVEL", "INFO"), format="%(asctime)s %(levelname)s %(message)s")
    try:
        settings = Settings.from_env()
    except SettingsError as e:
        print(f"sunk-scheduler: {e}", file=sys.stderr)
        return 2
    log = logging.getLogger("sunk.scheduler")
    for noisy in ("httpx", "urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)  # a line per request would drown ours
    kube = OfficialKube.from_environment(component=settings.scheduler_name)
    rest = SlurmRestClient(
        settings.slurmrestd_url,
        user=settings.slurm_user,
        token=JwtMinter.from_file(settings.jwt_key_file, settings.slurm_user),
    )
    metrics = Metrics()
    # Not ready / not live after three missed cycles (at least 30 s, so slow cycles are no alarm).
    health = Health(stale_after=max(30.0, 3 * settings.interval))
    server = HealthServer(settings.metrics_port, metrics.registry, alive=health.alive, ready=health.ready).start()
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
    stop, wake = threading.Event(), threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    for ns in settings.pod_namespaces:
        threading.Thread(
            target=kube.watch_pods,
            args=(settings.scheduler_name, ns, stop, wake),
            name=f"sunk-scheduler-watch-{ns}",
            daemon=True,
        ).start()
    log.info(
        "sunk-scheduler %s for cluster %s (pods in %s): slurmrestd %s, metrics on :%d",
        settings.scheduler_name,
        settings.cluster,
        ",".join(settings.pod_namespaces),
        settings.slurmrestd_url,
        settings.metrics_port,
    )
    try:
        scheduler.run(stop, settings.interval, wake)
    finally:
        server.stop()
        scheduler.close()
        rest.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
