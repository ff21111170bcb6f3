"""Inference on the shared pool as a team deploys it (issue 35), on the local cluster, driven only
through `sunk local`, the real kubectl and the login pod's Slurm clients: one boot of a stack with
one shared GPU NodeSet of 4 Slurm nodes (2 GPUs each) and one opted-in namespace
(`inference.namespaces`).

1. the webhook runs as two pods with the certificate the key generator made in the cluster, and
   has written its CA into its own configuration (the render carries none);
2. a Deployment applied with plain kubectl in the listed namespace, asking `nvidia.com/gpu`, runs
   under sunk's scheduler: Slurm places it (a job of the namespace's account in squeue) and the
   container sees the GPU Slurm allocated;
3. the same Deployment in a namespace not listed is left as it is (default scheduler, GPU request
   kept), and a pod that tolerates the GPU taint but not sunk's shared-Node taint stays Pending
   with the scheduler saying so: nothing lands on a shared Node unplaced;
4. with the webhook's pods gone, a pod in the listed namespace is refused (failurePolicy Fail),
   and a Deployment scaled meanwhile creates its pod once the webhook is back;
5. a LeaderWorkerSet group of 4 (startupPolicy LeaderReady) made with plain kubectl as
   LeaderWorkerSet's controller makes it (its leader and worker StatefulSets; LeaderWorkerSet's
   CRD, controller and pod webhook are not installed) runs beside a Slurm batch job: the gang's one
   Slurm job holds 4 nodes from the size annotation while the leader is its only pod, every member
   is bound on its own node of that job and Running, no CPU or GPU of a node is held by both
   jobs, and deleting the group ends the gang's job while the batch job runs on.

What the local cluster can't model: its GPUs are device files bound to /dev/null (inventory.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from sunk.runtime.webhook import gangs

from sunk import keys
from sunk.hostlist import expand
from sunk.images import ROLES, tag_for
from tests.support import lws
from tests.support.localcluster import LocalCluster, booted, ready
from tests.support.slurmalloc import allocations, no_slot_twice

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
                    "replicas": 4,
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
            "qos": [{"name": "serving", "priority": 100, "grpTres": {"gres/gpu": 4}}],
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
        # Stops at SIGTERM as a server does: a deleted pod keeps its Slurm job until it has stopped.
        "command": ["sh", "-c", "echo started GPUs=$NVIDIA_VISIBLE_DEVICES; trap 'exit 0' TERM; sleep 600 & wait"],
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


# --- A LeaderWorkerSet group beside a Slurm job ---------------------------------------------------
#
# LeaderWorkerSet's CRD and controller are not installed here: the test makes the two StatefulSets
# its controller makes for one group, as LeaderWorkerSet v0.10.0 (kubernetes-sigs/lws, commit
# 2161f38f) makes them, and Kubernetes' own StatefulSet controller creates the pods from them.
# - The leader StatefulSet, named after the LeaderWorkerSet (its pod `<lws>-0` is group 0's leader):
#   Parallel pod management, selector set name + worker index "0", template labels worker index "0",
#   set name and template revision, annotation size (pkg/controllers/leaderworkerset_controller.go:
#   793-799, 846-859).
# - Under startupPolicy LeaderReady the pod controller creates no worker StatefulSet until the
#   leader pod is Ready (pkg/controllers/pod_controller.go:143); it is named after the leader, owned
#   by the leader pod (controller, blockOwnerDeletion: 174, 365-381), size-1 replicas with ordinals
#   from 1, Parallel, selector and labels the leader's group index and group key plus the set name,
#   annotations size and leader name (386-445).
# - LeaderWorkerSet's own pod webhook is not installed either: the leader reaches sunk's webhook
#   without its group index and group key (what the webhook would add, pkg/webhooks/pod_webhook.go:
#   103-118), so sunk computes the key as that webhook does (runtime/webhook/gangs.py); the workers
#   carry it from their template as the pod controller copies it from the leader, and would get
#   their worker index from that webhook (141), which sunk does not read.
LWS, LWS_SIZE = "llm", 4
LEADER = f"{LWS}-0"
GROUP_KEY = hashlib.sha1(f"{TEAM}/{LEADER}".encode(), usedforsecurity=False).hexdigest()
REVISION = "6c7d9f8b5"
"""The template revision LeaderWorkerSet names from its ControllerRevision: any value, the same on both."""


def member(command: str) -> dict[str, Any]:
    """The pod template a LeaderWorkerSet's user writes (leader and workers alike): one GPU, no
    schedulerName, nothing of Slurm's."""
    container = {
        "name": "shard",
        "image": IMAGE,
        "command": ["sh", "-c", f"echo {command} on $(hostname) GPUs=$NVIDIA_VISIBLE_DEVICES; exec sleep 1800"],
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "1Gi", "nvidia.com/gpu": "1"}},
    }
    # sleep is its container's PID 1 and ignores SIGTERM: a short grace ends a deleted group quickly.
    return {"containers": [container], "terminationGracePeriodSeconds": 2}


