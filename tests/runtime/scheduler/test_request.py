"""Pod requests and annotations -> the placeholder job: quantities, Slurm times, the submit body."""

from __future__ import annotations

from fractions import Fraction

import pytest
from sunk.runtime.scheduler.fit import parse_quantity
from sunk.runtime.scheduler.marker import Marker
from sunk.runtime.scheduler.model import (
    PodResources,
    PodView,
    exclusive_nodes,
    job_view,
    node_map,
    pod_resources,
    pod_view,
)
from sunk.runtime.scheduler.request import Invalid, JobRequest, build_request, parse_slurm_time, submit_body

from sunk import keys


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("2", 2),
        ("1.5Gi", Fraction(3, 2) * 2**30),
        ("1e3", 1000),
        ("128974848", 128974848),
        ("4k", 4000),
        ("1M", 10**6),
    ],
)
def test_quantities(text: str, value: Fraction) -> None:
    assert parse_quantity(text) == value


def test_a_bad_quantity_is_an_error_on_the_pod_not_a_crash() -> None:
    view = pod_view(
        {
            "metadata": {"name": "p", "namespace": "n", "uid": "u"},
            "spec": {"containers": [{"resources": {"requests": {"cpu": "lots"}}}]},
        }
    )
    assert "lots" in view.resource_error
    assert isinstance(build_request([view], {}), Invalid)


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("30", 30),
        ("5:30", 6),
        ("2:00:00", 120),
        ("1-0", 1440),
        ("1-2:30", 1590),
        ("0-0:0:1", 1),
        ("UNLIMITED", -1),
        ("infinite", -1),
    ],
)
def test_slurm_times(text: str, minutes: int) -> None:
    assert parse_slurm_time(text) == minutes


def test_effective_requests_sum_containers_take_the_largest_init_container_and_default_to_limits() -> None:
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
            {"resources": {"limits": {"cpu": "1", "memory": "512Mi", "nvidia.com/gpu": "2"}}},
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "3", "memory": "100Mi"}}}],
        "overhead": {"memory": "1Mi"},
    }
    assert pod_resources(spec) == PodResources(cpu_millis=3000, memory_bytes=(1024 + 512 + 1) * 2**20, gpus=2)


def _pod(**annotations: str) -> PodView:
    return PodView("ml", "web", "u1", 0.0, annotations=annotations, resources=PodResources(250, 10 * 2**20 + 1, 0))


def test_a_pod_without_requests_still_takes_one_cpu_and_a_mebibyte() -> None:
    assert build_request([PodView("ml", "p", "u", 0.0)], {}) == JobRequest(nodes=1, cpus_per_task=1, memory_mib=1)


@pytest.mark.parametrize(
    ("annotations", "needle"),
    [
        ({keys.NICE: "x"}, "not an integer"),
        ({keys.NICE: "-2147483646"}, "outside"),
        ({keys.PRIORITY: "0"}, "outside"),
        ({keys.PARTITION: "a b"}, "not a Slurm name"),
        ({keys.TIME_LIMIT: "1:99"}, "not a Slurm time"),
    ],
)
def test_bad_annotations_say_which_and_why(annotations: dict[str, str], needle: str) -> None:
    outcome = build_request([_pod(**annotations)], {})
    assert isinstance(outcome, Invalid) and needle in outcome.message


def test_unlimited_leaves_the_partition_limit() -> None:
    outcome = build_request([_pod(**{keys.TIME_LIMIT: "UNLIMITED"})], {})
    assert isinstance(outcome, JobRequest) and outcome.time_limit is None


def test_the_submit_body_carries_marker_shape_and_settings() -> None:
    request = JobRequest(
        nodes=2, cpus_per_task=3, memory_mib=2048, gpus=1, gpu_type="h100", partition="gpu", qos="high",
        account="research", time_limit=90, nice=10, priority=5000,
    )  # fmt: skip
    job = submit_body(request, Marker("group", "ml", "train"))["job"]
    assert job["name"] == job["comment"] == "sunk-group:ml/train"
    assert job["script"].startswith("#!/bin/bash\n") and "sleep infinity" in job["script"]
    assert job["environment"] == ["PATH=/usr/bin:/bin"]
    assert (job["nodes"], job["tasks"], job["tasks_per_node"], job["cpus_per_task"]) == ("2", 2, 1, 3)
    assert job["memory_per_node"] == {"set": True, "infinite": False, "number": 2048}
    assert job["tres_per_node"] == "gres/gpu:h100:1"
    assert (job["partition"], job["qos"], job["account"], job["nice"]) == ("gpu", "high", "research", 10)
    assert job["time_limit"] == {"set": True, "infinite": False, "number": 90}
    assert job["priority"] == {"set": True, "infinite": False, "number": 5000}
    assert job["requeue"] is False
    plain = submit_body(JobRequest(nodes=1, cpus_per_task=1, memory_mib=1), Marker("pod", "ml", "p", "u-1"))["job"]
    assert not {"tres_per_node", "partition", "qos", "account", "time_limit", "nice", "priority"} & plain.keys()
    assert "excluded_nodes" not in plain
    assert job["constraints"] == plain["constraints"] == "sunk_shared"  # never an exclusive NodeSet's node
    rerouted = JobRequest(nodes=1, cpus_per_task=1, memory_mib=1, exclude=("cpu-0", "cpu-1"))
    assert submit_body(rerouted, Marker("pod", "ml", "p", "u-1"))["job"]["excluded_nodes"] == ["cpu-0", "cpu-1"]


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ("sunk-pod:ml/web-0/0f3c-9a", Marker("pod", "ml", "web-0", "0f3c-9a")),
        ("sunk-group:ml/train", Marker("group", "ml", "train")),
        ("sunk-pod:ml/web", None),
        ("sunk-group:ml/train/abc", None),
        ("submitted-via-sunk", None),
        ("", None),
    ],
)
def test_markers_round_trip_and_foreign_comments_are_ignored(text: str, marker: Marker | None) -> None:
    assert Marker.parse(text) == marker
    if marker is not None:
        assert marker.text == text


