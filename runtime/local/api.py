"""The local cluster's API server: the Kubernetes REST API over HTTPS, on the store.

Served: discovery (/api, /apis and each group version, CRDs' kinds included), /version,
/openapi/v3 (only what kubectl reads to learn that the server checks fields itself, see
`openapi_v3`), create/get/list/watch/update/patch/delete of every resource in resources.py,
the status and scale subresources, server-side printing (kubectl's tables) and, through the
node agent, pods/log (follow too) and pods/exec over WebSocket (the v5 and v4 channel
protocols kubectl 1.32 tries first), with a terminal for `kubectl exec -it`. A request on a
resource is read (`_address`), authorized, then served by its verb's handler: `_list` (and watch),
`_create`, `_delete_collection` on a collection; `_get`, `_update`, `_patch`, `_delete` on an object
or its status; the subresources with handlers of their own (`_subresource`). Beside it:
printing.py the tables, eviction.py the disruption budgets' check, podexec.py exec's channels.

Every request needs a bearer token from `tokens` (kubectl's comes from the kubeconfig); a missing
or unknown one gets 401. Requests for resources are then authorized by the RBAC objects in the
store (rbac.py): a ServiceAccount token may do what its bindings allow, and gets a 403 naming the
verb and the resource otherwise; the kubeconfig's admin is in system:masters. Not modelled: exec
over SPDY (kubectl's fallback, refused
with 400), protobuf (a protobuf body gets 415 with the way round), field validation beyond what kubectl does itself, paging.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import aiohttp
import aiohttp.web
import yaml

from ..common.timefmt import rfc3339
from . import podexec, rbac
from .eviction import eviction_refusal
from .printing import table
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
        """Discovery and OpenAPI first, then a group version's resources, then the local cluster's
        own verbs on Nodes."""
        path = request.path.rstrip("/")
        found = self._discovery(path)
        if found is not None:
            return aiohttp.web.json_response(found)
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 3 and parts[1] == "v1":
            return await self._resource(request, "v1", parts[2:])
        if parts[:3] == ["sunk-local", "v1", "nodes"] and len(parts) == 5:
            return await self._node_agent(request, parts[3], parts[4])
        if parts[0] == "apis" and len(parts) >= 4:
            return await self._resource(request, f"{parts[1]}/{parts[2]}", parts[3:])
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    def _discovery(self, path: str) -> Obj | None:
        """/version, /api, /apis, /api/v1, /apis/GROUP/VERSION and /openapi/v3[/...]; None for
        other paths."""
        if path == "/version":
            return VERSION
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        if path == "/apis":
            return self._groups()
        if path == "/api/v1":
            return _resource_list("v1", [r for r in self.store.registry.all() if not r.group])
        if path == "/openapi/v3" or path.startswith("/openapi/v3/"):
            index, docs = openapi_v3(self.store)
            if path == "/openapi/v3":
                return index
            doc = docs.get(path.removeprefix("/openapi/v3/"))
            if doc is None:
                raise ApiError(404, "NotFound", f"no OpenAPI document at {path}")
            return doc
        parts = path.strip("/").split("/")
        if parts[0] == "apis" and len(parts) == 3:
            gv = f"{parts[1]}/{parts[2]}"
            found = [r for r in self.store.registry.all() if r.api_version == gv]
            if not found:
                raise ApiError(404, "NotFound", f"the server could not find the requested resource ({gv})")
            return _resource_list(gv, found)
        return None

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
        """A request on a resource: its address read, authorized, then handed to its verb's handler
        (a collection's, a subresource's or an object's)."""
        res, namespace, name, sub = self._address(gv, parts)
        self._authorize(request, res, namespace, name, sub)
        if name is None:
            on_collection = {"GET": self._list, "POST": self._create, "DELETE": self._delete_collection}
            handler = on_collection.get(request.method)
            if handler is None:
                raise ApiError(405, "MethodNotAllowed", f"{request.method} is not allowed on a collection")
            return await handler(request, res, namespace)
        served = await self._subresource(request, res, namespace, name, sub)
        if served is not None:
            return served
        if sub not in ("", "status"):
            raise ApiError(404, "NotFound", f"{res.plural}/{sub} is not served by the local cluster")
        on_object = {"GET": self._get, "PUT": self._update, "PATCH": self._patch, "DELETE": self._delete}
        verb = on_object.get(request.method)
        if verb is None:
            raise ApiError(405, "MethodNotAllowed", f"{request.method} is not allowed on {res.plural}/{name}")
        return await verb(request, res, namespace, name, sub)

    def _address(self, gv: str, parts: list[str]) -> tuple[Resource, str | None, str | None, str]:
        """The resource, namespace, name and subresource a path's parts after the group version name."""
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
        return res, namespace, name, sub

    # -- verbs on a collection ---------------------------------------------------------------
    async def _list(
        self, request: aiohttp.web.Request, res: Resource, namespace: str | None
    ) -> aiohttp.web.StreamResponse:
        """list, or watch (`?watch=true`), as JSON or as kubectl's table."""
        query = request.query
        if query.get("watch") in ("true", "1"):
            return await self._watch(request, res, namespace)
        listed = self.store.list(res, namespace, query.get("labelSelector", ""), query.get("fieldSelector", ""))
        if _wants_table(request):
            return aiohttp.web.json_response(table(res, listed["items"], listed["metadata"]["resourceVersion"]))
        return aiohttp.web.json_response(listed)

    async def _create(
        self, request: aiohttp.web.Request, res: Resource, namespace: str | None
    ) -> aiohttp.web.StreamResponse:
        body = await self._body(request)
        created = self.store.create(res, namespace, body) if request.query.get("dryRun") is None else body
        return aiohttp.web.json_response(created, status=201)

    async def _delete_collection(
        self, request: aiohttp.web.Request, res: Resource, namespace: str | None
    ) -> aiohttp.web.StreamResponse:
        query = request.query
        listed = self.store.list(res, namespace, query.get("labelSelector", ""), query.get("fieldSelector", ""))
        for item in listed["items"]:
            with contextlib.suppress(ApiError):
                self.store.delete(res, namespace, item["metadata"]["name"])
        return aiohttp.web.json_response(listed)

    # -- subresources with handlers of their own -------------------------------------------------
    async def _subresource(
        self, request: aiohttp.web.Request, res: Resource, namespace: str | None, name: str, sub: str
    ) -> aiohttp.web.StreamResponse | None:
        """pods/binding, pods/eviction, pods/log, pods/exec and scale; None for the object itself
        and its status, which the object's verbs serve."""
        if res.kind == "Pod" and sub in ("binding", "eviction") and request.method == "POST":
            body = await self._body(request)
            return (
                self._bind(res, namespace, name, body) if sub == "binding" else self._evict(res, namespace, name, body)
            )
        if res.kind == "Pod" and sub in ("log", "exec"):
            pod = self.store.get(res, namespace, name)
            return await (self._log(request, pod) if sub == "log" else self._exec(request, pod))
        if sub == "scale" and res.scale:
            return await self._scale(request, res, namespace, name)
        return None

    # -- verbs on an object (or its status) ----------------------------------------------------
    async def _get(
        self, request: aiohttp.web.Request, res: Resource, namespace: str | None, name: str, sub: str
    ) -> aiohttp.web.StreamResponse:
        obj = self.store.get(res, namespace, name)
        if _wants_table(request):
            return aiohttp.web.json_response(table(res, [obj], obj["metadata"]["resourceVersion"]))
        return aiohttp.web.json_response(obj)

    async def _update(
        self, request: aiohttp.web.Request, res: Resource, namespace: str | None, name: str, sub: str
    ) -> aiohttp.web.StreamResponse:
        return aiohttp.web.json_response(self.store.update(res, namespace, name, await self._body(request), sub))

    async def _patch(
        self, request: aiohttp.web.Request, res: Resource, namespace: str | None, name: str, sub: str
    ) -> aiohttp.web.StreamResponse:
        kind = _patch_kind(request.content_type)
        body = json.loads(await request.read() or b"{}")
        if request.query.get("dryRun") is not None:
            return aiohttp.web.json_response(self.store.get(res, namespace, name))
        return aiohttp.web.json_response(self.store.patch(res, namespace, name, kind, body, sub))

    async def _delete(
        self, request: aiohttp.web.Request, res: Resource, namespace: str | None, name: str, sub: str
    ) -> aiohttp.web.StreamResponse:
        """delete, with DeleteOptions from the body (grace period, uid precondition) or the query."""
        raw = await request.read()
        try:
            options = json.loads(raw) if raw else {}
        except ValueError:  # DeleteOptions in another encoding: the query's are enough
            options = {}
        grace = options.get("gracePeriodSeconds", request.query.get("gracePeriodSeconds"))
        uid = ((options.get("preconditions") or {}).get("uid")) or None
        gone = self.store.delete(res, namespace, name, grace=None if grace is None else int(grace), uid=uid)
        return aiohttp.web.json_response(gone)

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
        if "protobuf" in request.content_type:
            # kubectl create <kind> sends built-in types as protobuf, which this server doesn't read:
            # 415, as kube-apiserver answers a media type it doesn't serve, with the way round.
            raise ApiError(415, "UnsupportedMediaType", PROTOBUF_REFUSED)
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
            code = await podexec.exec_tty(ws, argv)
        else:
            code = await podexec.exec_pipes(ws, argv, stdin)
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


PROTOBUF_REFUSED = (
    "the local cluster's API server reads JSON and YAML bodies, not protobuf, which `kubectl create <kind>` "
    "sends: make the object with `kubectl create ... --dry-run=client -o yaml | kubectl apply -f -`"
)


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
