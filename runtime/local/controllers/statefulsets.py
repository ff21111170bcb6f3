"""The StatefulSet controller: pods `<name>-<ordinal>` with hostname and subdomain (its Service),
claims from volumeClaimTemplates (`<template>-<pod>`, kept when the pod goes), OrderedReady start
(the next ordinal once the one before is Ready) or Parallel start (every missing ordinal at once,
whatever the others' readiness), scale-down from the highest ordinal, and with the RollingUpdate
strategy the replacement, highest ordinal first, of pods whose template revision is not the
current one; with OnDelete a pod of an old revision stays until someone deletes it, and its
replacement is made from the current template. Each pass does at most one step of each, as the
real controller with OrderedReady does.

Not modelled: ControllerRevision objects (the revision is a hash of the template), partitions and
maxUnavailable of a rolling update, minReadySeconds, PVC retention policies, start ordinals."""

from __future__ import annotations

import copy

from ..store import Obj, Store
from .common import deleting, owned, owner_ref, pods, ready, template_hash, terminal


def reconcile(store: Store) -> None:
    for sts in list(store.items(store.resource("apps/v1/statefulsets"))):
        sts = copy.deepcopy(sts)
        if not deleting(sts):
            _reconcile_one(store, sts)


def _ordinal(pod_name: str) -> int:
    return int(pod_name.rsplit("-", 1)[1])


def _reconcile_one(store: Store, sts: Obj) -> None:
    meta, spec = sts["metadata"], sts.get("spec") or {}
    ns, name = meta["namespace"], meta["name"]
    revision = f"{name}-{template_hash(spec.get('template') or {})}"
    replicas = int(spec.get("replicas", 1))
    mine = {p["metadata"]["name"]: p for p in pods(store, ns) if owned(p, sts)}
    _scale_down(store, ns, mine, replicas)
    if _start_in_order(store, sts, mine, replicas, revision):
        _replace_one_stale(store, sts, mine, replicas, revision)
    _write_status(store, sts, revision)


def _scale_down(store: Store, ns: str, mine: dict[str, Obj], replicas: int) -> None:
    """The highest ordinal past `replicas` goes, one at a time."""
    extra = sorted((n for n in mine if _ordinal(n) >= replicas), key=lambda n: -_ordinal(n))
    for pod_name in extra[:1]:
        if not deleting(mine[pod_name]):
            store.delete(store.resource("v1/pods"), ns, pod_name)


def _start_in_order(store: Store, sts: Obj, mine: dict[str, Obj], replicas: int, revision: str) -> bool:
    """OrderedReady: the first missing ordinal is made once every one before it is Ready, a
    finished pod is deleted to be made again; Parallel: every missing ordinal is made and every
    finished pod deleted in the same pass. True when every pod is there and Ready."""
    ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
    if (sts.get("spec") or {}).get("podManagementPolicy") == "Parallel":
        settled = True
        for ordinal in range(replicas):
            pod = mine.get(f"{name}-{ordinal}")
            if pod is None:
                _create_pod(store, sts, ordinal, revision)
            elif terminal(pod) and not deleting(pod):
                store.delete(store.resource("v1/pods"), ns, f"{name}-{ordinal}", grace=0)
            settled = settled and pod is not None and not deleting(pod) and ready(pod)
        return settled
    for ordinal in range(replicas):
        pod_name = f"{name}-{ordinal}"
        pod = mine.get(pod_name)
        if pod is None:
            _create_pod(store, sts, ordinal, revision)
            return False  # OrderedReady: one at a time
        if deleting(pod):
            return False
        if terminal(pod):
            store.delete(store.resource("v1/pods"), ns, pod_name, grace=0)
            return False
        if not ready(pod):
            return False
    return True


def _replace_one_stale(store: Store, sts: Obj, mine: dict[str, Obj], replicas: int, revision: str) -> None:
    """RollingUpdate: one pod of another revision goes, highest ordinal first."""
    spec = sts.get("spec") or {}
    stale = [
        n for n in mine
        if _ordinal(n) < replicas
        and (mine[n]["metadata"].get("labels") or {}).get("controller-revision-hash") != revision
    ]  # fmt: skip
    if stale and (spec.get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate":
        victim = max(stale, key=_ordinal)
        if not deleting(mine[victim]):
            store.delete(store.resource("v1/pods"), sts["metadata"]["namespace"], victim)


def _write_status(store: Store, sts: Obj, revision: str) -> None:
    meta = sts["metadata"]
    ns = meta["namespace"]
    live = [p for p in pods(store, ns) if owned(p, sts) and not deleting(p)]
    ready_count = sum(1 for p in live if ready(p))
    current = sum(1 for p in live if (p["metadata"].get("labels") or {}).get("controller-revision-hash") == revision)
    status = {
        "observedGeneration": meta.get("generation", 1),
        "replicas": len(live),
        "readyReplicas": ready_count,
        "availableReplicas": ready_count,
        "currentReplicas": current,
        "updatedReplicas": current,
        "currentRevision": revision,
        "updateRevision": revision,
    }
    if sts.get("status") != {**(sts.get("status") or {}), **status}:
        store.patch(store.resource("apps/v1/statefulsets"), ns, meta["name"], "merge", {"status": status}, "status")


def _create_pod(store: Store, sts: Obj, ordinal: int, revision: str) -> None:
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
    claims = store.resource("v1/persistentvolumeclaims")
    volumes = pod_spec.setdefault("volumes", [])
    for tmpl in spec.get("volumeClaimTemplates") or []:
        claim = f"{tmpl['metadata']['name']}-{pod_name}"
        if store.find(claims, ns, claim) is None:
            body = {
                "metadata": {"name": claim, "labels": dict(spec.get("selector", {}).get("matchLabels") or {})},
                "spec": tmpl.get("spec") or {},
            }
            store.create(claims, ns, body)
        volumes[:] = [v for v in volumes if v.get("name") != tmpl["metadata"]["name"]]
        volumes.append({"name": tmpl["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim}})
    pod = {
        "metadata": {
            "name": pod_name,
            "labels": labels,
            "annotations": pod_meta.get("annotations") or {},
            "ownerReferences": [owner_ref(sts)],
        },
        "spec": pod_spec,
    }
    store.create(store.resource("v1/pods"), ns, pod)