def leader_statefulset() -> dict[str, Any]:
    labels = {gangs.LWS_WORKER_INDEX: "0", gangs.LWS_SET_NAME: LWS, lws.REVISION: REVISION}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": LWS, "namespace": TEAM, "labels": {gangs.LWS_SET_NAME: LWS, lws.REVISION: REVISION}},
        "spec": {
            "replicas": 1,
            "serviceName": LWS,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {gangs.LWS_SET_NAME: LWS, gangs.LWS_WORKER_INDEX: "0"}},
            "template": {
                "metadata": {"labels": labels, "annotations": {gangs.LWS_SIZE: str(LWS_SIZE)}},
                "spec": member("leader"),
            },
        },
    }


def worker_statefulset(leader: dict[str, Any]) -> dict[str, Any]:
    group = {lws.GROUP_INDEX: "0", gangs.LWS_SET_NAME: LWS, gangs.LWS_GROUP_KEY: GROUP_KEY}
    owner = {"apiVersion": "v1", "kind": "Pod", "name": LEADER, "uid": leader["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    annotations = {gangs.LWS_SIZE: str(LWS_SIZE), lws.LEADER_NAME: LEADER}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": LEADER,
            "namespace": TEAM,
            "labels": {**group, lws.REVISION: REVISION},
            "ownerReferences": [owner],
        },
        "spec": {
            "replicas": LWS_SIZE - 1,
            "serviceName": LWS,
            "podManagementPolicy": "Parallel",
            "ordinals": {"start": 1},
            "selector": {"matchLabels": group},
            "template": {
                "metadata": {"labels": {**group, lws.REVISION: REVISION}, "annotations": annotations},
                "spec": member("worker"),
            },
        },
    }


