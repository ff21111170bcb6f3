"""The seam between the node agent and the real API server: the Store's surface (resource, find,
items, listen, create, patch, delete) backed by kube-apiserver instead of the in-process store.

Reads come from a cache each watched resource keeps by list + watch (an informer, as client-go's):
one thread per resource streams the watch, applies each event to the cache, then hands the event
to the listeners on the agent's event loop, so `find` inside a listener already sees it. A watch
that ends resumes from its last resourceVersion; one that answers 410 Gone lists again and emits
the difference. Writes go straight to the API server (one HTTPS request each, on the caller's
thread: a local cluster's requests take milliseconds) and raise the Store's ApiError with the
API server's own Status.

It also issues ServiceAccount tokens through TokenRequest (`TokenRequestIssuer`), the signed JWTs a
kubelet mounts for projected volumes, and registers Nodes as a kubelet does (`register_node`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from ..common.timefmt import rfc3339
from .resources import Registry, Resource
from .store import ApiError, Event, Listener, Obj

log = logging.getLogger("sunk.local.remote")

WATCHED = ("v1/nodes", "v1/pods", "v1/services", "v1/configmaps", "v1/secrets", "v1/persistentvolumeclaims")
"""What the agent reads: its pods, the Nodes, and what pods mount or resolve."""
WATCH_SECONDS = 300
"""A watch's server-side timeout: it then resumes from its last version (what client-go does)."""
PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}


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


