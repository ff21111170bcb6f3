"""The controllers a cluster has, for the local one: they turn the applied objects into pods.

- scheduler: binds a pod that names no other scheduler to a Ready, schedulable Node whose labels
  match its nodeSelector and required node affinity, whose NoSchedule/NoExecute taints it
  tolerates and whose allocatable CPU, memory and pod count fit its requests beside the pods
  already there (extended resources such as nvidia.com/gpu too); among those, the one `score`
  prefers (PreferNoSchedule taints, then spreading a controller's pods, then the least
  allocated); else PodScheduled=False, Unschedulable, with the reasons.
- StatefulSet: pods `<name>-<ordinal>` with hostname and subdomain (its Service), claims from
  volumeClaimTemplates (`<template>-<pod>`, kept when the pod goes), OrderedReady start (the next
  ordinal once the one before is Ready), scale-down from the highest ordinal, and rolling
  replacement, highest ordinal first, of pods whose template revision is not the current one.
- Deployment: pods `<name>-<template hash>-<suffix>` (labelled pod-template-hash); on a template
  change the new pods start and the old ones go once they are Ready.
- Job: pods until `completions` succeeded, `parallelism` at a time, Failed after `backoffLimit`
  failed pods; `ttlSecondsAfterFinished` deletes the finished Job (and its pods with it).
- PersistentVolumeClaim: Bound at once (the node agent makes its folder).
- Garbage collection by ownerReferences is the store's (store.py).

Not modelled: ReplicaSets (a Deployment owns its pods directly), DaemonSets, CronJobs, HPA,
maxSurge/maxUnavailable arithmetic (one pod at a time), minReadySeconds, Parallel pod management
(treated as OrderedReady), PVC retention policies, Endpoints and EndpointSlices objects (names
resolve through /etc/hosts, see agent.py). The node lifecycle, taint-eviction and pod GC
controllers are lifecycle.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import logging
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..common.timefmt import parse_rfc3339, rfc3339
from .container import quantity
from .inventory import pod_requests
from .store import ApiError, Event, Obj, Store

log = logging.getLogger("sunk.local.controllers")


def template_hash(template: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _owned(obj: Obj, owner: Obj) -> bool:
    return any(r.get("uid") == owner["metadata"]["uid"] for r in obj["metadata"].get("ownerReferences") or [])


def _owner_ref(owner: Obj) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


# -- scheduling (pure) -------------------------------------------------------------------------


def requests(pod: Obj) -> dict[str, float]:
    """Effective requests of every resource (inventory.pod_requests): CPU, memory and extended ones."""
    return pod_requests(pod.get("spec") or {})


def _tolerates(pod: Obj, taint: Mapping[str, Any]) -> bool:
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _term_matches(term: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    for expr in term.get("matchFields") or []:  # metadata.name is the one field a node term may name
        values = expr.get("values") or []
        inside = expr.get("key") == "metadata.name" and name in values
        if inside != (expr.get("operator") == "In"):
            return False
    for expr in term.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        present = key in labels
        ok = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(op, False)
        if not ok:
            return False
    return True


def unfit(pod: Obj, node: Obj, placed: list[Obj]) -> str | None:
    """Why `pod` can't go to `node` beside `placed`, or None when it can."""
    spec = pod.get("spec") or {}
    labels = node["metadata"].get("labels") or {}
    name = node["metadata"]["name"]
    if (node.get("spec") or {}).get("unschedulable"):
        return f"node {name} is unschedulable"
    if not _ready(node) and not any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    ):
        return f"node {name} is not Ready"
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return f"node {name} didn't match Pod's node affinity/selector"
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or []
    if terms and not any(_term_matches(t, labels, name) for t in terms):
        return f"node {name} didn't match Pod's node affinity/selector"
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(pod, taint):
            return f"node {name} had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    wanted = requests(pod)
    for resource, amount in sorted(wanted.items()):
        if amount <= 0 or (resource not in allocatable and resource in ("cpu", "memory", "ephemeral-storage")):
            continue  # a Node that states no CPU or memory is not limited in them
        used = sum(requests(p).get(resource, 0) for p in placed)
        if used + amount > quantity(str(allocatable.get(resource, "0"))):
            return f"Insufficient {resource} on node {name}"
    if "pods" in allocatable and len(placed) + 1 > int(allocatable["pods"]):
        return f"Too many pods on node {name}"
    return None


