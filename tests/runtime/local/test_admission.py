"""The local API server's mutating webhooks: matching alone (rules, selectors, order), the answer
read alone, then the store calling sunk's real webhook process code over HTTPS with a certificate
from the key generator: a listed namespace's pod patched, another's untouched, a stopped webhook
refusing the create under failurePolicy Fail and passed over under Ignore, a caBundle of another CA
refused."""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sunk.runtime.keygen.values import tls
from sunk.runtime.local.admission import (
    Attributes,
    CallFailed,
    Webhooks,
    applies,
    failure,
    ordered,
    outcome,
    review_request,
    rule_matches,
)
from sunk.runtime.local.store import ApiError, Store
from sunk.runtime.webhook.admission import parse_namespaces, review
from sunk.runtime.webhook.server import Certificate, WebhookServer

POD = Attributes("CREATE", "", "v1", "pods", "Pod", True, "team", "p")
RULE = {
    "apiGroups": [""],
    "apiVersions": ["v1"],
    "operations": ["CREATE"],
    "resources": ["pods"],
    "scope": "Namespaced",
}


@pytest.mark.parametrize(
    ("change", "attrs", "matches"),
    [
        ({}, POD, True),
        ({"operations": ["UPDATE"]}, POD, False),
        ({"operations": ["*"]}, POD, True),
        ({"apiGroups": ["apps"]}, POD, False),
        ({"apiVersions": ["v2"]}, POD, False),
        ({"resources": ["deployments"]}, POD, False),
        ({"resources": ["*"]}, POD, True),
        ({"resources": ["pods/status"]}, POD, False),
        ({"resources": ["pods/*"]}, Attributes("CREATE", "", "v1", "pods", "Pod", True, "t", "p", "status"), True),
        ({"resources": ["*"]}, Attributes("CREATE", "", "v1", "pods", "Pod", True, "t", "p", "binding"), False),
        ({"resources": ["*/*"]}, Attributes("CREATE", "", "v1", "pods", "Pod", True, "t", "p", "binding"), True),
        ({"scope": "Cluster"}, POD, False),
        ({"scope": "*"}, POD, True),
    ],
)
def test_rules_match_operations_groups_versions_resources_and_scope(
    change: dict[str, Any], attrs: Attributes, matches: bool
) -> None:
    assert rule_matches({**RULE, **change}, attrs) is matches


def test_selectors_namespace_then_object() -> None:
    listed = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team"]}]}
    hook = {"rules": [RULE], "namespaceSelector": listed}
    assert applies(hook, POD, {"kubernetes.io/metadata.name": "team"}, {})
    assert not applies(hook, POD, {"kubernetes.io/metadata.name": "kube-system"}, {})
    assert not applies({**hook, "rules": []}, POD, {"kubernetes.io/metadata.name": "team"}, {})
    only = {**hook, "objectSelector": {"matchLabels": {"app": "vllm"}}}
    assert applies(only, POD, {"kubernetes.io/metadata.name": "team"}, {"app": "vllm"})
    assert not applies(only, POD, {"kubernetes.io/metadata.name": "team"}, {"app": "other"})
    node = Attributes("CREATE", "", "v1", "nodes", "Node", False, "", "n")
    anywhere = {"rules": [{**RULE, "resources": ["nodes"], "scope": "*"}], "namespaceSelector": listed}
    assert applies(anywhere, node, {}, {})  # a cluster-scoped object is never excluded by namespace


def test_configurations_are_called_by_name_then_in_order() -> None:
    confs = [
        {"metadata": {"name": "b"}, "webhooks": [{"name": "b1"}, {"name": "b2"}]},
        {"metadata": {"name": "a"}, "webhooks": [{"name": "a1"}]},
    ]
    assert [h["name"] for _, h in ordered(confs)] == ["a1", "b1", "b2"]


def _answer(uid: str, **response: Any) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": uid, **response}}


def test_an_answer_patches_refuses_or_fails() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"containers": []}}
    patch = base64.b64encode(json.dumps([{"op": "add", "path": "/spec/schedulerName", "value": "s"}]).encode()).decode()
    assert outcome("h", _answer("u", allowed=True, patchType="JSONPatch", patch=patch), "u", pod)["spec"] == {
        "containers": [],
        "schedulerName": "s",
    }
    assert "schedulerName" not in pod["spec"]  # the caller's object is not changed in place
    assert outcome("h", _answer("u", allowed=True), "u", pod) is pod
    with pytest.raises(ApiError, match='admission webhook "h" denied the request: no GPUs') as refused:
        outcome(
            "h", _answer("u", allowed=False, status={"code": 422, "reason": "Invalid", "message": "no GPUs"}), "u", pod
        )
    assert refused.value.code == 422
    for bad, why in [
        (_answer("other", allowed=True), "expected response.uid"),
        ({**_answer("u", allowed=True), "apiVersion": "admission.k8s.io/v1beta1"}, "expected admission.k8s.io/v1"),
        (_answer("u", allowed=True, patchType="MergePatch", patch=patch), "only JSONPatch"),
        (_answer("u", allowed=True, patchType="JSONPatch", patch="not base64!"), "can't be applied"),
        ({"kind": "Status"}, "not an AdmissionReview"),
    ]:
        with pytest.raises(CallFailed, match=why):
            outcome("h", bad, "u", pod)
    err = CallFailed("timeout")
    refusal = failure({}, "h", err)
    assert refusal is not None and refusal.code == 500 and 'failed calling webhook "h": timeout' in refusal.message
    assert failure({"failurePolicy": "Ignore"}, "h", err) is None


