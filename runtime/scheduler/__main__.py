"""`python -m sunk.runtime.scheduler`: the scheduler process (runtime/common/process.py)."""

from __future__ import annotations

import sys
import threading
from typing import Any

from ..common.informer import Informer
from ..common.kubewatch import KubeListWatch
from ..common.process import Process, run
from ..slurmrest.connect import SlurmAccess
from .cache import POD_SELECTOR, WatchedCluster, node_entry, pod_entry
from .kube import OfficialKube
from .loop import SUBMIT_WORKERS, Scheduler
from .metrics import Health, Metrics
from .request import Topology
from .settings import Settings
from .slurm import RestSlurm


def build(settings: Settings) -> Process:
    kube = OfficialKube.from_environment(component=settings.scheduler_name)
    access = SlurmAccess.from_key_file(settings.slurmrestd_url, settings.slurm_user, settings.jwt_key_file)
    connect = access.client
    rest = connect()
    metrics = Metrics()
    slurm = RestSlurm(
        rest,
        connect=connect,
        cwd=settings.job_cwd,
        immediate=settings.immediate_allocation,
        on_placed=lambda kind: metrics.placed.labels(kind).inc(),
    )
    wake = threading.Event()
    api = kube.api
    pods = Informer(
        KubeListWatch(api.list_pod_for_all_namespaces),
        pod_entry(settings.scheduler_name, settings.pod_namespaces, settings.namespace, on_ours=wake.set),
        name="pods",
        field_selector=POD_SELECTOR,
    )
    nodes = Informer(KubeListWatch(api.list_node), node_entry, name="nodes")
    informers: list[Informer[Any]] = [pods, nodes]
    # Not ready / not live after three missed cycles (at least 30 s, so slow cycles are no alarm).
    health = Health(stale_after=max(30.0, 3 * settings.interval))
    scheduler = Scheduler(
        kube,
        slurm,
        scheduler_name=settings.scheduler_name,
        namespace=settings.namespace,
        pod_namespaces=settings.pod_namespaces,
        metrics=metrics,
        health=health,
        grace=settings.bind_grace,
        cache=WatchedCluster(pods, nodes),
        submit_workers=SUBMIT_WORKERS,
        topology=Topology(settings.gang_topology, settings.gang_block_nodes),
    )

    def loop(stop: threading.Event) -> None:
        for informer in informers:
            informer.start()
        scheduler.run(stop, settings.interval, wake)

    def close() -> None:
        for informer in informers:
            informer.stop()
        scheduler.close()
        slurm.close()
        rest.close()

    return Process(metrics.registry, health.alive, health.ready, loop, close=close)


def main() -> int:
    return run("scheduler", Settings, build)


if __name__ == "__main__":
    sys.exit(main())
