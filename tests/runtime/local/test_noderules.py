"""What the node agent plans its requests by on the real control plane: the objects a pod names (the
Node authorizer's graph), the labels a Node may set itself (NodeRestriction), and when a projected
token is renewed (the kubelet's token manager). The requests themselves run in
tests/runtime/local/controlplane, on demand."""

from __future__ import annotations

from sunk.runtime.local import tokens
from sunk.runtime.local.noderules import own_labels, references


def test_references_are_every_secret_configmap_and_claim_a_pod_names() -> None:
    pod = {
        "spec": {
            "imagePullSecrets": [{"name": "pull"}],
            "volumes": [
                {"name": "a", "secret": {"secretName": "vol-secret"}},
                {"name": "b", "configMap": {"name": "vol-cm"}},
                {"name": "c", "persistentVolumeClaim": {"claimName": "home"}},
                {"name": "d", "projected": {"sources": [{"secret": {"name": "p-secret"}}, {"configMap": {"name": "p-cm"}},
                                                        {"serviceAccountToken": {"audience": "x"}}]}},
                {"name": "e", "emptyDir": {}},
            ],
            "initContainers": [{"name": "i", "envFrom": [{"secretRef": {"name": "init-env"}}]}],
            "containers": [
                {
                    "name": "c",
                    "env": [
                        {"name": "A", "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "k"}}},
                        {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "k"}}},
                        {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    ],
                    "envFrom": [{"configMapRef": {"name": "from-cm"}}],
                }
            ],
        }
    }  # fmt: skip
    assert references(pod) == {
        ("v1/secrets", "pull"), ("v1/secrets", "vol-secret"), ("v1/configmaps", "vol-cm"),
        ("v1/persistentvolumeclaims", "home"), ("v1/secrets", "p-secret"), ("v1/configmaps", "p-cm"),
        ("v1/secrets", "init-env"), ("v1/secrets", "env-secret"), ("v1/configmaps", "env-cm"),
        ("v1/configmaps", "from-cm"),
    }  # fmt: skip
    assert references({"spec": {}}) == set()


def test_a_node_sets_only_the_kubelet_s_labels_on_itself() -> None:
    own, admin = own_labels({
        "kubernetes.io/hostname": "n1", "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "H100x8", "topology.kubernetes.io/zone": "z",
        "kubelet.kubernetes.io/x": "1", "sub.node.kubernetes.io/y": "2",
        "nvidia.com/gpu.product": "H100", "sunk.dev/pool": "gpu", "plain": "v",
        "node-role.kubernetes.io/slurm": "", "example.k8s.io/z": "3",
        "node-restriction.kubernetes.io/team": "a", "x.node-restriction.kubernetes.io/t": "b",
    })  # fmt: skip
    assert admin == {
        "node-role.kubernetes.io/slurm": "", "example.k8s.io/z": "3",
        "node-restriction.kubernetes.io/team": "a", "x.node-restriction.kubernetes.io/t": "b",
    }  # fmt: skip
    assert "nvidia.com/gpu.product" in own and "sub.node.kubernetes.io/y" in own and "plain" in own


def test_a_token_is_renewed_at_80_percent_of_its_life_or_after_a_day() -> None:
    token = tokens.Token("t", issued=1000.0, expires=1600.0)
    assert tokens.due(None, 0)
    assert not tokens.due(token, 1479.0)
    assert tokens.due(token, 1480.0)
    year = tokens.Token("t", issued=0.0, expires=365 * 86400.0)
    assert not tokens.due(year, 86399.0) and tokens.due(year, 86400.0)
    assert not tokens.due(tokens.Token("t", issued=0.0, expires=None), 10**9)


def test_a_token_request_is_bound_to_its_pod_with_the_source_s_audience_and_lifetime() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"}}
    body = tokens.request_body(pod, "slurm", 600)
    assert body["spec"] == {
        "expirationSeconds": 600,
        "audiences": ["slurm"],
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1"},
    }
    assert "audiences" not in tokens.request_body(pod, None, 3607)["spec"]  # the API server's own