class RemoteStore:
    """The agent's store, backed by a real API server (see the module's docstring)."""

    def __init__(self, server: str, ca: Path, cert: Path, key: Path, watched: Iterable[str] = WATCHED) -> None:
        self.registry = Registry()
        context = ssl.create_default_context(cafile=str(ca))
        context.load_cert_chain(str(cert), str(key))
        self.client = httpx.Client(base_url=server, verify=context, timeout=30)
        self._watch_client = httpx.Client(base_url=server, verify=context, timeout=httpx.Timeout(30, read=None))
        self.watched = [self.resource(k) for k in watched]
        self._cache: dict[tuple[str, str, str], Obj] = {}
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []

    # -- the Store's read surface ---------------------------------------------------------------
    def resource(self, key: str) -> Resource:
        found = next((r for r in self.registry.all() if r.key == key), None)
        assert found is not None, key
        return found

    def find(self, res: Resource, namespace: str | None, name: str) -> Obj | None:
        if res.key not in {w.key for w in self.watched}:
            answer = self.client.get(_path(res, namespace, name))
            if answer.status_code == 404:
                return None
            if answer.status_code != 200:
                raise _error(answer)
            found: Obj = answer.json()
            return found
        with self._lock:
            obj = self._cache.get((res.key, namespace or "", name))
        return json.loads(json.dumps(obj)) if obj is not None else None

    def items(self, res: Resource, namespace: str | None = None) -> Iterator[Obj]:
        with self._lock:
            snapshot = [o for (k, ns, _), o in self._cache.items() if k == res.key and namespace in (None, ns)]
        yield from snapshot

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # -- writes ---------------------------------------------------------------------------------
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
        return self._answer(self.client.post(_path(res, namespace), json=body))

    def update(self, res: Resource, namespace: str | None, name: str, obj: Obj, subresource: str = "") -> Obj:
        body = {"apiVersion": res.api_version, "kind": res.kind, **obj}
        return self._answer(self.client.put(_path(res, namespace, name, subresource), json=body))

    def patch(
        self, res: Resource, namespace: str | None, name: str, kind: str, body: Any, subresource: str = ""
    ) -> Obj:
        answer = self.client.patch(
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
        return self._answer(self.client.request("DELETE", _path(res, namespace, name), json=options))

    # -- the informers --------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """List every watched resource into the cache (before returning: the agent's first pass
        sees the cluster as it is), then keep each current from its watch on a thread."""
        self._loop = loop or asyncio.get_running_loop()
        versions = {res.key: self._relist(res) for res in self.watched}
        for res in self.watched:
            thread = threading.Thread(
                target=self._watch, args=(res, versions[res.key]), name=f"watch-{res.plural}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def close(self) -> None:
        self._closed.set()
        self._watch_client.close()
        self.client.close()

    def _relist(self, res: Resource) -> str:
        """List `res` into the cache; the events that bring the cache there; the list's version."""
        listing = self._answer(self.client.get(_path(res, None)))
        fresh = {(res.key, o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in listing["items"]}
        events: list[Event] = []
        with self._lock:
            for k, obj in fresh.items():
                old = self._cache.get(k)
                if old is None or old["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                    events.append(Event(0, res.key, "ADDED" if old is None else "MODIFIED", obj, old))
            for k in [k for k in self._cache if k[0] == res.key and k not in fresh]:
                events.append(Event(0, res.key, "DELETED", self._cache[k], self._cache[k]))
                del self._cache[k]
            for k, obj in fresh.items():
                obj.setdefault("apiVersion", res.api_version)
                obj.setdefault("kind", res.kind)
                self._cache[k] = obj
        for event in events:
            self._deliver(event)
        return str(listing["metadata"]["resourceVersion"])

    def _watch(self, res: Resource, version: str) -> None:
        while not self._closed.is_set():
            try:
                version = self._stream(res, version)
            except _Gone:
                version = self._relist_quietly(res, version)
            except (httpx.HTTPError, ValueError) as err:
                if self._closed.is_set():
                    return
                log.warning("watch of %s broke (%s); resuming", res.key, err)
                self._closed.wait(1)

    def _relist_quietly(self, res: Resource, version: str) -> str:
        try:
            return self._relist(res)
        except (httpx.HTTPError, ApiError) as err:
            log.warning("list of %s failed (%s); retrying", res.key, err)
            self._closed.wait(1)
            return version

    def _stream(self, res: Resource, version: str) -> str:
        params = {
            "watch": "1",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        with self._watch_client.stream("GET", _path(res, None), params=params) as answer:
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
                    self._apply(res, event["type"], obj)
        return version

    def _apply(self, res: Resource, kind: str, obj: Obj) -> None:
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        meta = obj["metadata"]
        k = (res.key, meta.get("namespace", ""), meta["name"])
        with self._lock:
            old = self._cache.get(k)
            if kind == "DELETED":
                self._cache.pop(k, None)
            else:
                self._cache[k] = obj
        self._deliver(Event(int(meta.get("resourceVersion") or 0), res.key, kind, obj, old))

    def _deliver(self, event: Event) -> None:
        if self._loop is None or self._loop.is_closed():
            return
        for listener in list(self._listeners):
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(listener, event)


class _Gone(Exception):
    """The watch's version fell out of the API server's history: list again."""


class TokenRequestIssuer:
    """ServiceAccount tokens as a kubelet gets them for a projected volume: TokenRequest, a JWT
    the API server signs with its key, for its default audience and an hour."""

    EXPIRATION = 3600

    def __init__(self, store: RemoteStore) -> None:
        self.store = store

    def issue(self, namespace: str, account: str) -> str:
        res = self.store.resource("v1/serviceaccounts")
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": self.EXPIRATION},
        }
        answer = self.store.client.post(_path(res, namespace, account, "token"), json=body)
        return str(self.store._answer(answer)["status"]["token"])


def register_node(store: RemoteStore, node: Obj, address: str, kubelet_port: int) -> Obj:
    """Create (or take over) `node` as a kubelet registers itself: its labels and taints from the
    inventory, then its status: capacity and allocatable, InternalIP, the kubelet's port, Ready."""
    nodes = store.resource("v1/nodes")
    meta = node["metadata"]
    try:
        store.create(nodes, None, {"metadata": meta, "spec": node.get("spec") or {}})
    except ApiError as err:
        if err.code != 409:
            raise
    status = dict(node.get("status") or {})
    stamp = rfc3339(datetime.now(UTC))
    status["conditions"] = [
        {**c, "lastHeartbeatTime": stamp, "lastTransitionTime": stamp} for c in status.get("conditions") or []
    ]
    status["addresses"] = [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": meta["name"]}]
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": kubelet_port}}
    return store.patch(nodes, None, meta["name"], "merge", {"status": status}, "status")
