"""The local cluster's Nodes: derived from a render (the golden renders of the demo stacks), read
from a file with errors that name the field, and how the node agent uses them (GPU device files).
Where pods land is kube-scheduler's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sunk.runtime.local import inventory
from sunk.runtime.local.container import ConfigError

from sunk import keys

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "manifests"


def _nodes(stack: str) -> dict[str, dict[str, Any]]:
    return {n["metadata"]["name"]: n for n in inventory.derive(inventory.read_render(GOLDEN / stack))}


def test_acme_dev_gets_a_system_node_and_a_pool_per_nodeset_with_a_spare() -> None:
    nodes = _nodes("acme-dev")
    assert sorted(nodes) == [
        "local-research-cpu-0", "local-research-cpu-1", "local-research-cpu-2",
        "local-research-gpu-0", "local-research-gpu-1", "local-research-gpu-2", "local-system",
    ]  # fmt: skip
    gpu = nodes["local-research-gpu-0"]
    labels = gpu["metadata"]["labels"]
    assert labels["node.kubernetes.io/instance-type"] == "H100x8"
    assert (labels["nvidia.com/gpu.present"], labels["nvidia.com/gpu.count"]) == ("true", "2")
    # what the operator's gpus.fromNodeLabels reads back as the spec's type
    from sunk.render.gres import gres_type

    assert gres_type(labels["nvidia.com/gpu.product"]) == "h100"
    assert gpu["status"]["allocatable"]["nvidia.com/gpu"] == "2"
    assert gpu["metadata"]["annotations"][keys.LOCAL_DEVICES] == "/dev/nvidia0,/dev/nvidia1"
    assert {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"} in gpu["spec"]["taints"]
    assert labels["topology.acme.example/leaf"] == "gpu" and labels["topology.acme.example/spine"] == "0"
    assert "taints" not in nodes["local-system"]["spec"]  # acme-dev places its roles nowhere in particular


def test_shared_nodes_are_tainted_where_the_render_lists_inference_namespaces() -> None:
    """acme-prod lists acme-serving (its render holds sunk's MutatingWebhookConfiguration): its
    shared NodeSet's Nodes carry slurm.sunk.dev/shared=true:NoSchedule, which its slurmd pods
    tolerate; acme-dev lists none, and its shared GPU Nodes are not tainted."""
    shared = {"key": keys.SHARED, "value": "true", "effect": "NoSchedule"}
    prod = _nodes("acme-prod")
    pools = {n["metadata"]["labels"][keys.LOCAL_POOL] for n in prod.values()}
    tainted = {n["metadata"]["labels"][keys.LOCAL_POOL] for n in prod.values() if shared in n["spec"].get("taints", [])}
    assert tainted == {"research-h100"} and tainted < pools
    dev = _nodes("acme-dev")
    assert not [n for n in dev.values() if shared in n["spec"].get("taints", [])]
    objects = inventory.read_render(GOLDEN / "acme-dev")
    webhook = {
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "w", "labels": {keys.APP_COMPONENT: "webhook"}},
    }
    with_webhook = inventory.derive([*objects, webhook])
    assert {n["metadata"]["name"] for n in with_webhook if shared in n["spec"].get("taints", [])} == {
        "local-research-gpu-0", "local-research-gpu-1", "local-research-gpu-2",
    }  # fmt: skip


def test_acme_prod_system_pool_carries_the_taint_its_roles_tolerate() -> None:
    nodes = _nodes("acme-prod")
    system = [n for n in nodes.values() if n["metadata"]["labels"][keys.LOCAL_POOL] == "system"]
    dedicated = [n for n in system if n["metadata"]["labels"].get("node-role.acme.example/slurm-system") == "true"]
    assert len(dedicated) == 1
    taints = dedicated[0]["spec"]["taints"]
    assert {"key": "node-role.acme.example/slurm-system", "value": "", "effect": "NoSchedule"} in taints


def test_gpu_devices_go_to_privileged_containers_all_and_to_requests_by_count() -> None:
    gpu = _nodes("acme-dev")["local-research-gpu-0"]
    privileged = {"name": "slurmd", "securityContext": {"privileged": True}}
    asks = {"name": "infer", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    pod = {"spec": {"containers": [privileged, asks, {"name": "plain"}]}}
    assert inventory.allocate_devices(pod, gpu, set()) == {
        "slurmd": ["/dev/nvidia0", "/dev/nvidia1"],
        "infer": ["/dev/nvidia0"],
    }
    assert inventory.allocate_devices(pod, gpu, {"/dev/nvidia0"})["infer"] == ["/dev/nvidia1"]
    assert inventory.allocate_devices(pod, _nodes("acme-dev")["local-system"], set()) == {}


def test_a_nodes_file_replaces_the_inventory(tmp_path: Path) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(
        "nodes:\n"
        "  - name: big-0\n"
        "    labels: {tier: big}\n"
        "    taints: [{key: gpu, effect: NoSchedule}]\n"
        "    capacity: {cpu: '32', memory: 128Gi, nvidia.com/gpu: '4'}\n"
        "    devices: [/dev/nvidia0, /dev/nvidia1, /dev/nvidia2, /dev/nvidia3]\n"
    )
    (big,) = inventory.from_file(path)
    assert big["metadata"]["labels"]["tier"] == "big" and big["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert big["spec"]["taints"] == [{"key": "gpu", "value": "", "effect": "NoSchedule"}]
    assert keys.LOCAL_DEVICES in big["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nodes:\n  - name: a\n    capacity: {cpu: '2'}\n", "nodes[0].capacity: memory is required"),
        ("nodes:\n  - name: a\n    capacity: {cpu: two, memory: 1Gi}\n", "cpu: 'two' is not a Kubernetes quantity"),
        ("nodes:\n  - name: A_b\n    capacity: {cpu: '2', memory: 1Gi}\n", "nodes[0].name: 'A_b' is not a DNS subdomain"),
        ("nodes:\n  - name: a\n    capacity: {cpu: '1', memory: 1Gi}\n    taints: [{key: k, effect: Sometimes}]\n",
         "nodes[0].taints[0].effect"),
        ("nodes:\n  - {name: a, capacity: {cpu: '1', memory: 1Gi}}\n  - {name: a, capacity: {cpu: '1', memory: 1Gi}}\n",
         "the name a is used twice"),
        ("nodes: []\n", "nodes: List should have at least 1 item"),
        ("nodes:\n  - name: a\n    capacity: {cpu: '1', memory: 1Gi}\n    size: big\n", "nodes[0].size: Extra inputs"),
    ],
)  # fmt: skip
def test_a_bad_nodes_file_names_the_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "nodes.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        inventory.from_file(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_compute_nodes_carry_the_label_keys_of_every_named_topology() -> None:
    from sunk.spec import load_spec
    from tests.support.nodeset_objects import nodeset_object, resource_spec

    cluster = load_spec(
        {
            "name": "topos",
            "tenant": "test",
            "nodesets": [{"name": "cpu", "replicas": 2, "cpus": 2, "memoryMib": 2048}],
            "topologies": [
                {"name": "fabric", "plugin": "tree", "labelKeys": ["ex.com/spine", "ex.com/leaf"], "default": True},
                {"name": "nvl", "plugin": "block", "labelKeys": ["nvidia.com/gpu.clique"]},
            ],
            "partitions": [{"name": "all", "nodesets": ["cpu"], "default": True, "topology": "nvl"}],
        }
    )
    pool = inventory.derive([nodeset_object(resource_spec(cluster, "cpu"), namespace="test-topos")])
    labels = [n["metadata"]["labels"] for n in pool if n["metadata"]["name"].startswith("local-topos-cpu-")]
    assert labels and all(
        (lab["ex.com/spine"], lab["ex.com/leaf"], lab["nvidia.com/gpu.clique"]) == ("0", "cpu", "cpu") for lab in labels
    )


def _spread_set(replicas: int, min_domains: int | None) -> dict[str, Any]:
    """A StatefulSet of slurmctld's shape with backups: a hard spread over hostnames."""
    constraint: dict[str, Any] = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                  "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "c"}}}  # fmt: skip
    if min_domains is not None:
        constraint["minDomains"] = min_domains
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
            "topologySpreadConstraints": [constraint]}  # fmt: skip
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "c"},
            "spec": {"replicas": replicas, "template": {"metadata": {"labels": {"app": "c"}}, "spec": spec}}}  # fmt: skip


def test_a_hard_spread_over_hostnames_gets_its_min_domains_of_system_nodes() -> None:
    names = [n["metadata"]["name"] for n in inventory.derive([_spread_set(3, 3)])]
    assert names == ["local-system", "local-system-1", "local-system-2"]
    assert [n["metadata"]["name"] for n in inventory.derive([_spread_set(3, None)])] == ["local-system"]


def test_up_makes_the_namespaces_the_render_places_objects_in_but_does_not_create() -> None:
    """acme-prod's scheduler Role and RoleBinding go to acme-serving, the team's namespace, which a
    real cluster has already: `sunk local up` makes it before applying; acme-dev names none."""
    from sunk.runtime.local.cli import outside_namespaces

    prod = outside_namespaces(inventory.read_render(GOLDEN / "acme-prod"))
    assert "acme-serving" in prod
    assert "acme-serving" not in outside_namespaces(inventory.read_render(GOLDEN / "acme-dev"))
