"""fit: the kubelet's admission arithmetic, table-driven; the scheduler binds only where it passes."""

from __future__ import annotations

from typing import Any

import pytest
from sunk.runtime.scheduler.fit import NodeView, Shortfall, node_view, pinned_containers, pod_requests, shortfalls

GI = 2**30


def c(name: str = "c", *, restart: str = "", limits: dict[str, str] | None = None, **requests: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "resources": {"requests": {k.replace("_", "-"): v for k, v in requests.items()}},
    }
    if limits is not None:
        out["resources"]["limits"] = limits
    if restart:
        out["restartPolicy"] = restart
    return out


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"containers": [c(cpu="500m", memory="1Gi"), c(cpu="1.5")]}, {"cpu": 2000, "memory": GI}),
        ({"containers": [c(cpu="1")], "initContainers": [c(cpu="3")]}, {"cpu": 3000}),
        # A native sidecar adds to the containers and to every init container after it.
        ({"containers": [c(cpu="1")], "initContainers": [c(restart="Always", cpu="250m"), c(cpu="2")]}, {"cpu": 2250}),
        ({"containers": [c(cpu="1")], "initContainers": [c(restart="Always", cpu="250m")]}, {"cpu": 1250}),
        (
            {"containers": [c(cpu="1")], "overhead": {"cpu": "100m", "memory": "64Mi"}},
            {"cpu": 1100, "memory": 64 * 2**20},
        ),
        ({"containers": [c(limits={"cpu": "2", "nvidia.com/gpu": "1"})]}, {"cpu": 2000, "nvidia.com/gpu": 1}),
        ({"containers": [c(ephemeral_storage="10G", memory="1e9")]}, {"ephemeral-storage": 10**10, "memory": 10**9}),
        ({"containers": [c()]}, {}),
    ],
)
def test_pod_requests(spec: dict[str, Any], want: dict[str, int]) -> None:
    assert pod_requests(spec) == want


ALLOC = {"cpu": 16500, "memory": 66 * GI, "nvidia.com/gpu": 2, "ephemeral-storage": 100 * GI, "pods": 110}


@pytest.mark.parametrize(
    ("used", "pods", "want", "short"),
    [
        ({}, 0, {"cpu": 16000, "memory": 64 * GI, "nvidia.com/gpu": 2}, []),
        # A shared slurmd (500m, 1Gi) beside a pod that takes the rest.
        ({"cpu": 500, "memory": GI}, 1, {"cpu": 16000, "memory": 65 * GI}, []),
        ({"cpu": 500}, 1, {"cpu": 16001}, [Shortfall("cpu", 16001, 500, 16500)]),
        # An exclusive slurmd took the GPUs from the device plugin's count.
        ({"nvidia.com/gpu": 2}, 1, {"nvidia.com/gpu": 1}, [Shortfall("nvidia.com/gpu", 1, 2, 2)]),
        ({"memory": 66 * GI}, 1, {"cpu": 1, "memory": 1}, [Shortfall("memory", 1, 66 * GI, 66 * GI)]),
        (
            {"ephemeral-storage": 100 * GI},
            1,
            {"ephemeral-storage": 1},
            [Shortfall("ephemeral-storage", 1, 100 * GI, 100 * GI)],
        ),
        ({}, 110, {"cpu": 1}, [Shortfall("pods", 1, 110, 110)]),
        # Every resource that does not fit is named, pods first, then cpu, memory, extended.
        (
            {"cpu": 16500, "nvidia.com/gpu": 2},
            110,
            {"cpu": 1, "nvidia.com/gpu": 1},
            [Shortfall("pods", 1, 110, 110), Shortfall("cpu", 1, 16500, 16500), Shortfall("nvidia.com/gpu", 1, 2, 2)],
        ),
        # An extended resource the Node does not list: the kubelet does not check it.
        ({}, 0, {"example.com/fpga": 1}, []),
    ],
)
def test_shortfalls(used: dict[str, int], pods: int, want: dict[str, int], short: list[Shortfall]) -> None:
    assert shortfalls(NodeView("n", ALLOC, used, pods), want) == short


def test_a_shortfall_reads_with_its_numbers() -> None:
    assert (
        str(Shortfall("cpu", 2000, 7000, 8000))
        == "cpu: requested 2000m, 7000m of 8000m allocatable in use (1000m free)"
    )


def test_node_view_sums_the_non_terminated_pods_on_the_node() -> None:
    node = {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "7910m", "memory": "30Gi", "pods": "110"}}}
    pods = [
        {"spec": {"containers": [c(cpu="500m", memory="1Gi")]}, "status": {"phase": "Running"}},
        {"spec": {"containers": [c(cpu="2")]}, "status": {"phase": "Pending"}},
        {"spec": {"containers": [c(cpu="4")]}, "status": {"phase": "Succeeded"}},
        {"spec": {"containers": [c(cpu="4")]}, "status": {"phase": "Failed"}},
    ]
    view = node_view(node, pods)
    assert view == NodeView("n", {"cpu": 7910, "memory": 30 * GI, "pods": 110}, {"cpu": 2500, "memory": GI}, 2)
    assert view.plus({"cpu": 1000}).used == {"cpu": 3500, "memory": GI} and view.plus({}).pods == 3


def guaranteed(cpu: str, memory: str = "1Gi") -> dict[str, Any]:
    return c(limits={"cpu": cpu, "memory": memory}, cpu=cpu, memory=memory)


@pytest.mark.parametrize(
    ("spec", "pinned"),
    [
        ({"containers": [guaranteed("2")]}, ("c",)),
        ({"containers": [{**guaranteed("2"), "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}, ("c",)),
        ({"containers": [guaranteed("1500m")]}, ()),  # not whole CPUs: the shared pool
        ({"containers": [c(limits={"cpu": "2", "memory": "1Gi"}, cpu="1", memory="1Gi")]}, ()),  # Burstable
        ({"containers": [c(limits={"cpu": "2"}, cpu="2")]}, ()),  # no memory limit: Burstable
        ({"containers": [guaranteed("2"), c("side", cpu="1")]}, ()),  # one Burstable container decides
        ({"containers": [guaranteed("2"), {**guaranteed("500m"), "name": "d"}]}, ("c",)),
        ({"containers": [guaranteed("2")], "initContainers": [c("init", cpu="1")]}, ()),
    ],
)
def test_guaranteed_pods_with_whole_cpus_are_pinned(spec: dict[str, Any], pinned: tuple[str, ...]) -> None:
    assert pinned_containers(spec) == pinned
