"""KubeSimProcess (kmock in a child process, for benchmarks) answers what KubeSim does: a
Binding made through the real client shows in bound_at, with a time this process's monotonic
clock brackets, and in bindings and requests; the child ends with the context."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.support.kubesim.process import KubeSimProcess

NS = "bench"


def test_a_binding_through_the_client_reads_back_across_the_pipe() -> None:
    with KubeSimProcess() as sim:
        api = client.CoreV1Api(sim.api_client())
        sim.add_namespace(NS)
        node: Any = {"metadata": {"name": "n0"}, "status": {"allocatable": {"cpu": "2", "memory": "1Gi"}}}
        reply: Any = api.create_node(node, _preload_content=False)
        reply.read()
        pod: Any = {"metadata": {"name": "p0"}, "spec": {"containers": [{"name": "c"}]}}
        reply = api.create_namespaced_pod(NS, pod, _preload_content=False)
        reply.read()
        assert sim.bound_at == {} and sim.bindings == []
        before = time.monotonic()
        binding: Any = {"metadata": {"name": "p0"}, "target": {"kind": "Node", "name": "n0"}}
        reply = api.create_namespaced_pod_binding("p0", NS, binding, _preload_content=False)
        reply.read()
        after = time.monotonic()
        assert sim.bindings == [(NS, "p0", "n0")]
        [(key, at)] = sim.bound_at.items()
        assert key == (NS, "p0") and before <= at <= after
        assert sim.requests[("create", "pods")] == 1 and sim.rejections == []
        with pytest.raises(RuntimeError, match="not offered across the pipe: stop"):
            sim._ask("stop")  # only READS and CALLS cross: the child keeps serving
        assert sim.bindings == [(NS, "p0", "n0")]
        pid = sim.pid
    assert not Path(f"/proc/{pid}").exists()  # ended and reaped
