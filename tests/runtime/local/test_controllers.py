"""The local cluster's controllers: scheduling decisions and the StatefulSet, Deployment and Job
behaviour the render relies on, driven on the store without a node agent."""

from __future__ import annotations

from typing import Any

from sunk.runtime.local.controllers import Controllers, unfit
from sunk.runtime.local.inventory import node
from sunk.runtime.local.store import Store


def _ready(store: Store, name: str, ns: str = "ns") -> None:
    pods = store.resource("v1/pods")
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    store.patch(pods, ns, name, "merge", {"status": status}, "status")


def _setup() -> tuple[Store, Controllers]:
    store = Store()
    store.create(store.resource("v1/namespaces"), None, {"metadata": {"name": "ns"}})
    store.create(store.resource("v1/nodes"), None, node("n1", {"cpu": "4", "memory": "8Gi"}, {"role": "a"}))
    return store, Controllers(store)


def _pod(**spec: Any) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    return {"metadata": {"name": "p"}, "spec": {"containers": [container], **spec}}


def test_scheduling_refusals_name_the_reason() -> None:
    n1 = node("n1", {"cpu": "4", "memory": "8Gi"}, {"role": "a"})
    assert unfit(_pod(), n1, []) is None
    assert "node affinity/selector" in (unfit(_pod(nodeSelector={"role": "b"}), n1, []) or "")
    assert "Insufficient cpu" in (unfit(_pod(), n1, [_pod(), _pod(), _pod(), _pod()]) or "")
    tainted = {**n1, "spec": {"taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}}
    assert "untolerated taint" in (unfit(_pod(), tainted, []) or "")
    tolerant = _pod(tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])
    assert unfit(tolerant, tainted, []) is None
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "role", "operator": "In", "values": ["b"]}]}]}}}  # fmt: skip
    assert unfit(_pod(affinity=affinity), n1, []) is not None
    pinned = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}  # fmt: skip
    assert unfit(_pod(affinity=pinned), n1, []) is not None
    pinned["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchFields"][0][
        "values"
    ] = ["n1"]
    assert unfit(_pod(affinity=pinned), n1, []) is None


def test_statefulset_pods_start_in_order_with_claims_and_stable_names() -> None:
    store, controllers = _setup()
    sts = {
        "metadata": {"name": "db"},
        "spec": {
            "replicas": 2,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c"}]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}],
        },
    }
    store.create(store.resource("apps/v1/statefulsets"), "ns", sts)
    pods = store.resource("v1/pods")
    controllers.reconcile()
    names = [p["metadata"]["name"] for p in store.items(pods)]
    assert names == ["db-0"]  # OrderedReady: db-1 waits for db-0
    pod = store.get(pods, "ns", "db-0")
    assert (pod["spec"]["hostname"], pod["spec"]["subdomain"], pod["spec"]["nodeName"]) == ("db-0", "db", "n1")
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}} in pod["spec"]["volumes"]
    controllers.reconcile()
    assert store.get(store.resource("v1/persistentvolumeclaims"), "ns", "data-db-0")["status"]["phase"] == "Bound"
    _ready(store, "db-0")
    controllers.reconcile()
    assert sorted(p["metadata"]["name"] for p in store.items(pods)) == ["db-0", "db-1"]
    # a template change replaces pods, highest ordinal first, once all are Ready
    _ready(store, "db-1")
    store.patch(store.resource("apps/v1/statefulsets"), "ns", "db", "merge",
                {"spec": {"template": {"metadata": {"annotations": {"v": "2"}}}}})  # fmt: skip
    controllers.reconcile()
    assert store.get(pods, "ns", "db-1")["metadata"].get("deletionTimestamp")
    assert not store.get(pods, "ns", "db-0")["metadata"].get("deletionTimestamp")


def test_a_parallel_on_delete_statefulset_starts_together_and_replaces_only_deleted_pods() -> None:
    """What slurmctld with backups renders: standbys are never Ready, so they can't wait for one
    another, and an upgrade replaces every controller only once the admin (or the drill) deletes it."""
    store, controllers = _setup()
    sts = {
        "metadata": {"name": "ctl"},
        "spec": {
            "replicas": 2,
            "serviceName": "ctl",
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": {"app": "ctl"}},
            "template": {"metadata": {"labels": {"app": "ctl"}}, "spec": {"containers": [{"name": "c"}]}},
        },
    }
    store.create(store.resource("apps/v1/statefulsets"), "ns", sts)
    pods = store.resource("v1/pods")
    controllers.reconcile()
    assert sorted(p["metadata"]["name"] for p in store.items(pods)) == ["ctl-0", "ctl-1"]  # neither Ready
    _ready(store, "ctl-0")
    _ready(store, "ctl-1")
    old = store.get(pods, "ns", "ctl-1")["metadata"]["labels"]["controller-revision-hash"]
    store.patch(store.resource("apps/v1/statefulsets"), "ns", "ctl", "merge",
                {"spec": {"template": {"metadata": {"annotations": {"v": "2"}}}}})  # fmt: skip
    for _ in range(3):
        controllers.reconcile()
    assert not any(p["metadata"].get("deletionTimestamp") for p in store.items(pods))  # OnDelete: none replaced
    store.delete(pods, "ns", "ctl-1", grace=0)
    for _ in range(3):
        controllers.reconcile()
    new = store.get(pods, "ns", "ctl-1")["metadata"]["labels"]["controller-revision-hash"]
    assert new != old
    assert store.get(pods, "ns", "ctl-0")["metadata"]["labels"]["controller-revision-hash"] == old


