"""The operator on watches (runtime/operator/cache.py) against kubesim over HTTP, Slurm faked:
the goal of "no periodic full lists after start" (API server load at scale), counted at the API server, and a NodeSet change
reconciled from its watch event rather than at the next periodic resync."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from sunk.runtime.operator.cache import watch
from sunk.runtime.operator.kube import OfficialKube
from sunk.runtime.operator.loop import Operator
from sunk.runtime.operator.settings import Settings

from sunk.nodeset_resource import GROUP, PLURAL, VERSION
from tests.support.fakes.operator import FakeSlurm
from tests.support.kubesim import KubeSim
from tests.support.rawclient import raw
from tests.support.waiting import wait_for

from .test_kmock import NS, seed


class Running:
    """An operator on watches in its own thread, as its process runs it."""

    def __init__(self, server: KubeSim, resync: float) -> None:
        api_client = server.api_client()
        self.kube = OfficialKube(api_client)
        self.watched = watch(api_client)
        self.slurm = FakeSlurm()
        settings = Settings(identity="op", lease_namespace=NS, resync=resync)
        self.operator = Operator(self.kube, self.kube, settings, slurm_for=lambda ref: self.slurm, watched=self.watched)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.operator.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def resyncs(self) -> float:
        return float(self.operator.metrics.resyncs._value.get())

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


@pytest.fixture
def start(kube_server: KubeSim) -> Iterator[Any]:
    started: list[Running] = []

    def run(resync: float) -> Running:
        started.append(Running(kube_server, resync))
        return started[-1]

    yield run
    for op in started:
        op.close()


def slurmd_pods(server: KubeSim) -> list[str]:
    core = client.CoreV1Api(server.api_client())
    items = raw(core.list_namespaced_pod(NS, _preload_content=False))["items"]
    return sorted(p["metadata"]["name"] for p in items if "slurm.sunk.dev/nodeset" in p["metadata"].get("labels", {}))


def test_a_steady_operator_lists_nothing_after_start(kube_server: KubeSim, start: Any) -> None:
    seed(kube_server)
    op = start(resync=0.2)  # a resync every 0.2 s: a steady minute's worth in a few seconds
    wait_for("2 slurmd pods", lambda: len(slurmd_pods(kube_server)) == 2)
    wait_for("a quiet resync", lambda: op.resyncs() >= 3)
    before, resyncs = kube_server.requests, op.resyncs()
    wait_for("15 more resyncs", lambda: op.resyncs() >= resyncs + 15)
    window = kube_server.requests - before
    # Nothing but leader election (a Lease read and renewal every 5 s): no list, no watch
    # reconnect, no Pod, Node or ConfigMap read (ConfigMaps are read again after 60 s only).
    assert set(window) <= {("fetch", "leases"), ("update", "leases")}, window
    assert op.watched.lists == 7  # one per informer, at start


def test_a_nodeset_change_is_reconciled_from_its_watch_event(kube_server: KubeSim, start: Any) -> None:
    spec = seed(kube_server)
    start(resync=3600.0)  # no periodic resync after the first: only a watch event can start one
    wait_for("2 slurmd pods", lambda: len(slurmd_pods(kube_server)) == 2)
    custom = client.CustomObjectsApi(kube_server.api_client())
    name = f"{spec.cluster_name}-{spec.name}"
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, name, {"spec": {"replicas": 3}})
    wait_for("a third slurmd pod", lambda: len(slurmd_pods(kube_server)) == 3)
