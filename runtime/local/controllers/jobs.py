"""The Job controller: pods until `completions` succeeded, `parallelism` at a time; Failed
(BackoffLimitExceeded, its running pods deleted) after more than `backoffLimit` failed pods;
`ttlSecondsAfterFinished` deletes the finished Job (and its pods with it, by the store's garbage
collection).

With `completionMode: Indexed` each pod has an index from 0 to completions - 1, as Kubernetes
v1.36.3's controller gives it (pkg/controller/job/indexed_job_utils.go, job_controller.go:1942-1945):
the `batch.kubernetes.io/job-completion-index` annotation and label, the hostname `<job>-<index>`
(unless the template sets one), JOB_COMPLETION_INDEX in every container's environment from that
label, and a name `<job>-<index>-<random>`. The Job is complete when every index has a succeeded
pod; an index whose pod failed gets a new pod.

Not modelled: the pod failure back-off delay, pod failure and success policies, backoffLimitPerIndex,
activeDeadlineSeconds, suspend, pod replacement policies, the Job's selector (pods are its by owner
reference)."""

from __future__ import annotations

import copy
import secrets
from datetime import UTC, datetime

from sunk.keys import CONTROLLER_UID, JOB_COMPLETION_INDEX, JOB_NAME

from ...common.timefmt import parse_rfc3339, rfc3339
from ..store import Obj, Store
from .common import deleting, owned, owner_ref, pods, terminal


def reconcile(store: Store) -> None:
    for job in list(store.items(store.resource("batch/v1/jobs"))):
        job = copy.deepcopy(job)
        if not deleting(job):
            _reconcile_one(store, job)


def _finished(status: Obj) -> str | None:
    """ "Complete" or "Failed" once a condition says so."""
    return next(
        (
            c["type"]
            for c in status.get("conditions") or []
            if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        ),
        None,
    )


def _reconcile_one(store: Store, job: Obj) -> None:
    res = store.resource("batch/v1/jobs")
    meta, spec, status = job["metadata"], job.get("spec") or {}, dict(job.get("status") or {})
    ns, name = meta["namespace"], meta["name"]
    mine = [p for p in pods(store, ns) if owned(p, job)]
    succeeded = sum(1 for p in mine if (p.get("status") or {}).get("phase") == "Succeeded")
    failed = sum(1 for p in mine if (p.get("status") or {}).get("phase") == "Failed")
    active = [p for p in mine if not terminal(p) and not deleting(p)]
    finished = _finished(status)
    now = rfc3339(datetime.now(UTC))
    new_status: Obj = {
        "active": len(active),
        "succeeded": succeeded,
        "failed": failed,
        "startTime": status.get("startTime", now),
    }
    if finished is None:
        finished = _advance(store, job, succeeded, failed, active, new_status, now)
    if finished and _expired(spec, status):
        store.delete(res, ns, name)
        return
    if {k: status.get(k) for k in new_status} != new_status:
        store.patch(res, ns, name, "merge", {"status": new_status}, "status")


def _advance(
    store: Store, job: Obj, succeeded: int, failed: int, active: list[Obj], new_status: Obj, now: str
) -> str | None:
    """A Job not finished yet: finishes it (its condition and time in `new_status`) or starts the
    pods its parallelism allows. Returns how it finished, if it did."""
    spec, ns = job.get("spec") or {}, job["metadata"]["namespace"]
    completions = int(spec.get("completions", 1))
    done = _done_indexes(store, job)
    if done is not None:
        succeeded = len(done & set(range(completions)))
    finished = None
    if succeeded >= completions:
        finished = "Complete"
    elif failed > int(spec.get("backoffLimit", 6)):
        finished = "Failed"
        for p in active:
            store.delete(store.resource("v1/pods"), ns, p["metadata"]["name"])
    if finished:
        condition = {"type": finished, "status": "True", "lastTransitionTime": now}
        if finished == "Failed":
            condition["reason"] = "BackoffLimitExceeded"
        new_status["conditions"] = [condition]
        new_status["completionTime" if finished == "Complete" else "failedTime"] = now
    else:
        want = min(int(spec.get("parallelism", 1)), completions - succeeded) - len(active)
        _start(store, job, max(0, want), active, done)
    return finished


def _done_indexes(store: Store, job: Obj) -> set[int] | None:
    """An Indexed Job's indexes with a succeeded pod; None for a NonIndexed Job."""
    if (job.get("spec") or {}).get("completionMode") != "Indexed":
        return None
    mine = [p for p in pods(store, job["metadata"]["namespace"]) if owned(p, job)]
    return {_index(p) for p in mine if (p.get("status") or {}).get("phase") == "Succeeded"}


def _start(store: Store, job: Obj, want: int, active: list[Obj], done: set[int] | None) -> None:
    """`want` more pods: the lowest indexes neither done nor running (Indexed), else plain ones."""
    if done is None:
        for _ in range(want):
            _create_pod(store, job)
        return
    running = {_index(p) for p in active}
    completions = int((job.get("spec") or {}).get("completions", 1))
    missing = [i for i in range(completions) if i not in done and i not in running]
    for index in missing[:want]:
        _create_pod(store, job, index)


def _index(pod: Obj) -> int:
    value = str(((pod.get("metadata") or {}).get("annotations") or {}).get(JOB_COMPLETION_INDEX, ""))
    return int(value) if value.isdigit() else -1


def _expired(spec: Obj, status: Obj) -> bool:
    """ttlSecondsAfterFinished has passed since the Job finished (as its stored status says)."""
    ttl = spec.get("ttlSecondsAfterFinished")
    done_at = status.get("completionTime") or status.get("failedTime")
    return bool(
        ttl is not None and done_at and (datetime.now(UTC) - parse_rfc3339(done_at)).total_seconds() >= int(ttl)
    )


def _create_pod(store: Store, job: Obj, index: int | None = None) -> None:
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    pod_meta = template.get("metadata") or {}
    meta = job["metadata"]
    labels = {
        **(pod_meta.get("labels") or {}),
        "job-name": meta["name"],
        JOB_NAME: meta["name"],
        "controller-uid": meta["uid"],
        CONTROLLER_UID: meta["uid"],
    }
    annotations = dict(pod_meta.get("annotations") or {})
    spec = template.get("spec") or {}
    prefix = meta["name"]
    if index is not None:
        labels[JOB_COMPLETION_INDEX] = annotations[JOB_COMPLETION_INDEX] = str(index)
        spec.setdefault("hostname", f"{meta['name']}-{index}")
        for field in ("initContainers", "containers"):
            for container in spec.get(field) or []:
                env = container.setdefault("env", [])
                if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in env):
                    path = f"metadata.labels['{JOB_COMPLETION_INDEX}']"
                    env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {"fieldPath": path}}})
        prefix = f"{prefix}-{index}"
    pod = {
        "metadata": {
            "name": f"{prefix}-{secrets.token_hex(3)[:5]}",
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_ref(job)],
        },
        "spec": spec,
    }
    store.create(store.resource("v1/pods"), meta["namespace"], pod)
