"""The local cluster's API server: the Kubernetes REST API over HTTPS, on the store.

Served: discovery (/api, /apis and each group version, CRDs' kinds included), /version,
/openapi/v3 (only what kubectl reads to learn that the server checks fields itself, see
`openapi_v3`), create/get/list/watch/update/patch/delete of every resource in resources.py,
the status and scale subresources, server-side printing (kubectl's tables) and, through the
node agent, pods/log (follow too) and pods/exec over WebSocket (the v5 and v4 channel
protocols kubectl 1.32 tries first), with a terminal for `kubectl exec -it`.

Every request needs a bearer token from `tokens` (kubectl's comes from the kubeconfig); a missing
or unknown one gets 401. Requests for resources are then authorized by the RBAC objects in the
store (rbac.py): a ServiceAccount token may do what its bindings allow, and gets a 403 naming the
verb and the resource otherwise; the kubeconfig's admin is in system:masters. Not modelled: exec
over SPDY (kubectl's fallback, refused
with 400), protobuf, field validation beyond what kubectl does itself, paging.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import ssl
import struct
import termios
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import aiohttp
import aiohttp.web
import yaml

from ..common.timefmt import parse_rfc3339, rfc3339
from . import rbac
from .resources import Resource
from .store import ApiError, Obj, Store

VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-sunk-local",
    "platform": "linux/amd64",
    "goVersion": "go1.23",
    "compiler": "gc",
}
"""What /version reports: the API this server imitates (kubectl warns when more than one minor apart)."""


class Agent(Protocol):
    """What the API server asks the node agent for: a container's log and a command in it."""

    def log_path(self, pod: Obj, container: str, previous: bool) -> Path | None: ...

    def exec_argv(self, pod: Obj, container: str, command: Sequence[str]) -> list[str]: ...

    async def stop_node(self, name: str, keep_containers: bool = False) -> str: ...

    async def start_node(self, name: str) -> None: ...


