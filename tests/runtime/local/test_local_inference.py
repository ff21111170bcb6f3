"""Inference on the shared pool as a team deploys it (issue 35), on the local cluster, driven only
through `sunk local`, the real kubectl and the login pod's Slurm clients: one boot of a stack with
one shared GPU NodeSet and one opted-in namespace (`inference.namespaces`).

1. the webhook runs as two pods with the certificate the key generator made in the cluster, and
   has written its CA into its own configuration (the render carries none);
2. a Deployment applied with plain kubectl in the listed namespace, asking `nvidia.com/gpu`, runs
   under sunk's scheduler: Slurm places it (a job of the namespace's account in squeue) and the
   container sees the GPU Slurm allocated;
3. the same Deployment in a namespace not listed is left as it is (default scheduler, GPU request
   kept), and a pod that tolerates the GPU taint but not sunk's shared-Node taint stays Pending
   with the scheduler saying so: nothing lands on a shared Node unplaced;
4. with the webhook's pods gone, a pod in the listed namespace is refused (failurePolicy Fail),
   and a Deployment scaled meanwhile creates its pod once the webhook is back.

What the local cluster can't model: its GPUs are device files bound to /dev/null (inventory.py)."""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from sunk import keys
from sunk.images import ROLES, tag_for
from tests.support.localcluster import LocalCluster, booted, ready

pytestmark = pytest.mark.slurm

NS, TEAM, OTHER = "acme-inf", "team-serving", "other"
STACK: dict[str, Any] = {
    "config": {
        "sunk:operator": True,
        "sunk:cluster": {
            "name": "inf",
            "tenant": "acme",
            "slurm": {"version": "26.05"},
            "login": {"serviceType": "ClusterIP"},
            "nodesets": [
                {
                    "name": "gpu",
                    "replicas": 1,
                    "resourceMode": "shared",
                    "instanceType": "H100x8",
                    "cpus": 8,
                    "memoryMib": 16384,
                    "gpus": {"type": "h100", "count": 2},
                    "nodeSelector": {"node.kubernetes.io/instance-type": "H100x8"},
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                }
            ],
            "partitions": [{"name": "gpu", "nodesets": ["gpu"], "default": True}],
            "qos": [{"name": "serving", "priority": 100, "grpTres": {"gres/gpu": 2}}],
            "accounts": [{"name": "serving", "qos": ["serving", "normal"], "defaultQos": "serving"}],
            "inference": {"namespaces": [{"name": TEAM, "account": "serving", "partition": "gpu", "qos": "serving"}]},
        },
    }
}
SLURMD = ROLES["slurmd"]
IMAGE = f"ghcr.io/sunk-dev/{SLURMD.image}:{tag_for(SLURMD, release='26.05')}"


def server(namespace: str, name: str = "vllm", replicas: int = 1) -> dict[str, Any]:
    """A serving Deployment as a chart writes it: no schedulerName, a GPU in its limits."""
    container = {
        "name": "server",
        "image": IMAGE,
        "command": ["sh", "-c", "echo started GPUs=$NVIDIA_VISIBLE_DEVICES; exec sleep 600"],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi", "nvidia.com/gpu": "1"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [container]}},
        },
    }


class Inf(LocalCluster):
    def apply(self, *objects: dict[str, Any], check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects), check=check)

    def pods(self, namespace: str, app: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.get("pods", "-n", namespace, "-l", f"app={app}")["items"]
        return items

    def login(self, script: str) -> str:
        return self.kubectl("exec", "-n", NS, "deploy/inf-login", "-c", "sshd", "--", "bash", "-c", script).stdout


@pytest.fixture(scope="module")
def inf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inf]:
    with booted(tmp_path_factory.mktemp("local-inference"), STACK, stack_name="acme-inf") as boot:
        running = Inf(boot.env, boot.kubeconfig)
        assert boot.up.returncode == 0, boot.up.stderr[-3000:] + boot.up.stdout[-3000:]
        yield running


