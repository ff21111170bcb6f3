"""The Deployment controller: pods `<name>-<template hash>-<suffix>` (labelled pod-template-hash);
a finished pod is replaced; on a template change the new pods start and the old ones go once the
new are Ready (all at once first with the Recreate strategy).

Not modelled: ReplicaSets (a Deployment owns its pods directly), maxSurge/maxUnavailable
arithmetic (the old pods go together once the new ones are Ready), minReadySeconds, progress
deadlines, revision history and rollbacks, paused Deployments."""

from __future__ import annotations

import copy
import secrets

from ..store import Obj, Store
from .common import deleting, owned, owner_ref, pods, ready, template_hash, terminal


def reconcile(store: Store) -> None:
    for dep in list(store.items(store.resource("apps/v1/deployments"))):
        dep = copy.deepcopy(dep)
        if not deleting(dep):
            _reconcile_one(store, dep)


def _reconcile_one(store: Store, dep: Obj) -> None:
    pods_res = store.resource("v1/pods")
    meta, spec = dep["metadata"], dep.get("spec") or {}
    ns = meta["namespace"]
    digest = template_hash(spec.get("template") or {})
    replicas = int(spec.get("replicas", 1))
    mine = [p for p in pods(store, ns) if owned(p, dep) and not deleting(p)]
    for pod in mine:
        if terminal(pod):
            store.delete(pods_res, ns, pod["metadata"]["name"], grace=0)
    mine = [p for p in mine if not terminal(p)]
    new = [p for p in mine if (p["metadata"].get("labels") or {}).get("pod-template-hash") == digest]
    old = [p for p in mine if p not in new]
    if len(new) < replicas:
        _create_pod(store, dep, digest)
    for pod in new[replicas:]:
        store.delete(pods_res, ns, pod["metadata"]["name"])
    if old and _old_may_go(spec, new, replicas):
        for pod in old:
            store.delete(pods_res, ns, pod["metadata"]["name"])
    _write_status(store, dep, mine, new, replicas)


def _old_may_go(spec: Obj, new: list[Obj], replicas: int) -> bool:
    """Recreate: at once; RollingUpdate: once the new pods are all there and Ready."""
    recreate = (spec.get("strategy") or {}).get("type") == "Recreate"
    return recreate or (sum(1 for p in new if ready(p)) >= min(replicas, len(new)) and len(new) >= replicas)


def _write_status(store: Store, dep: Obj, mine: list[Obj], new: list[Obj], replicas: int) -> None:
    meta = dep["metadata"]
    ready_count = sum(1 for p in new if ready(p))
    available = ready_count >= replicas
    status = {
        "observedGeneration": meta.get("generation", 1),
        "replicas": len(mine),
        "updatedReplicas": len(new),
        "readyReplicas": ready_count,
        "availableReplicas": ready_count,
        "conditions": [
            {
                "type": "Available",
                "status": "True" if available else "False",
                "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
            }
        ],
    }
    if {k: (dep.get("status") or {}).get(k) for k in status} != status:
        res = store.resource("apps/v1/deployments")
        store.patch(res, meta["namespace"], meta["name"], "merge", {"status": status}, "status")


def _create_pod(store: Store, dep: Obj, digest: str) -> None:
    template = copy.deepcopy((dep.get("spec") or {}).get("template") or {})
    pod_meta = template.get("metadata") or {}
    name = f"{dep['metadata']['name']}-{digest}-{secrets.token_hex(3)[:5]}"
    labels = {**(pod_meta.get("labels") or {}), "pod-template-hash": digest}
    pod = {
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": pod_meta.get("annotations") or {},
            "ownerReferences": [owner_ref(dep)],
        },
        "spec": template.get("spec") or {},
    }
    store.create(store.resource("v1/pods"), dep["metadata"]["namespace"], pod)