def _status(err: ApiError) -> aiohttp.web.Response:
    return aiohttp.web.json_response(err.status(), status=err.code)


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
    reason = status.get("reason") or status.get("phase", "Pending")
    for s in status.get("initContainerStatuses") or []:
        waiting = (s.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") not in (None, "PodInitializing"):
            reason = f"Init:{waiting['reason']}"
    for s in statuses:
        state = s.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason") and reason == "Running":
            reason = state["terminated"]["reason"]
    if pod["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    return [
        pod["metadata"]["name"],
        f"{ready}/{total}",
        reason,
        restarts,
        _age(pod["metadata"].get("creationTimestamp")),
        status.get("podIP") or "<none>",
        (pod.get("spec") or {}).get("nodeName") or "<none>",
    ]


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


def _wants_table(request: aiohttp.web.Request) -> bool:
    return "as=Table" in request.headers.get("Accept", "")


def _resource_list(group_version: str, resources: list[Resource]) -> Obj:
    out = []
    for r in sorted(resources, key=lambda r: r.plural):
        entry = {
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": list(r.verbs),
        }
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        out.append(entry)
        if r.status:
            out.append(
                {
                    "name": f"{r.plural}/status",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "kind": r.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if r.scale:
            out.append(
                {
                    "name": f"{r.plural}/scale",
                    "singularName": "",
                    "namespaced": r.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": ["get", "patch", "update"],
                }
            )
        if r.kind == "Pod":
            out += [
                {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
                {"name": "pods/exec", "singularName": "", "namespaced": True, "kind": "PodExecOptions", "verbs": ["create", "get"]},
                {"name": "pods/binding", "singularName": "", "namespaced": True, "kind": "Binding", "verbs": ["create"]},
                {"name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy", "version": "v1",
                 "kind": "Eviction", "verbs": ["create"]},
            ]  # fmt: skip
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": out}


def openapi_v3(store: Store) -> tuple[Obj, dict[str, Obj]]:
    """The /openapi/v3 index and one document per group version, holding only what kubectl reads
    to decide how to validate: each kind's PATCH and POST with the `fieldValidation` parameter.
    kubectl then leaves validation to the server (which stores fields as written, see store.py)
    and, finding no strategic-merge-patch schemas here, computes its patches from the Kubernetes
    types built into it, as it does for any server without them."""
    docs: dict[str, Obj] = {}
    for r in store.registry.all():
        prefix = "api/v1" if not r.group else f"apis/{r.api_version}"
        doc = docs.setdefault(
            prefix, {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": VERSION["gitVersion"]}, "paths": {}}
        )
        scope = "/namespaces/{namespace}" if r.namespaced else ""
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        param = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}]
        op = {"x-kubernetes-group-version-kind": gvk, "parameters": param}
        doc["paths"][f"/{prefix}{scope}/{r.plural}/{{name}}"] = {"patch": {**op, "x-kubernetes-action": "patch"}}
        doc["paths"][f"/{prefix}{scope}/{r.plural}"] = {"post": {**op, "x-kubernetes-action": "post"}}
    index = {"paths": {p: {"serverRelativeURL": f"/openapi/v3/{p}"} for p in sorted(docs)}}
    return index, docs


USER = aiohttp.web.RequestKey("user", str)
"""The authenticated user of a request (its token's)."""

Handler = Callable[[aiohttp.web.Request], Awaitable[aiohttp.web.StreamResponse]]


class ApiServer:
    def __init__(self, store: Store, tokens: dict[str, str], agent: Agent | None = None) -> None:
        self.store = store
        self.tokens = tokens
        """bearer token -> user name; shared with the node agent, which adds ServiceAccount tokens."""
        self.agent = agent
        self.app = aiohttp.web.Application(middlewares=[self._auth], client_max_size=64 * 1024 * 1024)
        self.app.router.add_route("*", "/{tail:.*}", self._route)

    @aiohttp.web.middleware
    async def _auth(self, request: aiohttp.web.Request, handler: Handler) -> aiohttp.web.StreamResponse:
        if request.path in ("/healthz", "/readyz", "/livez"):
            return aiohttp.web.Response(text="ok")
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":  # the scheme is case-insensitive: the Python client sends "bearer"
            token = ""
        token = token.strip()
        if token not in self.tokens:
            return _status(ApiError(401, "Unauthorized", "Unauthorized"))
        request[USER] = self.tokens[token]
        try:
            return await handler(request)
        except ApiError as err:
            return _status(err)
        except Exception as err:  # a bug here: the client gets a Status, the log the traceback
            logging.getLogger("sunk.local.api").exception("%s %s", request.method, request.path_qs)
            return _status(ApiError(500, "InternalError", f"the local API server failed: {err!r}"))

    async def _route(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        path = request.path.rstrip("/")
        if path == "/version":
            return aiohttp.web.json_response(VERSION)
        if path == "/api":
            return aiohttp.web.json_response(
                {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
            )
        if path == "/apis":
            return aiohttp.web.json_response(self._groups())
        if path == "/api/v1":
            return aiohttp.web.json_response(
                _resource_list("v1", [r for r in self.store.registry.all() if not r.group])
            )
        if path == "/openapi/v3" or path.startswith("/openapi/v3/"):
            index, docs = openapi_v3(self.store)
            if path == "/openapi/v3":
                return aiohttp.web.json_response(index)
            doc = docs.get(path.removeprefix("/openapi/v3/"))
            if doc is None:
                raise ApiError(404, "NotFound", f"no OpenAPI document at {path}")
            return aiohttp.web.json_response(doc)
        parts = path.strip("/").split("/")
        if parts[0] == "apis" and len(parts) == 3:
            gv = f"{parts[1]}/{parts[2]}"
            found = [r for r in self.store.registry.all() if r.api_version == gv]
            if not found:
                raise ApiError(404, "NotFound", f"the server could not find the requested resource ({gv})")
            return aiohttp.web.json_response(_resource_list(gv, found))
        if parts[0] == "api" and len(parts) >= 3 and parts[1] == "v1":
            return await self._resource(request, "v1", parts[2:])
        if parts[:3] == ["sunk-local", "v1", "nodes"] and len(parts) == 5:
            return await self._node_agent(request, parts[3], parts[4])
        if parts[0] == "apis" and len(parts) >= 4:
            return await self._resource(request, f"{parts[1]}/{parts[2]}", parts[3:])
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    async def _node_agent(self, request: aiohttp.web.Request, node: str, verb: str) -> aiohttp.web.StreamResponse:
        """POST /sunk-local/v1/nodes/NAME/stop|stop-keep-containers|start: one Node's agent stops
        (as a Node losing power, or only its kubelet, its containers running on) or starts again
        (`sunk local node`). The local cluster's own verb: the admin's only."""
        verbs = ("stop", "stop-keep-containers", "start")
        if request.method != "POST" or verb not in verbs:
            raise ApiError(405, "MethodNotAllowed", "POST /sunk-local/v1/nodes/NAME/" + "|".join(verbs))
        if request.get(USER, "") != rbac.ADMIN:
            raise ApiError(403, "Forbidden", f"only the local cluster's admin may {verb} a Node's agent")
        if self.agent is None:
            raise ApiError(404, "NotFound", "this API server has no node agent")
        if verb == "start":
            await self.agent.start_node(node)
            said = f"node {node}: agent started"
        else:
            said = await self.agent.stop_node(node, keep_containers=verb == "stop-keep-containers")
        return aiohttp.web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Success", "message": said})

    def _groups(self) -> Obj:
        groups: dict[str, list[str]] = {}
        for r in self.store.registry.all():
            if r.group and r.version not in groups.setdefault(r.group, []):
                groups[r.group].append(r.version)
        out = []
        for name, versions in sorted(groups.items()):
            listed = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
            out.append({"name": name, "versions": listed, "preferredVersion": listed[0]})
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}

    # -- resources ---------------------------------------------------------------------------
    async def _resource(self, request: aiohttp.web.Request, gv: str, parts: list[str]) -> aiohttp.web.StreamResponse:
        namespace: str | None = None
        if parts[0] == "namespaces" and len(parts) >= 3 and self.store.registry.get(gv, parts[2]) is not None:
            namespace, parts = parts[1], parts[2:]
        res = self.store.registry.get(gv, parts[0])
        if res is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource ({gv}/{parts[0]})")
        name = parts[1] if len(parts) > 1 else None
        sub = parts[2] if len(parts) > 2 else ""
        if res.namespaced and name is not None and namespace is None and res.kind != "Namespace":
            raise ApiError(404, "NotFound", f"{res.plural} is namespaced: /namespaces/<ns>/{res.plural}/{name}")
        method, query = request.method, request.query
        self._authorize(request, res, namespace, name, sub)
        if name is None:
            if method == "GET" and query.get("watch") in ("true", "1"):
                return await self._watch(request, res, namespace)
            if method == "GET":
                listed = self.store.list(res, namespace, query.get("labelSelector", ""), query.get("fieldSelector", ""))
                if _wants_table(request):
                    return aiohttp.web.json_response(table(res, listed["items"], listed["metadata"]["resourceVersion"]))
                return aiohttp.web.json_response(listed)
            if method == "POST":
                body = await self._body(request)
                created = self.store.create(res, namespace, body) if query.get("dryRun") is None else body
                return aiohttp.web.json_response(created, status=201)
            if method == "DELETE":
                listed = self.store.list(res, namespace, query.get("labelSelector", ""), query.get("fieldSelector", ""))
                for item in listed["items"]:
                    with contextlib.suppress(ApiError):
                        self.store.delete(res, namespace, item["metadata"]["name"])
                return aiohttp.web.json_response(listed)
            raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on a collection")
        if res.kind == "Pod" and sub in ("binding", "eviction") and method == "POST":
            body = await self._body(request)
            return (
                self._bind(res, namespace, name, body) if sub == "binding" else self._evict(res, namespace, name, body)
            )
        if res.kind == "Pod" and sub in ("log", "exec"):
            pod = self.store.get(res, namespace, name)
            return await (self._log(request, pod) if sub == "log" else self._exec(request, pod))
        if sub == "scale" and res.scale:
            return await self._scale(request, res, namespace, name)
        if sub not in ("", "status"):
            raise ApiError(404, "NotFound", f"{res.plural}/{sub} is not served by the local cluster")
        if method == "GET":
            obj = self.store.get(res, namespace, name)
            if _wants_table(request):
                return aiohttp.web.json_response(table(res, [obj], obj["metadata"]["resourceVersion"]))
            return aiohttp.web.json_response(obj)
        if method == "PUT":
            return aiohttp.web.json_response(self.store.update(res, namespace, name, await self._body(request), sub))
        if method == "PATCH":
            kind = _patch_kind(request.content_type)
            body = json.loads(await request.read() or b"{}")
            if query.get("dryRun") is not None:
                return aiohttp.web.json_response(self.store.get(res, namespace, name))
            return aiohttp.web.json_response(self.store.patch(res, namespace, name, kind, body, sub))
        if method == "DELETE":
            raw = await request.read()
            try:
                options = json.loads(raw) if raw else {}
            except ValueError:  # DeleteOptions in another encoding: the query's are enough
                options = {}
            grace = options.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
            uid = ((options.get("preconditions") or {}).get("uid")) or None
            gone = self.store.delete(res, namespace, name, grace=None if grace is None else int(grace), uid=uid)
            return aiohttp.web.json_response(gone)
        raise ApiError(405, "MethodNotAllowed", f"{method} is not allowed on {res.plural}/{name}")

    def _authorize(
        self, request: aiohttp.web.Request, res: Resource, namespace: str | None, name: str | None, sub: str
    ) -> None:
        """403 unless the store's RBAC objects allow this request (rbac.py)."""
        user = request.get(USER, "")
        watch = request.query.get("watch") in ("true", "1")
        if res.kind == "Namespace" and name is not None:
            namespace = name  # a namespace's own object is authorized in that namespace
        attributes = rbac.Request(
            user=user,
            groups=rbac.groups_of(user),
            verb=rbac.verb_of(request.method, name is not None, watch, sub),
            api_group=res.group,
            resource=res.plural,
            subresource=sub,
            namespace=namespace,
            name=name,
        )
        message = rbac.decide(self._rbac_objects, attributes)
        if message is not None:
            details = {"name": name or "", "group": res.group, "kind": res.plural}
            raise ApiError(403, "Forbidden", message, details)

    def _rbac_objects(self, plural: str, namespace: str | None) -> Iterable[Obj]:
        return self.store.items(self.store.resource(f"rbac.authorization.k8s.io/v1/{plural}"), namespace)

    def _bind(self, res: Resource, namespace: str | None, name: str, body: Obj) -> aiohttp.web.Response:
        node = (body.get("target") or {}).get("name")
        if not node:
            raise ApiError(400, "BadRequest", "binding has no target node")
        pod = self.store.get(res, namespace, name)
        if (pod.get("spec") or {}).get("nodeName"):
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on pods/binding "{name}": pod {name} is already assigned to node '
                f'"{pod["spec"]["nodeName"]}"',
            )
        uid = (body.get("metadata") or {}).get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            raise ApiError(409, "Conflict", "Precondition failed: UID in precondition does not match")
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        self.store.patch(
            res, namespace, name, "merge", {"spec": {"nodeName": node}, "metadata": {"annotations": annotations}}
        )
        conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") != "PodScheduled"]
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(datetime.now(UTC))})
        self.store.patch(res, namespace, name, "merge", {"status": {"conditions": conditions}}, "status")
        return aiohttp.web.json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, status=201
        )

    def _evict(self, res: Resource, namespace: str | None, name: str, body: Obj) -> aiohttp.web.Response:
        pod = self.store.get(res, namespace, name)
        options = body.get("deleteOptions") or {}
        uid = (options.get("preconditions") or {}).get("uid")
        refusal = eviction_refusal(pod, self.store.items(self.store.resource("policy/v1/poddisruptionbudgets"), namespace),
                                   list(self.store.items(res, namespace)))  # fmt: skip
        if refusal is not None:
            raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.",
                           {"causes": [{"reason": "DisruptionBudget", "message": refusal}]})  # fmt: skip
        grace = options.get("gracePeriodSeconds")
        self.store.delete(res, namespace, name, grace=None if grace is None else int(grace), uid=uid)
        return aiohttp.web.json_response(
            {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, status=201
        )

    async def _body(self, request: aiohttp.web.Request) -> Obj:
        raw = await request.read()
        try:
            body = yaml.safe_load(raw) if "yaml" in request.content_type else json.loads(raw)
        except (ValueError, yaml.YAMLError) as err:
            raise ApiError(400, "BadRequest", f"the request body is not JSON: {err}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "BadRequest", "the request body is not an object")
        return body

    async def _scale(
        self, request: aiohttp.web.Request, res: Resource, namespace: str | None, name: str
    ) -> aiohttp.web.StreamResponse:
        obj = self.store.get(res, namespace, name)
        if request.method in ("PUT", "PATCH"):
            body = json.loads(await request.read() or b"{}")
            replicas = (body.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise ApiError(422, "Invalid", "spec.replicas: a whole number of 0 or more is needed")
            obj = self.store.patch(res, namespace, name, "merge", {"spec": {"replicas": replicas}})
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        selector = ",".join(
            f"{k}={v}" for k, v in sorted(((spec.get("selector") or {}).get("matchLabels") or {}).items())
        )
        return aiohttp.web.json_response(
            {
                "kind": "Scale",
                "apiVersion": "autoscaling/v1",
                "metadata": {
                    k: obj["metadata"][k]
                    for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                    if k in obj["metadata"]
                },
                "spec": {"replicas": spec.get("replicas", 0)},
                "status": {"replicas": status.get("replicas", 0), "selector": selector},
            }
        )

    async def _watch(
        self, request: aiohttp.web.Request, res: Resource, namespace: str | None
    ) -> aiohttp.web.StreamResponse:
        query = request.query
        watch = self.store.watch(
            res,
            namespace,
            query.get("labelSelector", ""),
            query.get("fieldSelector", ""),
            query.get("resourceVersion", ""),
        )
        timeout = float(query.get("timeoutSeconds") or 1800)
        bookmarks = query.get("allowWatchBookmarks") == "true"
        as_table = _wants_table(request)
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                left = deadline - loop.time()
                if left <= 0:
                    break
                try:
                    event = await asyncio.wait_for(watch.queue.get(), min(left, 5.0) if bookmarks else left)
                except TimeoutError:
                    if bookmarks:
                        meta = {"resourceVersion": str(self.store.version)}
                        mark = {"kind": res.kind, "apiVersion": res.api_version, "metadata": meta}
                        await response.write(json.dumps({"type": "BOOKMARK", "object": mark}).encode() + b"\n")
                    continue
                if event is None:
                    break
                shown = watch.shown(event)
                if shown is None:
                    continue
                if as_table:
                    obj = shown["object"]
                    shown = {"type": shown["type"], "object": table(res, [obj], obj["metadata"]["resourceVersion"])}
                await response.write(json.dumps(shown).encode() + b"\n")
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unwatch(watch)
        return response

    # -- logs and exec -----------------------------------------------------------------------
    def _container(self, pod: Obj, wanted: str | None) -> str:
        spec = pod.get("spec") or {}
        names = [c["name"] for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])]
        if wanted:
            if wanted not in names:
                raise ApiError(400, "BadRequest", f"container {wanted} is not valid for pod {pod['metadata']['name']}")
            return wanted
        main = [c["name"] for c in spec.get("containers") or []]
        default = (pod["metadata"].get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
        return str(default) if default in names else main[0]

    async def _log(self, request: aiohttp.web.Request, pod: Obj) -> aiohttp.web.StreamResponse:
        container = self._container(pod, request.query.get("container"))
        previous = request.query.get("previous") == "true"
        path = self.agent.log_path(pod, container, previous) if self.agent else None
        if path is None or not path.exists():
            name = pod["metadata"]["name"]
            what = "previous terminated container" if previous else "container"
            raise ApiError(400, "BadRequest", f'{what} "{container}" in pod "{name}" is waiting to start')
        response = aiohttp.web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        tail = request.query.get("tailLines")
        with path.open("rb") as handle:
            data = handle.read()
            if tail is not None:
                lines = data.splitlines(keepends=True)
                data = b"".join(lines[-int(tail) :]) if int(tail) > 0 else b""
            await response.write(data)
            while request.query.get("follow") == "true":
                chunk = handle.read()
                if chunk:
                    await response.write(chunk)
                    continue
                current = self.store.find(
                    self.store.resource("v1/pods"), pod["metadata"]["namespace"], pod["metadata"]["name"]
                )
                if current is None or current["metadata"].get("uid") != pod["metadata"].get("uid"):
                    break
                await asyncio.sleep(0.2)
        return response

    async def _exec(self, request: aiohttp.web.Request, pod: Obj) -> aiohttp.web.StreamResponse:
        protocols = ("v5.channel.k8s.io", "v4.channel.k8s.io")
        container = self._container(pod, request.query.get("container"))
        command = request.query.getall("command", [])
        if not command:
            raise ApiError(400, "BadRequest", "you must specify at least one command for the container")
        if self.agent is None or (pod.get("status") or {}).get("phase") != "Running":
            raise ApiError(400, "BadRequest", f"pod {pod['metadata']['name']} is not running")
        # The Node's agent refuses before the upgrade (a plain error, whichever protocol kubectl tries).
        argv = self.agent.exec_argv(pod, container, command)
        if request.headers.get("Upgrade", "").lower() != "websocket":
            raise ApiError(400, "BadRequest", "exec is served over WebSocket (v5.channel.k8s.io) only; SPDY is not")
        ws = aiohttp.web.WebSocketResponse(protocols=protocols)
        await ws.prepare(request)
        stdin = request.query.get("stdin") in ("true", "1")
        if request.query.get("tty") in ("true", "1"):
            code = await _exec_tty(ws, argv)
        else:
            code = await _exec_pipes(ws, argv, stdin)
        if code == 0:
            result: Obj = {"metadata": {}, "status": "Success"}
        else:
            result = {
                "metadata": {},
                "status": "Failure",
                "message": f"command terminated with non-zero exit code: exit status {code}",
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
            }
        await ws.send_bytes(b"\x03" + json.dumps(result).encode())
        await ws.close()
        return ws


async def _exec_pipes(ws: aiohttp.web.WebSocketResponse, argv: list[str], stdin: bool) -> int:
    """A command with stdin (channel 0), stdout (1) and stderr (2) as pipes; its exit status."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )

    async def pump(stream: asyncio.StreamReader | None, channel: int) -> None:
        assert stream is not None
        while chunk := await stream.read(65536):
            await ws.send_bytes(bytes([channel]) + chunk)

    async def feed() -> None:
        assert proc.stdin is not None
        async for message in ws:
            if message.type != aiohttp.WSMsgType.BINARY or not message.data:
                continue
            channel, data = message.data[0], message.data[1:]
            if channel == 0 and data:
                proc.stdin.write(data)
                await proc.stdin.drain()
            elif channel == 255 and data[:1] == b"\x00":  # v5: the client closed stdin
                proc.stdin.close()
        with contextlib.suppress(Exception):
            proc.stdin.close()

    feeder = asyncio.create_task(feed()) if stdin else None
    await asyncio.gather(pump(proc.stdout, 1), pump(proc.stderr, 2))
    code = await proc.wait()
    if feeder is not None:
        feeder.cancel()
    return code


async def _exec_tty(ws: aiohttp.web.WebSocketResponse, argv: list[str]) -> int:
    """`kubectl exec -it`: the command on a new pseudo-terminal (its controlling terminal, as a
    container runtime gives one), stdin from channel 0, the terminal's output on channel 1, and
    window sizes from channel 4 ({"Width", "Height"}); its exit status."""
    master, slave = os.openpty()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=slave, stdout=slave, stderr=slave, env={**os.environ, "SUNK_LOCAL_TTY": "1"}
    )
    os.close(slave)
    loop = asyncio.get_running_loop()
    output: asyncio.Queue[bytes] = asyncio.Queue()

    def readable() -> None:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every process holding the terminal is gone
            chunk = b""
        if not chunk:
            loop.remove_reader(master)
        output.put_nowait(chunk)

    loop.add_reader(master, readable)

    async def pump() -> None:
        while chunk := await output.get():
            await ws.send_bytes(b"\x01" + chunk)

    async def feed() -> None:
        async for message in ws:
            if message.type != aiohttp.WSMsgType.BINARY or not message.data:
                continue
            channel, data = message.data[0], message.data[1:]
            if channel == 0 and data:
                with contextlib.suppress(OSError):
                    os.write(master, data)
            elif channel == 4 and data:
                with contextlib.suppress(ValueError, OSError):
                    size = json.loads(data)
                    winsize = struct.pack("HHHH", int(size.get("Height", 24)), int(size.get("Width", 80)), 0, 0)
                    fcntl.ioctl(master, termios.TIOCSWINSZ, winsize)

    feeder = asyncio.create_task(feed())
    try:
        await pump()
        code = await proc.wait()
    finally:
        feeder.cancel()
        with contextlib.suppress(ValueError, OSError):
            loop.remove_reader(master)
        os.close(master)
    return code


def _patch_kind(content_type: str) -> str:
    kinds = {
        "application/merge-patch+json": "merge",
        "application/strategic-merge-patch+json": "strategic",
        "application/json-patch+json": "json",
        "application/apply-patch+yaml": "apply",
    }
    if content_type not in kinds:
        raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}")
    return kinds[content_type]


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert), str(key))
    return context


def _ready_pod(pod: Obj) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _budget(value: Any, expected: int) -> int:
    text = str(value)
    if text.endswith("%"):
        return -(-int(text[:-1]) * expected // 100)  # rounded up, as the disruption controller does
    return int(text)


def eviction_refusal(pod: Obj, budgets: Iterable[Obj], pods: list[Obj]) -> str | None:
    """Why evicting `pod` would break a PodDisruptionBudget of its namespace, or None when it may
    go (pods/eviction's check): Pending and terminal pods always may; with
    unhealthyPodEvictionPolicy AlwaysAllow, so may a pod that is not Ready."""
    if (pod.get("status") or {}).get("phase") in ("Pending", "Succeeded", "Failed"):
        return None
    labels = pod["metadata"].get("labels") or {}
    for pdb in budgets:
        spec = pdb.get("spec") or {}
        selector = (spec.get("selector") or {}).get("matchLabels") or {}
        if not selector or any(labels.get(k) != v for k, v in selector.items()):
            continue
        if spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow" and not _ready_pod(pod):
            continue
        matching = [
            p for p in pods if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
        ]
        healthy = sum(1 for p in matching if _ready_pod(p))
        after = healthy - (1 if _ready_pod(pod) else 0)
        name = pdb["metadata"]["name"]
        if "minAvailable" in spec and after < _budget(spec["minAvailable"], len(matching)):
            return f"The disruption budget {name} needs {_budget(spec['minAvailable'], len(matching))} healthy pods and has {healthy} currently"
        if "maxUnavailable" in spec and len(matching) - after > _budget(spec["maxUnavailable"], len(matching)):
            return (
                f"The disruption budget {name} allows {_budget(spec['maxUnavailable'], len(matching))} unavailable pods"
            )
    return None