def test_the_webhook_serves_the_certificate_made_in_the_cluster(inf: Inf) -> None:
    pods = inf.get("pods", "-n", NS, "-l", f"{keys.APP_COMPONENT}=webhook")["items"]
    assert len(pods) == 2 and all(ready(p) for p in pods), [p["metadata"]["name"] for p in pods]
    secret = inf.get("secret", "-n", NS, "inf-webhook-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert {"tls.crt", "tls.key", "ca.crt"} <= set(secret["data"])
    (config,) = [
        c
        for c in inf.get("mutatingwebhookconfigurations")["items"]
        if c["metadata"]["name"] == f"sunk-{NS}-inf-webhook"
    ]
    bundles = {w["clientConfig"].get("caBundle") for w in config["webhooks"]}
    assert bundles == {secret["data"]["ca.crt"]}, "the webhook wrote its CA into its configuration"
    assert base64.b64decode(secret["data"]["ca.crt"]).startswith(b"-----BEGIN CERTIFICATE-----")


def test_a_team_s_deployment_runs_where_slurm_places_it(inf: Inf) -> None:
    inf.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OTHER}})
    inf.apply(server(TEAM))
    pod = inf.wait("the team's pod Running", lambda: inf.pods(TEAM, "vllm"),
                   lambda ps: len(ps) == 1 and ready(ps[0]))[0]  # fmt: skip
    assert pod["spec"]["schedulerName"] == "sunk-scheduler"
    annotations = pod["metadata"]["annotations"]
    assert annotations[f"{keys.PREFIX}account"] == "serving"
    assert annotations[f"{keys.PREFIX}gpus"] == "1"
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert "nvidia.com/gpu" not in limits, "the device plugin never picks a GPU on the shared pool"
    queue = inf.wait("the pod's Slurm job in squeue", lambda: inf.login("squeue -h -o '%a %q %P %T %N'").split("\n"),
                     lambda lines: any(line.startswith("serving serving gpu RUNNING") for line in lines))  # fmt: skip
    log = inf.kubectl("logs", "-n", TEAM, pod["metadata"]["name"]).stdout
    indices = annotations.get(f"{keys.PREFIX}gpu-indices")
    assert log.strip() == f"started GPUs={indices}", (log, indices, queue)


def test_elsewhere_the_same_deployment_is_untouched_and_no_pod_lands_on_a_shared_node_unplaced(inf: Inf) -> None:
    inf.apply(server(OTHER))
    (pod,) = inf.wait("the pod in the unlisted namespace", lambda: inf.pods(OTHER, "vllm"), lambda ps: len(ps) == 1)
    assert pod["spec"].get("schedulerName", "default-scheduler") == "default-scheduler"
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    # A pod that tolerates the GPU Nodes' own taint and asks for the shared Node by its labels:
    # only sunk's shared-Node taint keeps it off.
    stray = server(OTHER, "stray")
    spec = stray["spec"]["template"]["spec"]
    spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    spec["nodeSelector"] = {"node.kubernetes.io/instance-type": "H100x8"}
    spec["containers"][0]["resources"] = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    inf.apply(stray)

    def scheduled() -> str:
        pods = inf.pods(OTHER, "stray")
        conditions = (pods[0].get("status") or {}).get("conditions") or [] if pods else []
        return " ".join(c.get("message", "") for c in conditions if c.get("type") == "PodScheduled")

    # kube-scheduler 1.36 says "N node(s) had untolerated taint(s)" without naming the taint: the
    # Nodes the pod selects are then checked to carry sunk's shared taint, the one it does not tolerate.
    said = inf.wait("the stray pod refused by the scheduler", scheduled, lambda m: "untolerated taint" in m, 120)
    assert not inf.pods(OTHER, "stray")[0]["spec"].get("nodeName"), said
    selected = inf.get("nodes", "-l", "node.kubernetes.io/instance-type=H100x8")["items"]
    assert selected
    for node in selected:
        hard = [t for t in node["spec"].get("taints") or [] if t["effect"] in ("NoSchedule", "NoExecute")]
        untolerated = [t for t in hard if t["key"] != "nvidia.com/gpu"]
        assert untolerated == [{k: keys.SHARED_TOLERATION[k] for k in ("key", "value", "effect")}], hard
    assert not pod["spec"].get("nodeName") and not inf.pods(OTHER, "vllm")[0]["spec"].get("nodeName")


def test_with_the_webhook_down_creation_is_refused_and_resumes_with_it(inf: Inf) -> None:
    inf.kubectl("scale", "deployment", "-n", NS, "inf-webhook", "--replicas=0")
    inf.wait("the webhook's pods gone", lambda: inf.get("pods", "-n", NS, "-l", f"{keys.APP_COMPONENT}=webhook")["items"],
             lambda ps: not ps, 120)  # fmt: skip
    plain = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "namespace": TEAM},
             "spec": {"containers": [{"name": "c", "image": IMAGE, "command": ["sleep", "1"]}]}}  # fmt: skip
    refused = inf.apply(plain, check=False)
    assert refused.returncode != 0 and "webhook" in refused.stderr, refused.stderr
    assert inf.kubectl("get", "pod", "-n", TEAM, "plain", check=False).returncode != 0
    inf.kubectl("scale", "deployment", "-n", TEAM, "vllm", "--replicas=2")
    inf.kubectl("scale", "deployment", "-n", NS, "inf-webhook", "--replicas=2")
    pods = inf.wait("the second replica, once the webhook is back", lambda: inf.pods(TEAM, "vllm"),
                    lambda ps: len(ps) == 2, 300)  # fmt: skip
    assert {p["spec"]["schedulerName"] for p in pods} == {"sunk-scheduler"}
