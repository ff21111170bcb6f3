"""Events as the kubelet's and kube-scheduler's recorders write them: a core v1 Event per (object,
reason, message), its count raised and lastTimestamp moved when it repeats (the recorder's
aggregation by key), so `kubectl describe pod` and `kubectl get events` show what a real cluster
shows for a pod that waits: FailedMount from the node agent, FailedScheduling from the scheduler.

Not modelled: the recorder's spam filter and its merging of similar messages into one ("combined
from similar events"), and events.k8s.io/v1 series; a repeat is counted at most every REPEAT
seconds, as a kubelet's back-off spaces its retries."""

from __future__ import annotations

import hashlib
import time
from datetime import UTC, datetime

from ..common.timefmt import rfc3339
from .store import ApiError, Obj, Store

REPEAT = 20.0
"""Seconds between two counts of the same Event (the kubelet retries a mount with back-off)."""

_counted: dict[str, tuple[float, int]] = {}
"""Event name -> when it was last counted and its count: a recorder counts from its own memory and
never reads Events back (a Node may write Events, not read them)."""


def record(store: Store, involved: Obj, reason: str, message: str, *, component: str, host: str = "") -> None:
    """A Warning Event about `involved` (a pod), or one more count of the same one."""
    meta = involved["metadata"]
    namespace, uid = meta.get("namespace", "default"), meta.get("uid", "")
    name = f"{meta['name']}.{hashlib.sha256(f'{uid}/{reason}/{message}'.encode()).hexdigest()[:16]}"
    now = time.monotonic()
    last, count = _counted.get(name, (-REPEAT, 0))
    if now - last < REPEAT:
        return
    _counted[name] = (now, count + 1)
    res, stamp = store.resource("v1/events"), rfc3339(datetime.now(UTC))
    about = {
        "apiVersion": "v1", "kind": involved.get("kind", "Pod"), "namespace": namespace,
        "name": meta["name"], "uid": uid,
    }  # fmt: skip
    try:
        if count:
            # involvedObject unchanged, so the API knows (and a remote store routes by) what it is about.
            body = {"involvedObject": about, "count": count + 1, "lastTimestamp": stamp}
            store.patch(res, namespace, name, "merge", body)
            return
        store.create(res, namespace, {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": about,
            "reason": reason,
            "message": message,
            "type": "Warning",
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": component, **({"host": host} if host else {})},
            "reportingComponent": component,
            "reportingInstance": host or component,
        })  # fmt: skip
    except ApiError as err:  # an Event is best effort, as a recorder's: it never stops the pod's work
        if err.code != 409:  # one already there (an earlier run's) is counted on from here
            _counted.pop(name, None)
