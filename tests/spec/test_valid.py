"""The other side of the rules: what they must accept, and the defaults they fill in."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sunk.spec import INSTANCE_TYPES, ClusterSpec, SpecError, load_spec
from sunk.spec.base import slurm_seconds
from sunk.spec.capacity import kube_reserved_cpu_m, kube_reserved_memory_mib
from sunk.stackfile import list_stacks, load_stack
from tests.support.specs import MINIMAL, build_spec
from tests.support.stacks import FIXTURE_STACKS


def spec(**changes: Any) -> ClusterSpec:
    """MINIMAL with top-level sections replaced."""
    if (changes.get("topology") or {}).get("plugin") == "block":
        changes.setdefault("slurm", {"version": "24.11"})  # the release block topology runs on
    return build_spec(**changes)


def test_defaults() -> None:
    s = spec()
    assert s.ns == "acme-research"
    assert s.nodesets[0].desired_replicas == 1
    assert s.auth.type == "munge" and s.auth.key.generate and s.auth.key.existing_secret is None
    assert s.scheduling.preempt_type == "qos" and s.accounting.enabled and s.accounting.external is None
    assert s.topology.plugin == "none" and not s.pyxis.enabled


def test_existing_secret_alone_means_no_generation() -> None:
    s = spec(auth={"key": {"existingSecret": {"name": "k", "key": "munge.key"}}})
    assert s.auth.key.generate is False
    assert s.auth.key.existing_secret is not None and s.auth.key.existing_secret.name == "k"


@pytest.mark.parametrize("value", [1, 12, "1%", "10%", "100%"])
def test_max_unavailable_accepts_counts_and_percentages(value: int | str) -> None:
    ns = {**MINIMAL["nodesets"][0], "updateStrategy": {"maxUnavailable": value}}
    assert spec(nodesets=[ns]).nodesets[0].update_strategy.max_unavailable == value


def test_all_matching_nodes_bounds_max_node_count() -> None:
    ns = {**MINIMAL["nodesets"][0], "mode": "all-matching-nodes", "maxNodes": 40}
    s = spec(nodesets=[ns])
    assert s.nodesets[0].desired_replicas is None and s.nodesets[0].node_bound == 40


def test_default_time_may_equal_max_time() -> None:
    part = {**MINIMAL["partitions"][0], "maxTime": "1-00:00:00", "defaultTime": "24:00:00"}
    assert spec(partitions=[part]).partitions[0].default_time == "24:00:00"


def test_normal_qos_always_exists() -> None:
    part = {**MINIMAL["partitions"][0], "allowQos": ["normal"]}
    assert spec(partitions=[part]).partitions[0].allow_qos == ["normal"]


def test_zero_replicas_is_a_valid_scaled_down_nodeset() -> None:
    ns = {**MINIMAL["nodesets"][0], "replicas": 0}
    assert spec(nodesets=[ns]).nodesets[0].desired_replicas == 0


def test_replicas_mode_bound_is_max_nodes_so_scaling_keeps_slurm_conf() -> None:
    two, five = ({**MINIMAL["nodesets"][0], "replicas": n} for n in (2, 5))
    assert spec(nodesets=[two]).nodesets[0].node_bound == spec(nodesets=[five]).nodesets[0].node_bound == 256


def test_pod_name_limit_is_exact() -> None:
    # The last pod, <20 chars>-<40 chars>-9, is exactly 63 characters: allowed (64 is refused in test_invalid).
    name = "n" * 40
    ns = {**MINIMAL["nodesets"][0], "name": name, "replicas": 10, "maxNodes": 10}
    s = spec(name="c" * 20, nodesets=[ns], partitions=[{"name": "p", "nodesets": [name]}])
    assert len(f"{s.name}-{name}-9") == 63


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("UNLIMITED", float("inf")),
        ("INFINITE", float("inf")),
        ("90", 5400),
        ("05:30", 330),
        ("12:00:00", 43200),
        ("2-12", 216000),
        ("2-12:30", 217800),
        ("1-00:00:01", 86401),
    ],
)
def test_slurm_seconds(value: str, seconds: float) -> None:
    assert slurm_seconds(value) == seconds


def test_every_stack_loads() -> None:
    stacks = list_stacks(FIXTURE_STACKS)
    assert stacks == ["acme-dev", "acme-prod", "globex-dev", "globex-prod"]
    loaded = {name: load_stack(name, FIXTURE_STACKS) for name in stacks}
    assert loaded["acme-dev"].deploy_operator and loaded["acme-prod"].deploy_operator
    assert not loaded["globex-dev"].deploy_operator and not loaded["globex-prod"].deploy_operator
    assert loaded["globex-prod"].spec.auth.key.generate is False
    assert loaded["acme-prod"].spec.topology.label_keys[0] == "network.acme.example/fabric"


def test_def_mem_per_cpu_defaults_to_the_smallest_share_of_the_partitions_nodesets() -> None:
    nodesets = [MINIMAL["nodesets"][0], {"name": "big", "cpus": 8, "memoryMib": 65536}]
    s = spec(nodesets=nodesets, partitions=[{"name": "all", "nodesets": ["cpu", "big"]}])
    assert s.partitions[0].def_mem_per_cpu is None and s.def_mem_per_cpu(s.partitions[0]) == 1024
    # Up to the roomiest nodeset's share is allowed: whole-node jobs without --mem fit there.
    given = spec(nodesets=nodesets, partitions=[{"name": "all", "nodesets": ["cpu", "big"], "defMemPerCpu": 8192}])
    assert given.def_mem_per_cpu(given.partitions[0]) == 8192
    # DefMemPerGPU coexists with DefMemPerCPU (measured on 24.11): defMemPerGpu renders it.


BLOCK = {"plugin": "block", "labelKeys": ["nvidia.com/gpu.clique"], "blockSizes": [18, 36, 72, 144, 1152]}
GB200 = {"name": "gb200", "mode": "all-matching-nodes", "cpus": 144, "memoryMib": 880_000}


@pytest.mark.parametrize(
    "partitions",
    [
        # The small NodeSet alone in its partition: no block nodes there, Slurm schedules it freely.
        [{"name": "gpu", "nodesets": ["gb200"]}, {"name": "cpu", "nodesets": ["cpu"]}],
        # Beside a NodeSet that can fill blocks, a NodeSet at least one base block large.
        [{"name": "all", "nodesets": ["gb200", "cpu"]}],
    ],
    ids=["own-partition", "large-enough"],
)
def test_block_topology_accepts_nodesets_that_can_run_jobs(partitions: list[dict[str, Any]]) -> None:
    replicas = 4 if len(partitions) == 2 else 18
    s = spec(nodesets=[{**MINIMAL["nodesets"][0], "replicas": replicas}, GB200], partitions=partitions, topology=BLOCK)
    assert s.topology.base_block_size == 18


def test_block_topology_without_sizes_or_with_only_small_nodesets_has_no_nodeset_rule() -> None:
    small = [{**MINIMAL["nodesets"][0], "replicas": 2}, {"name": "cpu2", "cpus": 4, "memoryMib": 4096, "replicas": 3}]
    both = [{"name": "all", "nodesets": ["cpu", "cpu2"]}]
    assert spec(nodesets=small, partitions=both, topology={**BLOCK, "blockSizes": [18]}).topology.plugin == "block"
    mixed = [small[0], GB200]
    parts = [{"name": "all", "nodesets": ["cpu", "gb200"]}]
    assert spec(nodesets=mixed, partitions=parts, topology={**BLOCK, "blockSizes": []}).topology.base_block_size is None


def test_kube_reserved_follows_gkes_published_formula() -> None:
    # GKE's documented examples: a 4-core Node reserves 80m; 16 GiB reserves 2.6 GiB; under 1 GiB, 255 MiB.
    assert [kube_reserved_cpu_m(n) for n in (1, 2, 4, 128)] == [60, 70, 80, 390]
    assert kube_reserved_memory_mib(16 * 1024) == 2663
    assert kube_reserved_memory_mib(512) == 255


def test_instance_type_available_is_capacity_minus_reservations_and_daemonsets() -> None:
    h100 = INSTANCE_TYPES["H100x8"].available  # the figures the capacity module docstring quotes
    assert (h100.cpu_m, h100.memory_mib, h100.gpus) == (126_610, 1_950_929, 8)
    cpu64 = INSTANCE_TYPES["CPU-64"].available  # a CPU Node has fewer DaemonSets
    assert (cpu64.cpu_m, cpu64.memory_mib) == (64_000 - 230 - 500, 256_000 - 12_043 - 100 - 1024)


def test_resource_modes_shape_the_slurmd_requests() -> None:
    gpu = {
        "name": "gpu",
        "instanceType": "H100x8",
        "cpus": 126,
        "memoryMib": 1_900_000,
        "gpus": {"type": "h100", "count": 8},
    }
    exclusive = spec(nodesets=[gpu], partitions=[{"name": "p", "nodesets": ["gpu"], "default": True}]).nodesets[0]
    assert exclusive.resource_mode == "exclusive"
    assert exclusive.slurmd_resources.requests.cpu == "126" and exclusive.slurmd_extended == {"nvidia.com/gpu": 8}
    shared_ns = {**gpu, "resourceMode": "shared"}
    shared = spec(nodesets=[shared_ns], partitions=[{"name": "p", "nodesets": ["gpu"], "default": True}]).nodesets[0]
    assert shared.slurmd_resources.requests.model_dump() == {"cpu": "500m", "memory": "1Gi"}
    assert shared.slurmd_resources.limits.model_dump() == {"cpu": None, "memory": f"{1_900_000 + 1024}Mi"}
    assert shared.slurmd_extended == {} and shared.pod_requests == (510, 1024 + 32)


def test_node_allocatable_overrides_the_instance_type() -> None:
    # A provider that reserves more than GKE: 120 CPUs for pods, so 126 no longer fits, 119 does.
    ns = {"name": "cpu", "instanceType": "CPU-192", "cpus": 119, "memoryMib": 4096}
    allocatable = {"cpu": "120", "memory": "1000Gi"}
    s = spec(nodesets=[{**ns, "nodeAllocatable": allocatable}], partitions=[{"name": "p", "nodesets": ["cpu"]}])
    assert s.nodesets[0].available is not None and s.nodesets[0].available.cpu_m == 120_000
    with pytest.raises(SpecError, match=r"cpus: 120 plus 0.01 .* at most 119 fit"):
        spec(
            nodesets=[{**ns, "cpus": 120, "nodeAllocatable": allocatable}],
            partitions=[{"name": "p", "nodesets": ["cpu"]}],
        )


def test_all_matching_nodesets_that_differ_on_a_selector_key_may_coexist() -> None:
    """Only NodeSets that could match one Node are refused (two NodeSets on one Node would fight over it): a key with different values
    (here the pool, or the architecture every pod selects) keeps them apart."""
    nodesets = [
        {"name": "a", "mode": "all-matching-nodes", "cpus": 4, "memoryMib": 4096, "nodeSelector": {"pool": "x"}},
        {"name": "b", "mode": "all-matching-nodes", "cpus": 4, "memoryMib": 4096, "nodeSelector": {"pool": "y"}},
        {"name": "c", "mode": "all-matching-nodes", "cpus": 4, "memoryMib": 4096, "architecture": "arm64",
         "nodeSelector": {"pool": "x"}},
    ]  # fmt: skip
    spec = copy.deepcopy(MINIMAL)
    spec.update({"nodesets": nodesets, "partitions": [{"name": "p", "nodesets": ["a", "b", "c"], "default": True}]})
    assert [n.name for n in load_spec(spec, "test").nodesets] == ["a", "b", "c"]
