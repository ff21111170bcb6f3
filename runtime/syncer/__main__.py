"""`python -m sunk.runtime.syncer`: the long-running syncer process."""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time

from prometheus_client import CollectorRegistry

from ..common.health import HealthServer
from ..common.settings import SettingsError
from ..slurmrest import JwtMinter, SlurmRestClient
from .kube import KubernetesApi
from .loop import Syncer
from .settings import Settings


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        settings = Settings.from_env()
    except SettingsError as exc:
        print(f"sunk-syncer: {exc}", file=sys.stderr)
        return 2
    slurm = SlurmRestClient(
        settings.slurmrestd_url,
        user=settings.slurm_user,
        token=JwtMinter.from_file(settings.jwt_key_file, settings.slurm_user),
        # slurmrestd itself waits ~9 s for an unreachable slurmctld before answering 502, and a
        # 10,000-node list takes seconds: a long timeout, one retry; the next cycle is the retry.
        timeout=30.0,
        retries=1,
    )
    registry = CollectorRegistry()
    syncer = Syncer(slurm, KubernetesApi.from_environment(), settings.namespace, registry=registry)
    # Alive while cycles keep ending; a hung call shows up after a few intervals plus timeouts.
    stale_after = max(60.0, 5 * settings.sync_interval)

    def alive() -> tuple[bool, str]:
        age = time.monotonic() - syncer.last_cycle_end if syncer.last_cycle_end else 0.0
        return age < stale_after, f"last cycle ended {age:.0f}s ago"

    def ready() -> tuple[bool, str]:
        return syncer.last_ok, "both sides read" if syncer.last_ok else "last cycle could not read Slurm or Kubernetes"

    server = HealthServer(settings.metrics_port, registry, alive=alive, ready=ready).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    logging.getLogger("sunk.syncer").info(
        "syncing cluster %s namespace %s every %ss", settings.cluster, settings.namespace, settings.sync_interval
    )
    syncer.last_cycle_end = time.monotonic()
    try:
        syncer.run(settings.sync_interval, stop)
    finally:
        server.stop()
        slurm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