def score(pod: Obj, node: Obj, placed: list[Obj]) -> tuple[float, ...]:
    """How much the default scheduler prefers `node` for `pod` (the smallest first): fewer
    PreferNoSchedule taints the pod does not tolerate (TaintToleration), fewer pods of the same
    owner already there (the default topology spread over hostnames), then the least allocated
    share of CPU and memory (NodeResourcesFit's LeastAllocated)."""
    taints = (node.get("spec") or {}).get("taints") or []
    soft = sum(1 for t in taints if t.get("effect") == "PreferNoSchedule" and not _tolerates(pod, t))
    owners = {r.get("uid") for r in pod["metadata"].get("ownerReferences") or []}
    siblings = sum(1 for p in placed if owners & {r.get("uid") for r in p["metadata"].get("ownerReferences") or []})
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    shares = []
    for resource in ("cpu", "memory"):
        size = quantity(str(allocatable[resource])) if resource in allocatable else 0
        if size > 0:
            used = sum(requests(p).get(resource, 0) for p in [*placed, pod])
            shares.append(used / size)
    return (soft, siblings, sum(shares) / len(shares) if shares else 0.0)


class Controllers:
    def __init__(self, store: Store, period: float = 1.0) -> None:
        self.store = store
        self.period = period
        self._wake = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None
        self._r = {
            k: store.resource(k)
            for k in (
                "v1/pods",
                "v1/nodes",
                "v1/persistentvolumeclaims",
                "apps/v1/statefulsets",
                "apps/v1/deployments",
                "batch/v1/jobs",
            )
        }

    def start(self) -> None:
        self.store.listen(self._on_event)
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def _on_event(self, event: Event) -> None:
        # Events and the kubelets' Lease renewals (one per Node every 10 s) change nothing here.
        if event.resource not in ("v1/events", "coordination.k8s.io/v1/leases"):
            self._wake.set()

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.period)
            self._wake.clear()
            try:
                self.reconcile()
            except Exception:
                log.exception("controllers")

    def reconcile(self) -> None:
        for name in ("claims", "statefulsets", "deployments", "jobs", "schedule"):
            try:
                getattr(self, f"_{name}")()
            except ApiError as err:
                log.debug("%s: %s", name, err.message)

    def _pods(self, namespace: str) -> list[Obj]:
        return list(self.store.items(self._r["v1/pods"], namespace))

    # -- claims -----------------------------------------------------------------------------
    def _claims(self) -> None:
        res = self._r["v1/persistentvolumeclaims"]
        for pvc in list(self.store.items(res)):
            if (pvc.get("status") or {}).get("phase") != "Bound":
                meta = pvc["metadata"]
                storage = (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
                status = {
                    "phase": "Bound",
                    "accessModes": (pvc.get("spec") or {}).get("accessModes") or [],
                    "capacity": {"storage": storage},
                }
                self.store.patch(res, meta["namespace"], meta["name"], "merge", {"status": status}, "status")

    # -- StatefulSets -----------------------------------------------------------------------
    def _statefulsets(self) -> None:
        res = self._r["apps/v1/statefulsets"]
        pods_res = self._r["v1/pods"]
        for sts in list(self.store.items(res)):
            sts = copy.deepcopy(sts)
            meta, spec = sts["metadata"], sts.get("spec") or {}
            if meta.get("deletionTimestamp"):
                continue
            ns, name = meta["namespace"], meta["name"]
            revision = f"{name}-{template_hash(spec.get('template') or {})}"
            replicas = int(spec.get("replicas", 1))
            owned = {p["metadata"]["name"]: p for p in self._pods(ns) if _owned(p, sts)}
            # scale down, highest ordinal first
            extra = sorted(
                (n for n in owned if int(n.rsplit("-", 1)[1]) >= replicas), key=lambda n: -int(n.rsplit("-", 1)[1])
            )
            for pod_name in extra[:1]:
                if not owned[pod_name]["metadata"].get("deletionTimestamp"):
                    self.store.delete(pods_res, ns, pod_name)
            for ordinal in range(replicas):
                pod_name = f"{name}-{ordinal}"
                pod = owned.get(pod_name)
                if pod is None:
                    self._sts_pod(sts, ordinal, revision)
                    break  # OrderedReady: one at a time
                if pod["metadata"].get("deletionTimestamp"):
                    break
                if _terminal(pod):
                    self.store.delete(pods_res, ns, pod_name, grace=0)
                    break
                if not _ready(pod):
                    break
            else:  # every pod there and Ready: replace one stale pod, highest ordinal first
                stale = [
                    n for n in owned
                    if int(n.rsplit("-", 1)[1]) < replicas
                    and (owned[n]["metadata"].get("labels") or {}).get("controller-revision-hash") != revision
                ]  # fmt: skip
                if stale and (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate":
                    victim = max(stale, key=lambda n: int(n.rsplit("-", 1)[1]))
                    if not owned[victim]["metadata"].get("deletionTimestamp"):
                        self.store.delete(pods_res, ns, victim)
            live = [p for p in self._pods(ns) if _owned(p, sts) and not p["metadata"].get("deletionTimestamp")]
            ready = sum(1 for p in live if _ready(p))
            current = sum(
                1 for p in live if (p["metadata"].get("labels") or {}).get("controller-revision-hash") == revision
            )
            status = {
                "observedGeneration": meta.get("generation", 1),
                "replicas": len(live),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "currentReplicas": current,
                "updatedReplicas": current,
                "currentRevision": revision,
                "updateRevision": revision,
            }
            if sts.get("status") != {**(sts.get("status") or {}), **status}:
                self.store.patch(res, ns, name, "merge", {"status": status}, "status")

    def _sts_pod(self, sts: Obj, ordinal: int, revision: str) -> None:
        meta, spec = sts["metadata"], sts.get("spec") or {}
        ns, name = meta["namespace"], meta["name"]
        pod_name = f"{name}-{ordinal}"
        template = copy.deepcopy(spec.get("template") or {})
        pod_meta = template.get("metadata") or {}
        labels = {
            **(pod_meta.get("labels") or {}),
            "statefulset.kubernetes.io/pod-name": pod_name,
            "apps.kubernetes.io/pod-index": str(ordinal),
            "controller-revision-hash": revision,
        }
        pod_spec = template.get("spec") or {}
        pod_spec["hostname"] = pod_name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        claims = self._r["v1/persistentvolumeclaims"]
        volumes = pod_spec.setdefault("volumes", [])
        for tmpl in spec.get("volumeClaimTemplates") or []:
            claim = f"{tmpl['metadata']['name']}-{pod_name}"
            if self.store.find(claims, ns, claim) is None:
                body = {
                    "metadata": {"name": claim, "labels": dict(spec.get("selector", {}).get("matchLabels") or {})},
                    "spec": tmpl.get("spec") or {},
                }
                self.store.create(claims, ns, body)
            volumes[:] = [v for v in volumes if v.get("name") != tmpl["metadata"]["name"]]
            volumes.append({"name": tmpl["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim}})
        pod = {
            "metadata": {
                "name": pod_name,
                "labels": labels,
                "annotations": pod_meta.get("annotations") or {},
                "ownerReferences": [_owner_ref(sts)],
            },
            "spec": pod_spec,
        }
        self.store.create(self._r["v1/pods"], ns, pod)

    # -- Deployments ------------------------------------------------------------------------
    def _deployments(self) -> None:
        res = self._r["apps/v1/deployments"]
        pods_res = self._r["v1/pods"]
        for dep in list(self.store.items(res)):
            dep = copy.deepcopy(dep)
            meta, spec = dep["metadata"], dep.get("spec") or {}
            if meta.get("deletionTimestamp"):
                continue
            ns, name = meta["namespace"], meta["name"]
            digest = template_hash(spec.get("template") or {})
            replicas = int(spec.get("replicas", 1))
            owned = [p for p in self._pods(ns) if _owned(p, dep) and not p["metadata"].get("deletionTimestamp")]
            for pod in owned:
                if _terminal(pod):
                    self.store.delete(pods_res, ns, pod["metadata"]["name"], grace=0)
            owned = [p for p in owned if not _terminal(p)]
            new = [p for p in owned if (p["metadata"].get("labels") or {}).get("pod-template-hash") == digest]
            old = [p for p in owned if p not in new]
            if len(new) < replicas:
                self._deploy_pod(dep, digest)
            for pod in new[replicas:]:
                self.store.delete(pods_res, ns, pod["metadata"]["name"])
            recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
            if old and (
                recreate or (sum(1 for p in new if _ready(p)) >= min(replicas, len(new)) and len(new) >= replicas)
            ):
                for pod in old:
                    self.store.delete(pods_res, ns, pod["metadata"]["name"])
            ready = sum(1 for p in new if _ready(p))
            status = {
                "observedGeneration": meta.get("generation", 1),
                "replicas": len(owned),
                "updatedReplicas": len(new),
                "readyReplicas": ready,
                "availableReplicas": ready,
                "conditions": [
                    {
                        "type": "Available",
                        "status": "True" if ready >= replicas else "False",
                        "reason": "MinimumReplicasAvailable" if ready >= replicas else "MinimumReplicasUnavailable",
                    }
                ],
            }
            if {k: (dep.get("status") or {}).get(k) for k in status} != status:
                self.store.patch(res, ns, name, "merge", {"status": status}, "status")

    def _deploy_pod(self, dep: Obj, digest: str) -> None:
        template = copy.deepcopy((dep.get("spec") or {}).get("template") or {})
        pod_meta = template.get("metadata") or {}
        name = f"{dep['metadata']['name']}-{digest}-{secrets.token_hex(3)[:5]}"
        labels = {**(pod_meta.get("labels") or {}), "pod-template-hash": digest}
        pod = {
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": pod_meta.get("annotations") or {},
                "ownerReferences": [_owner_ref(dep)],
            },
            "spec": template.get("spec") or {},
        }
        self.store.create(self._r["v1/pods"], dep["metadata"]["namespace"], pod)

    # -- Jobs ----------------------------------------------------------------------------------
    def _jobs(self) -> None:
        res = self._r["batch/v1/jobs"]
        for job in list(self.store.items(res)):
            job = copy.deepcopy(job)
            meta, spec, status = job["metadata"], job.get("spec") or {}, dict(job.get("status") or {})
            if meta.get("deletionTimestamp"):
                continue
            ns, name = meta["namespace"], meta["name"]
            owned = [p for p in self._pods(ns) if _owned(p, job)]
            succeeded = sum(1 for p in owned if (p.get("status") or {}).get("phase") == "Succeeded")
            failed = sum(1 for p in owned if (p.get("status") or {}).get("phase") == "Failed")
            active = [p for p in owned if not _terminal(p) and not p["metadata"].get("deletionTimestamp")]
            completions = int(spec.get("completions", 1))
            finished = next(
                (
                    c["type"]
                    for c in status.get("conditions") or []
                    if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                ),
                None,
            )
            now = rfc3339(datetime.now(UTC))
            new_status: Obj = {
                "active": len(active),
                "succeeded": succeeded,
                "failed": failed,
                "startTime": status.get("startTime", now),
            }
            if finished is None:
                if succeeded >= completions:
                    finished = "Complete"
                elif failed > int(spec.get("backoffLimit", 6)):
                    finished = "Failed"
                    for p in active:
                        self.store.delete(self._r["v1/pods"], ns, p["metadata"]["name"])
                if finished:
                    reason = "BackoffLimitExceeded" if finished == "Failed" else None
                    condition = {"type": finished, "status": "True", "lastTransitionTime": now}
                    if reason:
                        condition["reason"] = reason
                    new_status["conditions"] = [condition]
                    new_status["completionTime" if finished == "Complete" else "failedTime"] = now
                else:
                    want = min(int(spec.get("parallelism", 1)), completions - succeeded) - len(active)
                    for _ in range(max(0, want)):
                        self._job_pod(job)
            ttl = spec.get("ttlSecondsAfterFinished")
            done_at = status.get("completionTime") or status.get("failedTime")
            if (
                finished
                and ttl is not None
                and done_at
                and (datetime.now(UTC) - parse_rfc3339(done_at)).total_seconds() >= int(ttl)
            ):
                self.store.delete(res, ns, name)
                continue
            if {k: status.get(k) for k in new_status} != new_status:
                self.store.patch(res, ns, name, "merge", {"status": new_status}, "status")

    def _job_pod(self, job: Obj) -> None:
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        pod_meta = template.get("metadata") or {}
        meta = job["metadata"]
        labels = {
            **(pod_meta.get("labels") or {}),
            "job-name": meta["name"],
            "batch.kubernetes.io/job-name": meta["name"],
            "controller-uid": meta["uid"],
        }
        pod = {
            "metadata": {
                "name": f"{meta['name']}-{secrets.token_hex(3)[:5]}",
                "labels": labels,
                "annotations": pod_meta.get("annotations") or {},
                "ownerReferences": [_owner_ref(job)],
            },
            "spec": template.get("spec") or {},
        }
        self.store.create(self._r["v1/pods"], meta["namespace"], pod)

    # -- scheduling ------------------------------------------------------------------------
    def _schedule(self) -> None:
        pods_res, nodes = self._r["v1/pods"], list(self.store.items(self._r["v1/nodes"]))
        everything = list(self.store.items(pods_res))
        for pod in everything:
            spec = pod.get("spec") or {}
            if spec.get("nodeName") or pod["metadata"].get("deletionTimestamp") or _terminal(pod):
                continue
            if spec.get("schedulerName", "default-scheduler") != "default-scheduler":
                continue
            reasons = []
            fits: list[tuple[tuple[float, ...], str]] = []
            for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
                placed = [
                    p
                    for p in everything
                    if (p.get("spec") or {}).get("nodeName") == node["metadata"]["name"] and not _terminal(p)
                ]
                why = unfit(pod, node, placed)
                if why is None:
                    fits.append((score(pod, node, placed), node["metadata"]["name"]))
                else:
                    reasons.append(why)
            if fits:
                _, chosen = min(fits)
                self._bind(pod, chosen)
                spec["nodeName"] = chosen
                continue
            message = (
                f"0/{len(nodes)} nodes are available: " + "; ".join(reasons)
                if nodes
                else "no nodes available to schedule pods"
            )
            refusal = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
            current = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == "PodScheduled"]
            if not current or current[0].get("message") != message:
                meta = pod["metadata"]
                body = {"status": {"conditions": [refusal]}}
                self.store.patch(pods_res, meta["namespace"], meta["name"], "merge", body, "status")

    def _bind(self, pod: Obj, node: str) -> None:
        pods_res, meta = self._r["v1/pods"], pod["metadata"]
        now = rfc3339(datetime.now(UTC))
        self.store.patch(pods_res, meta["namespace"], meta["name"], "merge", {"spec": {"nodeName": node}})
        condition = {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}
        body = {"status": {"conditions": [condition]}}
        self.store.patch(pods_res, meta["namespace"], meta["name"], "merge", body, "status")
