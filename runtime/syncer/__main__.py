"""`python -m sunk.runtime.syncer`: the long-running syncer process (runtime/common/process.py)."""

from __future__ import annotations

import sys
import threading
import time

from prometheus_client import CollectorRegistry

from ..common.health import fresh_view
from ..common.process import Process, run
from ..slurmrest.connect import LONG_READ_RETRIES, LONG_READ_TIMEOUT, SlurmAccess, slurm_command
from ..slurmrest.nodetext import ScontrolNodes
from .cache import InformerCache
from .kube import KubernetesApi
from .loop import Syncer
from .settings import Settings
from .slurm import SlurmApi, TextNodeReads


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
    scontrol = slurm_command("scontrol", settings.slurm_conf_file)
    if scontrol is not None:
        # Each cycle's read of every node through scontrol (30x cheaper at 10,000 nodes than
        # slurmrestd serialising them); writes, and the read when scontrol fails, through slurmrestd.
        nodes = ScontrolNodes(access.token, scontrol.slurm_conf, command=scontrol.command)
        slurm = TextNodeReads(rest, nodes, registry=registry)
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

    # Ready while its view is fresh: a few intervals, and at least long enough for a slurmctld
    # takeover (SlurmctldTimeout 8 s plus retries) not to flap it.
    ready_after = max(30.0, 3 * settings.sync_interval)

    def ready() -> tuple[bool, str]:
        return fresh_view(syncer.last_ok, syncer.last_cycle_end, time.monotonic(), ready_after)

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
