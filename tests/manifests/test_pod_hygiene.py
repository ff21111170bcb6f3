"""Drift between the slurmd pod builder and the other pods: rules every pod sunk makes
obeys, checked on every shipped stack's objects and slurmd pods, and at the longest names the
spec allows."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.config import config_maps
from sunk.manifests.nodeset_pod import headless_service, nodeset_pod
from sunk.spec.cluster import ClusterSpec
from sunk.stackfile import list_stacks, load_stack
from tests.support.nodeset_objects import resource_spec
from tests.support.stacks import FIXTURE_STACKS

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _slurmd_pods(spec: ClusterSpec) -> list[dict[str, Any]]:
    keys = {cm["metadata"]["name"]: list(cm["data"]) for cm in config_maps(spec)}
    pods = []
    for ns in spec.nodesets:
        rs = resource_spec(spec, ns.name)
        where: dict[str, Any] = {"ordinal": 0} if rs.mode == "replicas" else {"kube_node": "node-a"}
        pods.append(nodeset_pod(rs, namespace=spec.ns, config_keys=keys, owner={"name": "n", "uid": "u"}, **where))
    return pods


def _pod_specs(spec: ClusterSpec) -> Iterator[tuple[str, dict[str, Any]]]:
    for m in [*cluster_manifests(spec), *_slurmd_pods(spec)]:
        name = f"{m['kind']}/{m['metadata']['name']}"
        if m["kind"] == "Pod":
            yield name, m["spec"]
        elif m["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            yield name, m["spec"]["template"]["spec"]


@pytest.mark.parametrize("stack", list_stacks(FIXTURE_STACKS))
def test_every_container_of_every_pod_has_a_seccomp_profile(stack: str) -> None:
    missing = []
    for name, pod in _pod_specs(load_stack(stack, FIXTURE_STACKS).spec):
        pod_level = (pod.get("securityContext") or {}).get("seccompProfile")
        for c in [*pod.get("initContainers", []), *pod["containers"]]:
            if not ((c.get("securityContext") or {}).get("seccompProfile") or pod_level):
                missing.append(f"{name}: {c['name']}")
    assert not missing, missing


def test_volume_names_stay_valid_and_equal_across_roles_at_the_longest_allowed_name() -> None:
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    longest = "v" + "x" * 62  # a sharedVolumes[].name may be a full 63-character DNS label
    volume = {
        "name": longest,
        "mountPath": "/data",
        "existingClaim": "data",
        "mountOn": ["login", "controller", "compute"],
    }
    raw = spec.model_dump(by_alias=True, exclude_unset=True, mode="json")
    spec = ClusterSpec.model_validate({**raw, "sharedVolumes": [volume]}, by_alias=True, by_name=False)
    names: dict[str, set[str]] = {}
    for name, pod in _pod_specs(spec):
        for v in pod.get("volumes", []):
            assert DNS_LABEL.fullmatch(v["name"]), f"{name}: volume {v['name']!r} is not a DNS label"
            if (v.get("persistentVolumeClaim") or {}).get("claimName") == "data":
                names.setdefault(v["name"], set()).add(name)
    assert len(names) == 1, names  # one name for the same volume on every role
    assert len(next(iter(names.values()))) >= 3


def test_everything_the_operator_creates_is_owned_the_same_way() -> None:
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    rs = resource_spec(spec, "cpu")
    owner = {"name": "research-cpu", "uid": "u-1"}
    pod = _slurmd_pods(spec)[0]
    service = headless_service(rs, namespace=spec.ns, owner=owner)
    refs = [pod["metadata"]["ownerReferences"][0], service["metadata"]["ownerReferences"][0]]
    assert all(r["controller"] and r["blockOwnerDeletion"] for r in refs)
