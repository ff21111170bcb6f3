"""Server-side printing for the local API server: the Table kubectl asks for (`Accept:
application/json;as=Table`) instead of the objects, with the columns `kubectl get` shows: pods'
NAME, READY, STATUS (kubectl's reason, see `_pod_reason`), RESTARTS, AGE and, with -o wide, IP
and NODE; Nodes' STATUS, ROLES, AGE and VERSION; a CRD's additionalPrinterColumns; NAME and AGE
for every other kind.

Not modelled: the other built-in kinds' own columns (Deployments' UP-TO-DATE, Services' PORTS...),
priority columns beyond -o wide's, a CRD column's format and description."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ..common.timefmt import parse_rfc3339
from .resources import Resource
from .store import Obj


def _age(stamp: str | None) -> str:
    if not stamp:
        return "<unknown>"
    seconds = int((datetime.now(UTC) - parse_rfc3339(stamp)).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def _jsonpath(obj: Any, path: str) -> Any:
    for part in path.strip(".").split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _pod_cells(pod: Obj) -> list[Any]:
    status = pod.get("status") or {}
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    total = len((pod.get("spec") or {}).get("containers") or [])
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    return [
        pod["metadata"]["name"],
        f"{ready}/{total}",
        _pod_reason(pod),
        restarts,
        _age(pod["metadata"].get("creationTimestamp")),
        status.get("podIP") or "<none>",
        (pod.get("spec") or {}).get("nodeName") or "<none>",
    ]


def _pod_reason(pod: Obj) -> str:
    """kubectl's STATUS column: the pod's reason or phase, overridden by an init container's
    waiting reason (Init:...), then a container's waiting reason or, while Running, its terminated
    reason, and Terminating above all."""
    status = pod.get("status") or {}
    reason = status.get("reason") or status.get("phase", "Pending")
    for s in status.get("initContainerStatuses") or []:
        waiting = (s.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") not in (None, "PodInitializing"):
            reason = f"Init:{waiting['reason']}"
    for s in status.get("containerStatuses") or []:
        state = s.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason") and reason == "Running":
            reason = state["terminated"]["reason"]
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return str(reason)


def _node_cells(node: Obj) -> list[Any]:
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c.get("status") for c in conditions if c.get("type") == "Ready"), "Unknown")
    state = "Ready" if ready == "True" else "NotReady"
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    roles = ",".join(
        sorted(
            k.rpartition("/")[2]
            for k in node["metadata"].get("labels") or {}
            if k.startswith("node-role.kubernetes.io/")
        )
    )
    info = (node.get("status") or {}).get("nodeInfo") or {}
    return [
        node["metadata"]["name"],
        state,
        roles or "<none>",
        _age(node["metadata"].get("creationTimestamp")),
        info.get("kubeletVersion", ""),
    ]


def _column(name: str, kind: str = "string", priority: int = 0, fmt: str = "") -> Obj:
    return {"name": name, "type": kind, "format": fmt, "description": name, "priority": priority}


def table(res: Resource, items: list[Obj], version: str) -> Obj:
    """Server-side printing: what `kubectl get` shows."""
    if res.kind == "Pod":
        columns = [
            _column("Name", fmt="name"),
            _column("Ready"),
            _column("Status"),
            _column("Restarts", "integer"),
            _column("Age"),
            _column("IP", priority=1),
            _column("Node", priority=1),
        ]
        cells = [_pod_cells(o) for o in items]
    elif res.kind == "Node":
        columns = [_column("Name", fmt="name"), _column("Status"), _column("Roles"), _column("Age"), _column("Version")]
        cells = [_node_cells(o) for o in items]
    elif res.printer_columns:
        columns = [_column("Name", fmt="name")] + [
            _column(c["name"], c.get("type", "string"), int(c.get("priority", 0))) for c in res.printer_columns
        ]
        cells = [
            [o["metadata"]["name"]]
            + [
                _age(_jsonpath(o, c["jsonPath"])) if c.get("type") == "date" else _jsonpath(o, c["jsonPath"])
                for c in res.printer_columns
            ]
            for o in items
        ]
    else:
        columns = [_column("Name", fmt="name"), _column("Age")]
        cells = [[o["metadata"]["name"], _age(o["metadata"].get("creationTimestamp"))] for o in items]
    rows = [
        {
            "cells": c,
            "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]},
        }
        for c, o in zip(cells, items, strict=True)
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": version},
        "columnDefinitions": columns,
        "rows": rows,
    }