def test_the_review_carries_the_request() -> None:
    body = review_request(POD, {"metadata": {"name": "p"}}, "u1", "admin")
    request = body["request"]
    assert body["apiVersion"] == "admission.k8s.io/v1" and request["uid"] == "u1"
    assert request["resource"] == {"group": "", "version": "v1", "resource": "pods"} and request["namespace"] == "team"
    assert request["operation"] == "CREATE" and request["object"] == {"metadata": {"name": "p"}}


# -- the store calling sunk's webhook over HTTPS -----------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """sunk's webhook (its review and HTTPS server) on 127.0.0.1 with a certificate the key
    generator made for the Service's name, and a store whose Service selects a ready pod there."""
    made = tls(["hook.sunk.svc", "hook.sunk", "hook"], tmp_path)
    for key, value in made.items():
        (tmp_path / key).write_bytes(value)
    port = _free_port()
    namespaces = parse_namespaces('{"team": {"account": "serving"}}')
    server = WebhookServer(("127.0.0.1", port), Certificate(tmp_path / "tls.crt", tmp_path / "tls.key"),
                           lambda body: review(body, namespaces, "sunk-scheduler"))  # fmt: skip
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    store = Store()
    for ns in ("sunk", "team", "other"):
        store.create(store.resource("v1/namespaces"), None, {"metadata": {"name": ns}})
    store.create(store.resource("v1/services"), "sunk", {"metadata": {"name": "hook"}, "spec": {
        "selector": {"app": "hook"}, "ports": [{"port": 443, "targetPort": "webhook"}]}})  # fmt: skip
    pods = store.resource("v1/pods")
    store.create(pods, "sunk", {"metadata": {"name": "hook-0", "labels": {"app": "hook"}}, "spec": {
        "containers": [{"name": "w", "ports": [{"name": "webhook", "containerPort": port}]}]}})  # fmt: skip
    ready = {"podIP": "127.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]}
    store.patch(pods, "sunk", "hook-0", "merge", {"status": ready}, "status")
    listed = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team"]}]}
    hook = {
        "name": "pods.sunk.dev",
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "timeoutSeconds": 5,
        "namespaceSelector": listed,
        "rules": [RULE],
        "clientConfig": {
            "service": {"namespace": "sunk", "name": "hook", "path": "/mutate", "port": 443},
            "caBundle": base64.b64encode(made["ca.crt"]).decode(),
        },
    }
    configurations = store.resource("admissionregistration.k8s.io/v1/mutatingwebhookconfigurations")
    store.create(configurations, None, {"metadata": {"name": "sunk"}, "webhooks": [hook]})
    store.admission.append(Webhooks(store))
    try:
        yield {"store": store, "server": server, "configurations": configurations, "hook": hook}
    finally:
        server.shutdown()
        server.server_close()


def _pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}}


def test_a_listed_namespaces_pod_is_patched_and_another_is_untouched(served: dict[str, Any]) -> None:
    store: Store = served["store"]
    pods = store.resource("v1/pods")
    made = store.create(pods, "team", _pod("a"))
    assert made["spec"]["schedulerName"] == "sunk-scheduler"
    assert made["metadata"]["annotations"]["slurm.sunk.dev/account"] == "serving"
    assert store.get(pods, "team", "a")["spec"]["schedulerName"] == "sunk-scheduler"
    assert "schedulerName" not in store.create(pods, "other", _pod("b"))["spec"]
    with pytest.raises(ApiError, match=r"denied the request: sunk: .*account") as refused:
        store.create(
            pods, "team", {**_pod("c"), "metadata": {"name": "c", "annotations": {"slurm.sunk.dev/account": "x"}}}
        )
    assert refused.value.code == 422 and store.find(pods, "team", "c") is None


def test_a_stopped_webhook_refuses_under_fail_and_is_passed_over_under_ignore(served: dict[str, Any]) -> None:
    store: Store = served["store"]
    pods = store.resource("v1/pods")
    served["server"].shutdown()
    served["server"].server_close()
    with pytest.raises(ApiError, match=r'failed calling webhook "pods\.sunk\.dev": failed to call webhook') as refused:
        store.create(pods, "team", _pod("a"))
    assert refused.value.code == 500 and store.find(pods, "team", "a") is None
    store.patch(
        pods, "sunk", "hook-0", "merge", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, "status"
    )
    with pytest.raises(ApiError, match='no endpoints available for service "hook"'):
        store.create(pods, "team", _pod("a"))
    ignore = {**served["hook"], "failurePolicy": "Ignore"}
    store.patch(served["configurations"], None, "sunk", "merge", {"webhooks": [ignore]})
    assert "schedulerName" not in store.create(pods, "team", _pod("a"))["spec"]


def test_a_certificate_the_ca_bundle_does_not_trust_is_refused(served: dict[str, Any], tmp_path: Path) -> None:
    store: Store = served["store"]
    other = tls(["hook.sunk.svc"], tmp_path)["ca.crt"]
    wrong = {
        **served["hook"],
        "clientConfig": {**served["hook"]["clientConfig"], "caBundle": base64.b64encode(other).decode()},
    }
    store.patch(served["configurations"], None, "sunk", "merge", {"webhooks": [wrong]})
    with pytest.raises(ApiError, match="CERTIFICATE_VERIFY_FAILED"):
        store.create(store.resource("v1/pods"), "team", _pod("a"))
