"""Runtime trust: the operator's tenant policy (sunk/policy.py). slurmd pods are
privileged and the operator may create pods anywhere, so a NodeSet is served only in a tenant
namespace and only with allowed images and host paths; a refused NodeSet gets no pod and says
why on its status and in one Warning Event."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sunk.runtime.operator.reconcile import Reconciler

from sunk import keys
from sunk.policy import namespace_problem, pod_problems
from sunk.spec.operator import TenantPolicy
from sunk.stackfile import load_stack
from tests.support.fakes.operator import FakeKube, FakeSlurm
from tests.support.nodeset_objects import config_map_objects, nodeset_object, resource_spec
from tests.support.stacks import FIXTURE_STACKS

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
CLUSTER = load_stack("acme-dev", FIXTURE_STACKS).spec
NS = CLUSTER.ns


def world(tenant_label: bool = True, **spec: Any) -> tuple[FakeKube, Reconciler, TenantPolicy]:
    kube, slurm = FakeKube(), FakeSlurm()
    kube.namespaces[NS] = {keys.TENANT: "acme"} if tenant_label else {"team": "acme"}
    kube.add(nodeset_object(resource_spec(CLUSTER, "cpu", replicas=2, **spec), namespace=NS))
    for cm in config_map_objects(CLUSTER, namespace=NS):
        kube.add(cm)
    policy = TenantPolicy(host_paths=["/mnt/local-nvme"])
    return kube, Reconciler(kube, lambda ref: slurm, clock=lambda: NOW, policy=policy), policy


def condition(kube: FakeKube) -> dict[str, Any]:
    status = kube.nodesets[(NS, "research-cpu")].get("status") or {}
    return next((c for c in status.get("conditions") or [] if c["type"] == keys.POLICY_ALLOWED), {})


def test_a_nodeset_in_a_tenant_namespace_with_allowed_images_and_paths_gets_its_pods() -> None:
    volume = {"name": "scratch", "mountPath": "/scratch", "hostPath": "/mnt/local-nvme/jobs"}
    kube, reconciler, _ = world(volumes=[volume])
    reconciler.resync()
    assert len(kube.pods) == 2 and condition(kube) == {}


@pytest.mark.parametrize(
    ("changes", "tenant_label", "why"),
    [
        ({}, False, f"namespace acme-research has no label {keys.TENANT}"),
        ({"slurmdImage": "evil.example.com/rootkit:1"}, True, "containers slurmd: image evil.example.com/rootkit:1 is not allowed"),
        (
            {"volumes": [{"name": "etc", "mountPath": "/host-etc", "hostPath": "/etc"}]},
            True,
            "volume etc: hostPath /etc is not allowed; allowed: /mnt/local-nvme",
        ),
        (
            {"volumes": [{"name": "nvme2", "mountPath": "/n", "hostPath": "/mnt/local-nvme2"}]},
            True,
            "volume nvme2: hostPath /mnt/local-nvme2 is not allowed",
        ),
        (
            {"volumes": [{"name": "etc", "mountPath": "/host-etc", "hostPath": {"path": "/etc", "type": "Directory"}}]},
            True,
            "volume etc: hostPath /etc is not allowed; allowed: /mnt/local-nvme",
        ),
        (
            {"sidecars": [{"name": "miner", "image": {"repository": "docker.io/x/miner", "tag": "1"}}]},
            True,
            "containers miner: image docker.io/x/miner:1 is not allowed",
        ),
    ],
    ids=["namespace-not-a-tenant", "image", "host-path", "host-path-sibling", "host-path-kubernetes-form", "sidecar-image"],
)  # fmt: skip
def test_runtime_trust_a_nodeset_beyond_the_policy_gets_no_pod_and_says_why(
    changes: dict[str, Any], tenant_label: bool, why: str
) -> None:
    kube, reconciler, _ = world(tenant_label, **changes)
    reconciler.resync()
    assert not kube.pods
    cond = condition(kube)
    assert (cond["status"], cond["reason"]) == ("False", "PolicyViolation") and why in cond["message"]
    warnings = [e for e in kube.events if e["reason"] == "PolicyViolation"]
    assert len(warnings) == 1 and warnings[0]["type"] == "Warning" and why in warnings[0]["message"]
    reconciler.resync()  # nothing new to say: no second Event, no pod
    assert not kube.pods and len([e for e in kube.events if e["reason"] == "PolicyViolation"]) == 1


def test_a_refused_nodeset_keeps_the_pods_it_has_and_is_served_once_allowed() -> None:
    kube, reconciler, _ = world()
    reconciler.resync()
    assert len(kube.pods) == 2
    kube.namespaces[NS] = {}  # the administrator takes the tenant label away
    reconciler.resync()
    assert len(kube.pods) == 2 and condition(kube)["status"] == "False"  # nothing deleted without a drain
    kube.namespaces[NS] = {keys.TENANT: "acme"}
    reconciler.resync()
    assert condition(kube) == {} and len(kube.pods) == 2


def test_namespaces_unreadable_serves_nothing() -> None:
    class Forbidden(FakeKube):
        def list_namespaces(self, label: str) -> dict[str, dict[str, str]]:
            raise PermissionError("namespaces is forbidden")

    kube, slurm = Forbidden(), FakeSlurm()
    kube.add(nodeset_object(resource_spec(CLUSTER, "cpu", replicas=2), namespace=NS))
    for cm in config_map_objects(CLUSTER, namespace=NS):
        kube.add(cm)
    Reconciler(kube, lambda ref: slurm, clock=lambda: NOW, policy=TenantPolicy()).resync()
    assert not kube.pods


def test_policy_checks_are_pure_and_name_what_is_allowed() -> None:
    policy = TenantPolicy(image_prefixes=["ghcr.io/sunk-dev/", "nvcr.io/nvidia/"], host_paths=["/data"])
    pod = {
        "spec": {
            "initContainers": [{"name": "init", "image": "ghcr.io/sunk-dev/slurmd:1"}],
            "containers": [{"name": "dcgm", "image": "nvcr.io/nvidia/dcgm:4"}, {"name": "x", "image": "ghcr.io/other/x"}],
            "volumes": [{"name": "a", "hostPath": {"path": "/data/x"}}, {"name": "b", "hostPath": {"path": "/data/../etc"}}],
        }
    }  # fmt: skip
    assert pod_problems(policy, pod) == [
        "containers x: image ghcr.io/other/x is not allowed; allowed prefixes: ghcr.io/sunk-dev/, nvcr.io/nvidia/",
        "volume b: hostPath /data/../etc is not allowed; allowed: /data",
    ]
    assert namespace_problem(TenantPolicy(namespace_label=None), "any", None) is None
    assert namespace_problem(policy, "t", {keys.TENANT: ""}) is None


def test_an_image_prefix_is_a_path_so_a_sibling_registry_is_not_admitted() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="ending in '/'"):
        TenantPolicy(image_prefixes=["ghcr.io/acme"])
    policy = TenantPolicy(image_prefixes=["ghcr.io/acme/"])
    pod = {"spec": {"containers": [{"name": "x", "image": "ghcr.io/acme-evil/x:1"}]}}
    assert pod_problems(policy, pod)


def test_a_namespace_labelled_by_an_older_release_is_served() -> None:
    from sunk import keys

    kube, reconciler, _ = world(tenant_label=False)
    kube.namespaces[NS] = {keys.LEGACY[keys.TENANT]: "acme"}
    reconciler.resync()
    assert len(kube.pods) == 2 and condition(kube) == {}


def test_pod_settings_reach_the_pods_the_operator_creates_within_the_policy() -> None:
    """Per-role settings of a NodeSet (sunk.spec.pod), any volume source among them: the operator's
    pods carry them, and the policy, which sees every volume, lets NFS and memory emptyDir through."""
    kube, reconciler, _ = world(
        volumes=[
            {"name": "dshm", "mountPath": "/dev/shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
            {"name": "tools", "mountPath": "/opt/tools", "readOnly": True, "nfs": {"server": "10.0.0.5", "path": "/t"}},
            {"name": "scratch", "mountPath": "/scratch", "hostPath": {"path": "/mnt/local-nvme/jobs"}},
        ],
        imagePullSecrets=["acme-registry"],
        priorityClassName="hpc-high",
        podLabels={"pool": "cpu"},
        env=[{"name": "OMP_NUM_THREADS", "value": "1"}],
    )
    reconciler.resync()
    assert len(kube.pods) == 2 and condition(kube) == {}
    pod = next(iter(kube.pods.values()))
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    assert volumes["tools"]["nfs"] == {"server": "10.0.0.5", "path": "/t"}
    assert pod["spec"]["imagePullSecrets"] == [{"name": "acme-registry"}]
    assert pod["spec"]["priorityClassName"] == "hpc-high" and pod["metadata"]["labels"]["pool"] == "cpu"
    slurmd = pod["spec"]["containers"][0]
    assert {"name": "OMP_NUM_THREADS", "value": "1"} in slurmd["env"]
    assert {"name": "tools", "mountPath": "/opt/tools", "readOnly": True} in slurmd["volumeMounts"]


def test_a_hand_written_nodeset_with_a_bad_volume_source_gets_no_pod_and_says_which_field() -> None:
    """The CRD keeps Kubernetes' own types free-form; the operator's model checks them against the
    Kubernetes schema, so a NodeSet written without sunk's stack tooling is refused the same way."""
    kube, reconciler, _ = world()
    obj = kube.nodesets[(NS, "research-cpu")]
    obj["spec"]["volumes"] = [{"name": "tools", "mountPath": "/opt/tools", "nfs": {"path": "/t"}}]
    reconciler.resync()
    assert not kube.pods
    status = kube.nodesets[(NS, "research-cpu")]["status"]
    valid = next(c for c in status["conditions"] if c["type"] == keys.SPEC_VALID)
    assert valid["status"] == "False" and "volumes[0].nfs.server: required field is missing" in valid["message"]
