"""The seam between the node agent and the API server: the Store (apitypes.py: resource, find,
items, listen, create, update, patch, delete) backed by kube-apiserver.

Every request is made as one of the agent's Nodes, with that Node's client certificate
(`system:node:NAME` in `system:nodes`), so the Node authorizer and the NodeRestriction admission
plugin hold each Node's kubelet as they hold a real one:
- reads come from caches kept by list + watch (informers, as client-go's): each Node watches the
  pods bound to it (fieldSelector spec.nodeName, the only pod list a Node may make) and its own
  Node object (metadata.name); the Services (any Node may read them) through the first Node;
- Secrets, ConfigMaps and claims are read one by one (a Node may read only those its pods name):
  through a Node whose pod names the object, then any other Node with pods in its namespace, until
  the Node authorizer allows one (its graph follows the binding a moment behind: a refusal is
  retried by the pod's mount loop);
- writes go as the Node they concern: a pod's status and final delete as the Node it is bound to,
  a Node, its status and its Lease as itself, an Event as the Node of the pod it is about;
- with `network` credentials (user NETWORK, granted NETWORK_RULES by nodeagents.py), what the
  cluster's network parts read cluster-wide is watched as that user: Services, Namespaces and
  NetworkPolicies (what CoreDNS, kube-proxy and a CNI's policy agent watch on a real cluster,
  each with its own ServiceAccount), and a Service's status (a LoadBalancer's ingress, a cloud
  controller's write) goes as it. Pods need no more: every pod that runs is bound to one of the
  agent's Nodes, whose watches already see it.

One thread per watch streams it, applies each event to the cache, then hands the event to the
listeners on the agent's event loop, so `find` inside a listener already sees it. A watch that
ends resumes from its last resourceVersion; one that answers 410 Gone lists again and emits the
difference. Writes are one HTTPS request each, on the caller's thread (a local cluster's requests
take milliseconds), and raise the Store's ApiError with the API server's own Status.

What a Node may read and write is noderules.py's; nodeagents.py registers the Nodes and asks
TokenRequests through `request_token`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from .apitypes import ApiError, Event, Listener, Obj
from .noderules import references
from .resources import Registry, Resource

log = logging.getLogger("sunk.local.remote")

CACHED = ("v1/pods", "v1/nodes", "v1/services")
"""What the agent reads from its caches; everything else it reads with a GET when it needs it."""
BY_REFERENCE = ("v1/secrets", "v1/configmaps", "v1/persistentvolumeclaims")
"""What a Node may read only when one of its pods names it (the Node authorizer's graph)."""
WATCH_SECONDS = 300
"""A watch's server-side timeout: it then resumes from its last version (what client-go does)."""
PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}
LEASE_NAMESPACE = "kube-node-lease"
NETWORK = "system:sunk-local-network"
"""The user the network parts act as (a Node name can't hold a colon: never a Node's key)."""
NETWORK_CACHED = ("v1/services", "v1/namespaces", "networking.k8s.io/v1/networkpolicies")
NETWORK_RULES: list[dict[str, list[str]]] = [
    {
        "apiGroups": [""],
        "resources": ["pods", "services", "namespaces", "endpoints"],
        "verbs": ["get", "list", "watch"],
    },
    {"apiGroups": [""], "resources": ["services/status"], "verbs": ["patch", "update"]},
    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["get", "list", "watch"]},
]
"""What NETWORK may do: read what DNS, the Service ports and NetworkPolicy enforcement decide from,
and write a Service's status. Nothing else (no Secret, no pod write)."""


def _path(res: Resource, namespace: str | None, name: str = "", subresource: str = "") -> str:
    base = f"/api/{res.version}" if not res.group else f"/apis/{res.group}/{res.version}"
    if res.namespaced and namespace:
        base += f"/namespaces/{namespace}"
    base += f"/{res.plural}"
    if name:
        base += f"/{name}"
    if subresource:
        base += f"/{subresource}"
    return base


def _error(answer: httpx.Response) -> ApiError:
    try:
        status = answer.json()
    except ValueError:
        status = {}
    return ApiError(
        answer.status_code,
        str(status.get("reason") or "Unknown"),
        str(status.get("message") or answer.text[:500]),
        status.get("details"),
    )


