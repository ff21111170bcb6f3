"""`python -m sunk.runtime.syncer`: the long-running syncer process (runtime/common/process.py)."""

from __future__ import annotations

import logging
import shutil
import sys
import threading
import time

from prometheus_client import CollectorRegistry

from ..common.process import Process, run
from ..slurmrest import JwtMinter, SlurmRestClient
from ..slurmrest.nodetext import ScontrolNodes
from .cache import InformerCache
from .kube import KubernetesApi
from .loop import Syncer
from .settings import Settings
from .slurm import SlurmApi, TextNodeReads

log = logging.getLogger(__name__)


def build(settings: Settings) -> Process:
    token = JwtMinter.from_file(settings.jwt_key_file, settings.slurm_user)
    rest = SlurmRestClient(
        settings.slurmrestd_url,
        user=settings.slurm_user,
        token=token,
        # slurmrestd itself waits ~9 s for an unreachable slurmctld before answering 502, and a
        # 10,000-node list takes seconds: a long timeout, one retry; the next cycle is the retry.
        timeout=30.0,
        retries=1,
    )
    registry = CollectorRegistry()
    slurm: SlurmApi = rest
    scontrol = shutil.which("scontrol")
    if settings.slurm_conf_file is not None and scontrol is not None:
        # Each cycle's read of every node through scontrol (30x cheaper at 10,000 nodes than
        # slurmrestd serialising them); writes, and the read when scontrol fails, through slurmrestd.
        slurm = TextNodeReads(
            rest, ScontrolNodes(token, settings.slurm_conf_file, command=(scontrol,)), registry=registry
        )
    elif settings.slurm_conf_file is not None:
        log.warning("no scontrol in this image: every node read goes through slurmrestd")
    kube = KubernetesApi.from_environment()
    # Nodes and this tenant's slurmd pods come from watches: listed once, then kept current.
    cache = InformerCache(kube.api_client, settings.namespace).start()
    # A full plan about every 5 minutes whatever the interval (a safety net; see loop.py).
    full_every = max(1, round(300 / settings.sync_interval))
    syncer = Syncer(
        slurm,
        kube,
        settings.namespace,
        cache=cache,
        registry=registry,
        full_plan_every=full_every,
        freeze_gc=True,
        drain_conditions=settings.drain_conditions,
    )
    # Alive while cycles keep ending; a hung call shows up after a few intervals plus timeouts.
    stale_after = max(60.0, 5 * settings.sync_interval)

    def alive() -> tuple[bool, str]:
        age = time.monotonic() - syncer.last_cycle_end if syncer.last_cycle_end else 0.0
        return age < stale_after, f"last cycle ended {age:.0f}s ago"

    def ready() -> tuple[bool, str]:
        return syncer.last_ok, "both sides read" if syncer.last_ok else "last cycle could not read Slurm or Kubernetes"

    def loop(stop: threading.Event) -> None:
        syncer.last_cycle_end = time.monotonic()
        syncer.run(settings.sync_interval, stop)

    def close() -> None:
        cache.close()
        rest.close()

    return Process(registry, alive, ready, loop, close=close)


def main() -> int:
    return run("syncer", Settings, build)


if __name__ == "__main__":
    sys.exit(main())