def test_job_view_reads_v0042_jobs_and_skips_foreign_ones() -> None:
    raw = {
        "job_id": 12,
        "name": "x",
        "comment": "sunk-pod:ml/web/u-1",
        "job_state": ["RUNNING", "COMPLETING"],
        "nodes": "cpu-[0-1]",
        "state_reason": "None",
        "submit_time": {"set": True, "infinite": False, "number": 100},
        "start_time": {"set": True, "infinite": False, "number": 160},
    }
    view = job_view(raw)
    assert view is not None
    assert (view.job_id, view.state, view.nodes, view.start_time) == (12, "RUNNING", ("cpu-0", "cpu-1"), 160.0)
    assert not view.running and not view.active  # completing: it is ending
    assert job_view({**raw, "comment": "submitted-via-sunk", "name": "batch"}) is None
    assert view.excluded == ()
    # Where earlier placements did not fit: slurmrestd answers a hostlist.
    assert job_view({**raw, "excluded_nodes": "cpu-[0-1],gpu-3"}).excluded == ("cpu-0", "cpu-1", "gpu-3")  # type: ignore[union-attr]


def test_node_map_comes_from_live_slurmd_pods() -> None:
    def slurmd(host: str, node: str, **meta: object) -> dict[str, object]:
        labels = {keys.NODESET: "cpu"}
        return {"metadata": {"name": host, "labels": labels, **meta}, "spec": {"hostname": host, "nodeName": node}}

    pods = [slurmd("cpu-0", "k8s-a"), slurmd("cpu-1", "k8s-b", deletionTimestamp="2026-01-01T00:00:00Z")]
    pods.append({"metadata": {"name": "web"}, "spec": {"hostname": "web", "nodeName": "k8s-c"}})
    assert node_map(pods) == {"cpu-0": "k8s-a"}


@pytest.mark.parametrize(
    ("nodes", "detail", "want"),
    [
        ("gpu-0", ["gpu:h100:2(IDX:0-1)"], {"gpu-0": (0, 1)}),
        ("gpu-[0-1]", ["gpu:h100:1(IDX:3)", "gpu:h100:3(IDX:0,2,5)"], {"gpu-0": (3,), "gpu-1": (0, 2, 5)}),
        ("gpu-0", ["gpu:2(IDX:0-1),shard:h100:1(0/2,1/2)"], {"gpu-0": (0, 1)}),
        ("gpu-0", ["shard:h100:1(IDX:0)"], {}),  # not a GPU of its own
        ("cpu-0", [], {}),
        ("gpu-0", ["gpu:h100:0(IDX:N/A)"], {}),
    ],
)
def test_gpu_indices_come_from_gres_detail(nodes: str, detail: list[str], want: dict[str, tuple[int, ...]]) -> None:
    raw = {"job_id": 12, "comment": "sunk-pod:ml/web/u-1", "job_state": ["RUNNING"], "nodes": nodes}
    view = job_view({**raw, "gres_detail": detail})
    assert view is not None and view.gpu_indices == want


def test_exclusive_nodes_come_from_the_slurmd_pods_resource_mode_label() -> None:
    def slurmd(host: str, mode: str | None) -> dict[str, object]:
        labels = {keys.NODESET: "x", **({keys.RESOURCE_MODE: mode} if mode else {})}
        return {"metadata": {"name": host, "labels": labels}, "spec": {"hostname": host, "nodeName": f"k8s-{host}"}}

    pods = [slurmd("cpu-0", "exclusive"), slurmd("gpu-0", "shared"), slurmd("old-0", None)]
    assert exclusive_nodes(pods) == frozenset({"cpu-0"})


def test_gpus_counted_by_slurm_alone_through_the_annotation() -> None:
    outcome = build_request([_pod(**{keys.GPUS: "2", keys.GPU_TYPE: "h100"})], {})
    assert isinstance(outcome, JobRequest) and (outcome.gpus, outcome.gpu_type) == (2, "h100")
    assert submit_body(outcome, Marker("pod", "ml", "web", "u1"))["job"]["tres_per_node"] == "gres/gpu:h100:2"


@pytest.mark.parametrize(
    ("value", "needle"), [("0", "outside 1..64"), ("65", "outside 1..64"), ("two", "not an integer")]
)
def test_bad_gpu_annotations_say_why(value: str, needle: str) -> None:
    outcome = build_request([_pod(**{keys.GPUS: value})], {})
    assert isinstance(outcome, Invalid) and needle in outcome.message


def test_the_gpu_annotation_and_a_device_plugin_request_are_not_both_allowed() -> None:
    pod = PodView("ml", "p", "u", 0.0, annotations={keys.GPUS: "1"}, resources=PodResources(1000, 2**20, 1))
    outcome = build_request([pod], {})
    assert isinstance(outcome, Invalid) and "both set" in outcome.message