@dataclass
class _Informer:
    """One list + watch: a resource as one Node may see it."""

    res: Resource
    node: str
    """Whose credentials it uses."""
    selector: str
    """Its fieldSelector ("" for all)."""
    keys: set[tuple[str, str, str]] = field(default_factory=set)
    """The cache entries it brought: a relist drops those it no longer finds, and only those."""


class RemoteStore:
    """The agent's store, backed by a real API server, acting as its Nodes (see the module's docstring)."""

    def __init__(
        self,
        server: str,
        ca: Path,
        nodes: Mapping[str, tuple[Path, Path]],
        network: tuple[Path, Path] | None = None,
    ) -> None:
        if not nodes:
            raise ValueError("a RemoteStore acts as at least one Node: give it a Node's certificate and key")
        self.registry = Registry()
        self.clients: dict[str, httpx.Client] = {}
        self._watch_clients: dict[str, httpx.Client] = {}
        self.server, self.ca = server, ca
        identities = {**nodes, **({NETWORK: network} if network else {})}
        for node, (cert, key) in identities.items():
            self._connect(node, cert, key)
        first = next(iter(nodes))
        self.network = network is not None
        self.cached = set(CACHED) | (set(NETWORK_CACHED) if network else set())
        self.informers = [
            *(_Informer(self.resource("v1/pods"), n, f"spec.nodeName={n}") for n in nodes),
            *(_Informer(self.resource("v1/nodes"), n, f"metadata.name={n}") for n in nodes),
            *(
                (_Informer(self.resource(k), NETWORK, "") for k in NETWORK_CACHED)
                if network
                else [_Informer(self.resource("v1/services"), first, "")]
            ),
        ]
        self._cache: dict[tuple[str, str, str], Obj] = {}
        self._pod_nodes: dict[tuple[str, str], str] = {}
        """(namespace, name) -> the Node a pod was last seen bound to: a write about a pod goes as
        that Node, also after the pod left the cache (its final delete races the watch)."""
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []

    def _connect(self, identity: str, cert: Path, key: Path) -> None:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.load_cert_chain(str(cert), str(key))
        self.clients[identity] = httpx.Client(base_url=self.server, verify=context, timeout=30)
        self._watch_clients[identity] = httpx.Client(
            base_url=self.server, verify=context, timeout=httpx.Timeout(30, read=None)
        )

    def add_node(self, node: str, cert: Path, key: Path) -> None:
        """Act as one more Node from now on (`sunk local apply` adding a NodeSet's Nodes): its client,
        and its pods' and its Node's informers, listed then watched as the first ones are."""
        if node in self.clients:
            return
        self._connect(node, cert, key)
        added = [
            _Informer(self.resource("v1/pods"), node, f"spec.nodeName={node}"),
            _Informer(self.resource("v1/nodes"), node, f"metadata.name={node}"),
        ]
        self.informers.extend(added)
        if self._loop is not None:
            self._follow(added)

    # -- the Store's read surface ---------------------------------------------------------------
    def resource(self, key: str) -> Resource:
        found = next((r for r in self.registry.all() if r.key == key), None)
        assert found is not None, key
        return found

    def find(self, res: Resource, namespace: str | None, name: str) -> Obj | None:
        if res.key not in self.cached:
            return self._get(res, namespace, name)
        with self._lock:
            obj = self._cache.get((res.key, namespace or "", name))
        return json.loads(json.dumps(obj)) if obj is not None else None

    def _get(self, res: Resource, namespace: str | None, name: str) -> Obj | None:
        refused: ApiError | None = None
        for node in self._readers(res, namespace or "", name):
            answer = self.clients[node].get(_path(res, namespace, name))
            if answer.status_code == 403:
                refused = _error(answer)
                continue
            if answer.status_code == 404:
                return None
            found: Obj = self._answer(answer)
            return found
        assert refused is not None
        raise refused

    def _readers(self, res: Resource, namespace: str, name: str) -> list[str]:
        """The Nodes that may read an object, likeliest first (see the module's docstring)."""
        if res.key == "coordination.k8s.io/v1/leases" and namespace == LEASE_NAMESPACE and name in self.clients:
            return [name]
        with self._lock:
            pods = [o for (k, ns, _), o in self._cache.items() if k == "v1/pods" and ns == namespace]
        naming = [p["spec"]["nodeName"] for p in pods if (res.key, name) in references(p)]
        near = [p["spec"]["nodeName"] for p in pods]
        ordered = list(dict.fromkeys([*naming, *near, *self.clients]))
        return [n for n in ordered if n in self.clients and n != NETWORK]

    def items(self, res: Resource, namespace: str | None = None) -> Iterator[Obj]:
        with self._lock:
            snapshot = [o for (k, ns, _), o in self._cache.items() if k == res.key and namespace in (None, ns)]
        yield from snapshot

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # -- writes, each as the Node it concerns ---------------------------------------------------
    def acting_node(self, res: Resource, namespace: str | None, name: str, body: Any = None) -> str:
        """The Node a write about `name` is made as; ApiError 403 when none of the agent's is concerned."""
        meta = body.get("metadata") or {} if isinstance(body, dict) else {}
        name = name or str(meta.get("name") or "")
        node = self._concerned(res, namespace or "", name, body if isinstance(body, dict) else {})
        if node not in self.clients:
            raise ApiError(403, "Forbidden", f"none of this agent's Nodes may write {res.key} {namespace or ''}/{name}")
        return str(node)

    def _concerned(self, res: Resource, namespace: str, name: str, body: Obj) -> str | None:
        """Who a write is about: a Node or its Lease itself, a pod's Node, the Node of the pod an
        Event is about, or the network user for a Service (its status)."""
        if res.key == "v1/nodes" or (res.key == "coordination.k8s.io/v1/leases" and namespace == LEASE_NAMESPACE):
            return name
        if res.key == "v1/services" and self.network:
            return NETWORK
        if res.key == "v1/pods":
            return self._pod_node(namespace, name) or (body.get("spec") or {}).get("nodeName")
        involved = body.get("involvedObject") or {}
        if res.key == "v1/events" and involved.get("kind", "Pod") == "Pod":
            return self._pod_node(involved.get("namespace", namespace), involved.get("name", ""))
        return None

    def _pod_node(self, namespace: str, name: str) -> str | None:
        with self._lock:
            return self._pod_nodes.get((namespace, name))

    def _answer(self, answer: httpx.Response) -> Obj:
        if answer.status_code >= 300:
            error = _error(answer)
            if answer.status_code not in (404, 409):
                # The agent's callers swallow ApiErrors (a write lost to a race is redone later):
                # a refusal on the merits must show somewhere.
                log.warning("%s %s: %d %s", answer.request.method, answer.request.url.path, error.code, error.message)
            raise error
        body: Obj = answer.json()
        return body

    def create(self, res: Resource, namespace: str | None, obj: Obj) -> Obj:
        body = {"apiVersion": res.api_version, "kind": res.kind, **obj}
        client = self.clients[self.acting_node(res, namespace, "", body)]
        return self._answer(client.post(_path(res, namespace), json=body))

    def update(self, res: Resource, namespace: str | None, name: str, obj: Obj, subresource: str = "") -> Obj:
        body = {"apiVersion": res.api_version, "kind": res.kind, **obj}
        client = self.clients[self.acting_node(res, namespace, name, body)]
        return self._answer(client.put(_path(res, namespace, name, subresource), json=body))

    def patch(
        self, res: Resource, namespace: str | None, name: str, kind: str, body: Any, subresource: str = ""
    ) -> Obj:
        client = self.clients[self.acting_node(res, namespace, name, body)]
        answer = client.patch(
            _path(res, namespace, name, subresource),
            content=json.dumps(body).encode(),
            headers={"Content-Type": PATCH_TYPES[kind]},
        )
        return self._answer(answer)

    def delete(
        self, res: Resource, namespace: str | None, name: str, *, grace: int | None = None, uid: str | None = None
    ) -> Obj:
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if uid:
            options["preconditions"] = {"uid": uid}
        client = self.clients[self.acting_node(res, namespace, name)]
        return self._answer(client.request("DELETE", _path(res, namespace, name), json=options))

    def request_token(self, pod: Obj, account: str, body: Obj) -> Obj:
        """POST a TokenRequest for `pod`'s account, as the Node the pod is bound to."""
        meta = pod["metadata"]
        node = self._pod_node(meta["namespace"], meta["name"]) or (pod.get("spec") or {}).get("nodeName")
        if node not in self.clients:
            raise ApiError(403, "Forbidden", f"pod {meta['namespace']}/{meta['name']} is on none of this agent's Nodes")
        res = self.resource("v1/serviceaccounts")
        return self._answer(self.clients[str(node)].post(_path(res, meta["namespace"], account, "token"), json=body))

    # -- the informers --------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """List every informer into the cache (before returning: the agent's first pass sees the
        cluster as it is), then keep each current from its watch on a thread."""
        self._loop = loop or asyncio.get_running_loop()
        self._follow(self.informers)

    def _follow(self, informers: list[_Informer]) -> None:
        versions = [self._relist(informer) for informer in informers]
        for informer, version in zip(informers, versions, strict=True):
            name = f"watch-{informer.res.plural}-{informer.node}"
            thread = threading.Thread(target=self._watch, args=(informer, version), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        self._closed.set()
        for client in [*self._watch_clients.values(), *self.clients.values()]:
            client.close()

    def _params(self, informer: _Informer) -> dict[str, str]:
        return {"fieldSelector": informer.selector} if informer.selector else {}

    def _relist(self, informer: _Informer) -> str:
        """List into the cache; deliver the events that bring the cache there; the list's version."""
        res = informer.res
        client = self.clients[informer.node]
        listing = self._answer(client.get(_path(res, None), params=self._params(informer)))
        fresh = {(res.key, o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in listing["items"]}
        events: list[Event] = []
        with self._lock:
            for k, obj in fresh.items():
                old = self._cache.get(k)
                if old is None or old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                    events.append(Event(0, res.key, "ADDED" if old is None else "MODIFIED", obj, old))
            for k in [k for k in informer.keys if k not in fresh and k in self._cache]:
                events.append(Event(0, res.key, "DELETED", self._cache[k], self._cache[k]))
                del self._cache[k]
            informer.keys = set(fresh)
            for k, obj in fresh.items():
                obj.setdefault("apiVersion", res.api_version)
                obj.setdefault("kind", res.kind)
                self._cache[k] = obj
                self._note(res, obj)
        for event in events:
            self._deliver(event)
        return str(listing["metadata"]["resourceVersion"])

    def _note(self, res: Resource, obj: Obj) -> None:
        node = (obj.get("spec") or {}).get("nodeName")
        if res.key == "v1/pods" and node:
            self._pod_nodes[(obj["metadata"].get("namespace", ""), obj["metadata"]["name"])] = node

    def _watch(self, informer: _Informer, version: str) -> None:
        while not self._closed.is_set():
            try:
                version = self._stream(informer, version)
            except _Gone:
                version = self._relist_quietly(informer, version)
            except (httpx.HTTPError, ValueError, ApiError) as err:
                if self._closed.is_set():
                    return
                log.warning("watch of %s as %s broke (%s); resuming", informer.res.key, informer.node, err)
                self._closed.wait(1)

    def _relist_quietly(self, informer: _Informer, version: str) -> str:
        try:
            return self._relist(informer)
        except (httpx.HTTPError, ApiError) as err:
            log.warning("list of %s as %s failed (%s); retrying", informer.res.key, informer.node, err)
            self._closed.wait(1)
            return version

    def _stream(self, informer: _Informer, version: str) -> str:
        params = {
            **self._params(informer),
            "watch": "1",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        client = self._watch_clients[informer.node]
        with client.stream("GET", _path(informer.res, None), params=params) as answer:
            if answer.status_code == 410:
                raise _Gone
            if answer.status_code != 200:
                answer.read()
                raise _error(answer)
            for line in answer.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                obj = event["object"]
                if event["type"] == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone
                    raise ValueError(obj.get("message", "watch error"))
                version = obj["metadata"]["resourceVersion"]
                if event["type"] != "BOOKMARK":
                    self._apply(informer, event["type"], obj)
        return version

    def _apply(self, informer: _Informer, kind: str, obj: Obj) -> None:
        res = informer.res
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        meta = obj["metadata"]
        k = (res.key, meta.get("namespace", ""), meta["name"])
        with self._lock:
            old = self._cache.get(k)
            if kind == "DELETED":
                self._cache.pop(k, None)
                informer.keys.discard(k)
            else:
                self._cache[k] = obj
                informer.keys.add(k)
                self._note(res, obj)
        self._deliver(Event(int(meta.get("resourceVersion") or 0), res.key, kind, obj, old))

    def _deliver(self, event: Event) -> None:
        if self._loop is None or self._loop.is_closed():
            return
        for listener in list(self._listeners):
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(listener, event)


class _Gone(Exception):
    """The watch's version fell out of the API server's history: list again."""
