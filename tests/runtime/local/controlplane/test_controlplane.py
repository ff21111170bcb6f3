"""The real control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler built by
`make controlplane`) driven by the real kubectl: what the home-made API server refuses or imitates.

On demand (marker `controlplane`, `make test-controlplane`): neither `make test` nor `make check`
builds the control plane or runs these until the local cluster runs on it (issue 37)."""

from __future__ import annotations

import base64
import json
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from sunk.runtime.local.controlplane import ISSUER, ControlPlane

from sunk.manifests.nodeset_crd import nodeset_crd
from sunk.nodeset_resource import API_VERSION, KIND
from tests.support import jwts
from tests.support.controlplane import get, kubectl_run

pytestmark = pytest.mark.controlplane


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    assert shutil.which("kubectl"), "the real kubectl must be on the PATH"
    with ControlPlane(tmp_path_factory.mktemp("controlplane")) as plane:
        yield plane


def test_kubectl_create_of_the_kinds_kubectl_sends_as_protobuf(cluster: ControlPlane) -> None:
    kubectl_run(cluster, "create", "namespace", "made")
    kubectl_run(cluster, "-n", "made", "create", "configmap", "c", "--from-literal=a=1")
    kubectl_run(cluster, "-n", "made", "create", "secret", "generic", "s", "--from-literal=password=x")
    kubectl_run(cluster, "-n", "made", "create", "deployment", "d", "--image=example.invalid/x:1", "--replicas=2")
    kubectl_run(cluster, "-n", "made", "create", "job", "j", "--image=example.invalid/x:1")
    assert get(cluster, "-n", "made", "configmap", "c")["data"] == {"a": "1"}
    assert base64.b64decode(get(cluster, "-n", "made", "secret", "s")["data"]["password"]) == b"x"
    # The real Deployment and ReplicaSet controllers make the pods; the Job controller its pod.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = get(cluster, "-n", "made", "pods")["items"]
        owners = sorted(p["metadata"]["ownerReferences"][0]["kind"] for p in pods)
        if owners == ["Job", "ReplicaSet", "ReplicaSet"]:
            break
        time.sleep(1)
    assert owners == ["Job", "ReplicaSet", "ReplicaSet"]


def test_server_side_apply_owns_fields_and_reports_conflicts(cluster: ControlPlane) -> None:
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa", "namespace": "default"}}
    kubectl_run(
        cluster,
        "apply",
        "--server-side",
        "--field-manager=one",
        "-f",
        "-",
        stdin=json.dumps({**manifest, "data": {"k": "1"}}),
    )
    clash = kubectl_run(
        cluster,
        "apply",
        "--server-side",
        "--field-manager=two",
        "-f",
        "-",
        stdin=json.dumps({**manifest, "data": {"k": "2"}}),
        check=False,
    )
    assert clash.returncode != 0 and "conflict" in clash.stderr.lower()
    managers = {
        m["manager"] for m in get(cluster, "--show-managed-fields", "configmap", "ssa")["metadata"]["managedFields"]
    }
    assert "one" in managers


def _nodeset(name: str, **spec: Any) -> str:
    body = {
        "name": name,
        "cpus": 8,
        "memoryMib": 16384,
        "clusterName": "c",
        "slurmdImage": "example.invalid/slurmd:1",
        "configFiles": {},
        "authSecret": "auth",
        "jwtSecret": "jwt",
        **spec,
    }
    return json.dumps(
        {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name, "namespace": "default"}, "spec": body}
    )


def test_the_nodeset_crd_schema_rejects_a_bad_nodeset(cluster: ControlPlane) -> None:
    kubectl_run(cluster, "apply", "-f", "-", stdin=json.dumps(nodeset_crd()))
    name = nodeset_crd()["metadata"]["name"]
    # Polled, not `kubectl wait`: kubectl 1.32 fails at once on a CRD whose status has no conditions yet.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(
        c["type"] == "Established" and c["status"] == "True"
        for c in (get(cluster, "crd", name).get("status") or {}).get("conditions") or []
    ):
        time.sleep(1)
    good = kubectl_run(cluster, "apply", "-f", "-", stdin=_nodeset("good", replicas=2), check=False)
    assert good.returncode == 0, good.stderr
    bad = kubectl_run(cluster, "apply", "-f", "-", stdin=_nodeset("bad", replicas=20000, cpus="eight"), check=False)
    assert bad.returncode != 0
    assert "spec.replicas" in bad.stderr and "spec.cpus" in bad.stderr


def test_token_request_gives_a_signed_jwt_with_audience_and_expiry(cluster: ControlPlane) -> None:
    token = kubectl_run(cluster, "create", "token", "default", "--audience=slurm", "--duration=10m").stdout.strip()
    header, payload, signature = token.split(".")
    claims = jwts.claims(token)
    assert json.loads(jwts.b64(header))["alg"] == "ES256"
    assert claims["aud"] == ["slurm"] and claims["iss"] == ISSUER
    assert claims["sub"] == "system:serviceaccount:default:default"
    assert 540 <= claims["exp"] - claims["iat"] <= 600
    pub = cluster.folder / "pki" / "sa.pub"
    assert jwts.verifies(token, pub)
    assert not jwts.verifies(f"{header}.{payload}x.{signature}", pub)


def test_pod_security_rejects_a_privileged_pod_in_a_restricted_namespace(cluster: ControlPlane) -> None:
    kubectl_run(cluster, "create", "namespace", "locked")
    kubectl_run(cluster, "label", "namespace", "locked", "pod-security.kubernetes.io/enforce=restricted")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "root", "namespace": "locked"},
        "spec": {
            "containers": [{"name": "c", "image": "example.invalid/x:1", "securityContext": {"privileged": True}}]
        },
    }
    denied = kubectl_run(cluster, "apply", "-f", "-", stdin=json.dumps(pod), check=False)
    assert denied.returncode != 0 and 'violates PodSecurity "restricted:latest"' in denied.stderr
    assert "privileged" in denied.stderr


def test_the_scheduler_binds_a_pod_to_a_node(cluster: ControlPlane) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}}}
    kubectl_run(cluster, "apply", "-f", "-", stdin=json.dumps(node))
    capacity = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    status = {
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "test"}],
        }
    }
    kubectl_run(cluster, "patch", "node", "n1", "--subresource=status", "--type=merge", "-p", json.dumps(status))
    pod = yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "placed", "namespace": "default"},
            "spec": {
                "containers": [{"name": "c", "image": "example.invalid/x:1", "resources": {"requests": {"cpu": "1"}}}],
                # A Node created through the API starts tainted not-ready until a kubelet heartbeats.
                "tolerations": [{"operator": "Exists"}],
            },
        }
    )
    kubectl_run(cluster, "apply", "-f", "-", stdin=pod)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not get(cluster, "pod", "placed")["spec"].get("nodeName"):
        time.sleep(1)
    assert get(cluster, "pod", "placed")["spec"]["nodeName"] == "n1"
    events = get(cluster, "events", "--field-selector=involvedObject.name=placed")["items"]
    assert any(e["reason"] == "Scheduled" and e.get("reportingComponent") == "default-scheduler" for e in events)
