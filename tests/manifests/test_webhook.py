"""The webhook part as rendered: only with listed namespaces; its configuration reaches exactly
those namespaces' pods and carries no CA; the scheduler is granted pods there and nowhere else;
only the API server's addresses reach the webhook's port."""

from __future__ import annotations

import json
from typing import Any

from sunk.runtime.webhook.admission import NamespaceDefaults, parse_namespaces

from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.meta import Manifest
from sunk.manifests.network import network_policies
from sunk.manifests.webhook import FAILURE_POLICY, webhook_manifests
from sunk.spec.errors import load_spec

SPEC: dict[str, Any] = {
    "name": "research",
    "tenant": "acme",
    "nodesets": [
        {
            "name": "gpu",
            "cpus": 16,
            "memoryMib": 65536,
            "gpus": {"type": "h100", "count": 4},
            "resourceMode": "shared",
            "replicas": 2,
        }
    ],
    "partitions": [{"name": "serve", "nodesets": ["gpu"], "default": True}],
    "qos": [{"name": "inference"}],
    "accounts": [{"name": "vision", "qos": ["inference"]}, {"name": "speech"}],
    "network": {"apiServerCidrs": ["10.0.0.1/32"], "apiServerPorts": [6443]},
    "inference": {
        "namespaces": [
            {"name": "team-vision", "account": "vision", "qos": "inference"},
            {"name": "team-speech", "account": "speech", "partition": "serve"},
        ]
    },
}


def _by(objs: list[Manifest], kind: str) -> list[Manifest]:
    return [o for o in objs if o["kind"] == kind]


def test_nothing_without_namespaces() -> None:
    spec = load_spec({**SPEC, "inference": {}})
    assert webhook_manifests(spec) == []
    names = {o["metadata"]["name"] for o in cluster_manifests(spec)}
    assert not any("webhook" in n for n in names)


def test_configuration_reaches_only_the_listed_namespaces_and_holds_no_ca() -> None:
    (config,) = _by(webhook_manifests(load_spec(SPEC)), "MutatingWebhookConfiguration")
    (hook,) = config["webhooks"]
    assert hook["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-speech", "team-vision"]}
        ]
    }
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert hook["failurePolicy"] == FAILURE_POLICY == "Fail" and hook["timeoutSeconds"] == 5
    assert "caBundle" not in hook["clientConfig"]
    assert hook["clientConfig"]["service"] == {
        "namespace": "acme-research",
        "name": "research-webhook",
        "path": "/mutate",
        "port": 443,
    }
    # Its ServiceAccount may get and patch this configuration, by name, and nothing else.
    (role,) = _by(webhook_manifests(load_spec(SPEC)), "ClusterRole")
    assert role["rules"] == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingwebhookconfigurations"],
            "verbs": ["get", "patch"],
            "resourceNames": [config["metadata"]["name"]],
        }
    ]


def test_the_scheduler_and_the_webhook_get_access_in_each_listed_namespace_and_nowhere_else() -> None:
    spec = load_spec(SPEC)
    objs = cluster_manifests(spec)
    outside = [o for o in objs if o["metadata"].get("namespace") not in (None, spec.ns, "sunk-system")]
    assert sorted((o["kind"], o["metadata"]["namespace"]) for o in outside) == [
        ("Role", "team-speech"),
        ("Role", "team-speech"),
        ("Role", "team-vision"),
        ("Role", "team-vision"),
        ("RoleBinding", "team-speech"),
        ("RoleBinding", "team-speech"),
        ("RoleBinding", "team-vision"),
        ("RoleBinding", "team-vision"),
    ]
    subjects = {binding["subjects"][0]["name"] for binding in _by(outside, "RoleBinding")}
    assert subjects == {"research-scheduler", "research-webhook"}
    for binding in _by(outside, "RoleBinding"):
        assert binding["subjects"][0]["namespace"] == spec.ns
    # The webhook only reads the owners that size gangs: get on Jobs, JobSets and PodGroups, nothing else.
    webhook_roles = [r for r in _by(outside, "Role") if r["metadata"]["name"] == "research-webhook"]
    assert {r["metadata"]["namespace"] for r in webhook_roles} == {"team-speech", "team-vision"}
    for role in webhook_roles:
        assert role["rules"] == [
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]},
            {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["get"]},
            {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups"], "verbs": ["get"]},
        ]
    scheduler = next(o for o in _by(objs, "Deployment") if o["metadata"]["name"] == "research-scheduler")
    env = {e["name"]: e.get("value") for e in scheduler["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SUNK_POD_NAMESPACES"] == "acme-research,team-speech,team-vision"


def test_the_webhook_reads_what_the_render_writes() -> None:
    spec = load_spec(SPEC)
    (deployment,) = _by(webhook_manifests(spec), "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert parse_namespaces(env["SUNK_WEBHOOK_NAMESPACES"]) == {
        "team-vision": NamespaceDefaults("vision", None, "inference"),
        "team-speech": NamespaceDefaults("speech", "serve", None),
    }
    assert json.loads(env["SUNK_WEBHOOK_NAMESPACES"])  # plain JSON, no key in it
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert [v["secret"]["secretName"] for v in volumes] == ["research-webhook-tls"]
    assert deployment["spec"]["replicas"] == 2
    # The files are mode 0440, owned by root and the pod's fsGroup: the webhook's user reads them
    # through that group (the local cluster's proof found it unready with Permission denied).
    pod = deployment["spec"]["template"]["spec"]
    assert volumes[0]["secret"]["defaultMode"] == 0o440
    assert pod["securityContext"]["fsGroup"] == container["securityContext"]["runAsUser"]
    assert [i["key"] for i in volumes[0]["secret"]["items"]] == ["ca.crt", "tls.crt", "tls.key"]  # never ca.key


def test_only_the_api_server_reaches_the_webhook_port() -> None:
    spec = load_spec(SPEC)
    policy = next(p for p in network_policies(spec, "sunk-system") if p["metadata"]["name"] == "research-webhook")
    ingress = policy["spec"]["ingress"]
    assert ingress[0] == {"from": [{"ipBlock": {"cidr": "10.0.0.1/32"}}], "ports": [{"protocol": "TCP", "port": 8443}]}
    # The rest is the metrics port for scrapers.
    assert all(r["ports"] == [{"protocol": "TCP", "port": 9090}] for r in ingress[1:])