def test_a_leaderworkerset_group_runs_whole_beside_a_slurm_job(inf: Inf) -> None:
    """A LeaderWorkerSet group of 4 (startupPolicy LeaderReady), made with plain kubectl in the
    listed namespace as LeaderWorkerSet's controller makes it (above), beside a Slurm batch job
    submitted from the login pod. sunk takes LeaderReady as it chose (runtime/webhook/gangs.py):
    the webhook marks the group `group-start: first-member`, so the scheduler asks Slurm for the
    whole gang, sized from the size annotation, when the leader (its only pod yet) appears, and
    binds the workers to the nodes left as they come. Shown: the gang's one job holds 4 nodes
    before any worker exists; every member is bound on its own node of that job and Running; the
    batch job runs on, and where Slurm gave both jobs the same node, no CPU and no GPU of it is
    held by both (each pod sees its own job's GPU); deleting the group ends the gang's job, not
    the batch job."""
    # The earlier scenarios' serving pods leave the pool: the group needs a GPU on each of 4 nodes.
    inf.kubectl("delete", "deployment", "-n", TEAM, "vllm", "--ignore-not-found")
    inf.wait("the serving pods' jobs gone", lambda: inf.login("squeue -h -A serving -o %i").split(),
             lambda jobs: not jobs, 120)  # fmt: skip
    batch = inf.wait("sbatch from the login pod",
                     lambda: inf.login("sbatch --parsable -o /dev/null -N1 -n1 --mem=1G --gres=gpu:1 -t 30 "
                                       "--wrap 'sleep 1800' 2>&1 || true").strip().split(";")[0],
                     str.isdigit, 120)  # fmt: skip
    inf.wait(f"batch job {batch} running", lambda: inf.login(f"squeue -h -j {batch} -o %T").strip(),
             lambda state: state == "RUNNING", 120)  # fmt: skip

    inf.apply(leader_statefulset())
    leader = inf.wait("the leader Running", lambda: inf.pod(LEADER, TEAM), ready, 300)
    labels, annotations = leader["metadata"]["labels"], leader["metadata"]["annotations"]
    assert gangs.LWS_GROUP_KEY not in labels, "LeaderWorkerSet's webhook is not installed"
    assert leader["spec"]["schedulerName"] == "sunk-scheduler"
    assert annotations[keys.GROUP] == f"lws-{GROUP_KEY[:40]}", annotations
    assert (annotations[keys.GROUP_SIZE], annotations[keys.GROUP_START]) == (str(LWS_SIZE), "first-member")
    job = annotations[keys.JOB_ID]
    # The whole gang's allocation, from the size annotation, while the leader is its only pod.
    assert not inf.get("pods", "-n", TEAM, "-l", f"{gangs.LWS_GROUP_KEY}={GROUP_KEY}")["items"]
    shown = inf.login(f"scontrol show job -o {job}")
    assert "JobState=RUNNING" in shown and f" NumNodes={LWS_SIZE} " in shown and "Account=serving" in shown, shown
    assert f"JobName=sunk-group:{TEAM}/lws-" in shown, shown
    gang_nodes = set(expand(shown.split(" NodeList=", 1)[1].split()[0]))

    # LeaderReady: the workers exist only once the leader is Ready.
    inf.apply(worker_statefulset(leader))

    def members() -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = inf.get("pods", "-n", TEAM, "-l", f"{gangs.LWS_SET_NAME}={LWS}")["items"]
        return items

    pods = inf.wait("the group's 4 pods Running", members, lambda ps: len(ps) == LWS_SIZE and all(map(ready, ps)), 300)
    bound = {p["metadata"]["name"]: p["metadata"]["annotations"] for p in pods}
    assert {a[keys.JOB_ID] for a in bound.values()} == {job}, bound
    assert {a[keys.SLURM_NODE] for a in bound.values()} == gang_nodes and len(gang_nodes) == LWS_SIZE, bound
    assert len({p["spec"]["nodeName"] for p in pods}) == LWS_SIZE, "one Kubernetes Node per member"

    # Beside the batch job: both run, and no CPU or GPU of a node is held by both.
    alloc = allocations(inf.login("scontrol show job -d"))
    assert {int(job), int(batch)} <= set(alloc), alloc
    no_slot_twice(alloc)
    shared = sorted(set(alloc[int(batch)]) & gang_nodes)
    print(json.dumps({"gang": {n: sorted(alloc[int(job)][n][1]) for n in sorted(gang_nodes)},
                      "batch": {n: sorted(g) for n, (_, g) in alloc[int(batch)].items()}, "shared": shared}))  # fmt: skip
    for name, a in bound.items():
        held = alloc[int(job)][a[keys.SLURM_NODE]][1]
        assert a[keys.GPU_INDICES] == ",".join(map(str, sorted(held))) and len(held) == 1, (name, a, held)
        log = inf.kubectl("logs", "-n", TEAM, name).stdout
        assert log.strip().endswith(f"GPUs={a[keys.GPU_INDICES]}"), (name, log)

    # Deleting the group (its leader StatefulSet: the garbage collector takes the leader pod, then
    # the worker StatefulSet it owns) ends the gang's job; the batch job runs on.
    inf.kubectl("delete", "statefulset", "-n", TEAM, LWS)
    # squeue shows an ended job (CANCELLED) until slurmctld purges it, then none.
    inf.wait("the gang's job ended", lambda: inf.login(f"squeue -h -j {job} -o %T 2>/dev/null || true").strip(),
             lambda state: state in ("", "CANCELLED", "COMPLETED"), 180)  # fmt: skip
    inf.wait("the group's pods and worker StatefulSet gone", lambda: members() or inf.get("statefulsets", "-n", TEAM)["items"],
             lambda left: not left, 180)  # fmt: skip
    assert inf.login(f"squeue -h -j {batch} -o %T").strip() == "RUNNING"
    inf.login(f"scancel {batch}")