def test_a_job_runs_until_its_completions_and_deployments_replace_on_a_template_change() -> None:
    store, controllers = _setup()
    pods = store.resource("v1/pods")
    job = {
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"containers": [{"name": "c"}], "restartPolicy": "Never"}}},
    }
    store.create(store.resource("batch/v1/jobs"), "ns", job)
    controllers.reconcile()
    (pod,) = list(store.items(pods))
    store.patch(pods, "ns", pod["metadata"]["name"], "merge", {"status": {"phase": "Succeeded"}}, "status")
    controllers.reconcile()
    status = store.get(store.resource("batch/v1/jobs"), "ns", "j")["status"]
    assert status["succeeded"] == 1 and status["conditions"][0]["type"] == "Complete"
    assert len(list(store.items(pods))) == 1  # no second pod
    template = {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c"}]}}
    dep = {"metadata": {"name": "w"}, "spec": {"replicas": 1, "template": template}}
    store.create(store.resource("apps/v1/deployments"), "ns", dep)
    controllers.reconcile()
    (first,) = [p["metadata"]["name"] for p in store.items(pods) if p["metadata"]["name"].startswith("w-")]
    _ready(store, first)
    store.patch(store.resource("apps/v1/deployments"), "ns", "w", "merge",
                {"spec": {"template": {"metadata": {"labels": {"v": "2"}}}}})  # fmt: skip
    controllers.reconcile()
    names = sorted(p["metadata"]["name"] for p in store.items(pods) if p["metadata"]["name"].startswith("w-"))
    assert len(names) == 2 and first in names  # the new pod starts; the old one stays until it is Ready
    new = next(n for n in names if n != first)
    _ready(store, new)
    controllers.reconcile()
    assert store.get(pods, "ns", first)["metadata"].get("deletionTimestamp")


def test_an_indexed_job_gives_each_pod_its_index_as_kubernetes_does_and_replaces_a_failed_index() -> None:
    """Annotation and label batch.kubernetes.io/job-completion-index, hostname <job>-<index>,
    JOB_COMPLETION_INDEX from the label (Kubernetes v1.36.3 job_controller.go:1942-1945)."""
    store, controllers = _setup()
    pods, jobs = store.resource("v1/pods"), store.resource("batch/v1/jobs")
    spec = {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}]}], "restartPolicy": "Never"}
    job = {
        "metadata": {"name": "infer"},
        "spec": {"completionMode": "Indexed", "completions": 3, "parallelism": 3, "template": {"spec": spec}},
    }
    store.create(jobs, "ns", job)
    controllers.reconcile()
    made = sorted(store.items(pods), key=lambda p: p["metadata"]["name"])
    index_key = "batch.kubernetes.io/job-completion-index"
    assert [p["metadata"]["annotations"][index_key] for p in made] == ["0", "1", "2"]
    assert [p["metadata"]["labels"][index_key] for p in made] == ["0", "1", "2"]
    assert [p["spec"]["hostname"] for p in made] == ["infer-0", "infer-1", "infer-2"]
    assert all(p["metadata"]["name"].startswith(f"infer-{i}-") for i, p in enumerate(made))
    uid = store.get(jobs, "ns", "infer")["metadata"]["uid"]
    assert all(p["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] == uid for p in made)
    env = made[1]["spec"]["containers"][0]["env"]
    assert env[0] == {"name": "A", "value": "1"}
    assert env[1] == {
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{index_key}']"}},
    }
    # Index 1 fails: a new pod for index 1 only; indexes 0 and 2 succeed: not complete yet.
    name = made[1]["metadata"]["name"]
    store.patch(pods, "ns", name, "merge", {"status": {"phase": "Failed"}}, "status")
    for p in (made[0], made[2]):
        store.patch(pods, "ns", p["metadata"]["name"], "merge", {"status": {"phase": "Succeeded"}}, "status")
    controllers.reconcile()
    again = [p for p in store.items(pods) if p["metadata"]["name"] not in {m["metadata"]["name"] for m in made}]
    assert [p["metadata"]["annotations"][index_key] for p in again] == ["1"]
    assert "conditions" not in store.get(jobs, "ns", "infer")["status"]
    store.patch(pods, "ns", again[0]["metadata"]["name"], "merge", {"status": {"phase": "Succeeded"}}, "status")
    controllers.reconcile()
    status = store.get(jobs, "ns", "infer")["status"]
    assert status["conditions"][0]["type"] == "Complete" and status["failed"] == 1
