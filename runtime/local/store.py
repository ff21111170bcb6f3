"""The local cluster's object store: what etcd and the API server's registry do, in memory.

Every write gets the next resourceVersion; lists answer the current one; watches stream events
after a version from a bounded history (410 Gone below it), as the API server does. What it
fills on create (uid, creationTimestamp, generation, namespace, a pod's Pending phase, what the
mutating admission in `admission` adds), how
deletion goes (finalizers hold an object with a deletionTimestamp; a pod bound to a Node waits for
its node agent unless deleted with grace 0; owners' deletion removes their dependents) and the
/status subresource (main writes keep status, status writes keep the rest) follow the API server.

Not modelled: persistence across a restart of the local cluster's process (the store lives as long
as the cluster), server-side apply, defaulting and schema validation of
fields (objects are stored as written), foreground cascading deletion (background only), paging
of lists (`limit`/`continue` are ignored: one page) and an Event's TTL.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import itertools
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..common.selectors import Requirement, parse_selector, selector_matches
from ..common.timefmt import rfc3339
from . import patch as patching
from .resources import Registry, Resource

Obj = dict[str, Any]
HISTORY = 20_000
"""Watch events kept for watches that resume from a version."""


class ApiError(Exception):
    """An answer other than success, with the API server's Status fields."""

    def __init__(self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = dict(details or {})

    def status(self) -> Obj:
        body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
        body |= {"message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


def not_found(res: Resource, name: str) -> ApiError:
    group = f".{res.group}" if res.group else ""
    details = {"name": name, "group": res.group, "kind": res.plural}
    return ApiError(404, "NotFound", f'{res.plural}{group} "{name}" not found', details)


def _path(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


@dataclass(frozen=True)
class FieldTerm:
    path: str
    value: str
    equal: bool


def parse_fields(text: str) -> tuple[FieldTerm, ...]:
    terms = []
    for raw in (t.strip() for t in text.split(",") if t.strip()):
        if "!=" in raw:
            key, _, value = raw.partition("!=")
            terms.append(FieldTerm(key.strip(), value.strip(), False))
        else:
            key, _, value = raw.partition("=")
            terms.append(FieldTerm(key.strip(), value.strip().lstrip("="), True))
    return tuple(terms)


def fields_match(terms: tuple[FieldTerm, ...], obj: Mapping[str, Any]) -> bool:
    for term in terms:
        found = _path(obj, term.path)
        text = "" if found is None else str(found)
        if (text == term.value) != term.equal:
            return False
    return True


@dataclass
class Event:
    version: int
    resource: str
    type: str
    obj: Obj
    old: Obj | None


@dataclass(eq=False)
class Watch:
    """One open watch: events already due (`first`) and a queue the store keeps filling."""

    resource: Resource
    namespace: str | None
    labels: tuple[Requirement, ...]
    fields: tuple[FieldTerm, ...]
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)

    def visible(self, obj: Mapping[str, Any] | None) -> bool:
        if obj is None:
            return False
        meta = obj.get("metadata") or {}
        return (
            (self.namespace is None or meta.get("namespace") == self.namespace)
            and selector_matches(self.labels, meta.get("labels") or {})
            and fields_match(self.fields, obj)
        )

    def shown(self, event: Event) -> Obj | None:
        """The watch event for a store event, or None when the watch does not see it: an object
        that leaves the selection is DELETED to this watch, one that enters it ADDED."""
        now, before = self.visible(event.obj), self.visible(event.old)
        if event.type == "DELETED":
            return {"type": "DELETED", "object": event.obj} if before or now else None
        if now:
            kind = "ADDED" if event.type == "ADDED" or not before else "MODIFIED"
            return {"type": kind, "object": event.obj}
        return {"type": "DELETED", "object": event.obj} if before else None


Listener = Callable[[Event], None]


class Store:
    def __init__(self, registry: Registry | None = None, clock: Callable[[], datetime] | None = None) -> None:
        self.registry = registry or Registry()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._objects: dict[tuple[str, str, str], Obj] = {}
        self._versions = itertools.count(1)
        self.version = 0
        self._history: collections.deque[Event] = collections.deque(maxlen=HISTORY)
        self._floor = 0
        self._watches: set[Watch] = set()
        self._listeners: list[Listener] = []
        self.admission: list[Callable[[Resource, Obj], None]] = []
        """Mutating admission: each is called with a new object before it is stored (lifecycle.py's
        DefaultTolerationSeconds); one may raise ApiError to refuse it."""

    # -- reads ---------------------------------------------------------------------------------
    def find(self, res: Resource, namespace: str | None, name: str) -> Obj | None:
        found = self._objects.get((res.key, namespace or "", name))
        return copy.deepcopy(found) if found is not None else None

    def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        found = self.find(res, namespace, name)
        if found is None:
            raise not_found(res, name)
        return found

    def items(self, res: Resource, namespace: str | None = None) -> Iterator[Obj]:
        """The live objects (not copies: for the in-process controllers, which must not change them)."""
        for (key, ns, _), obj in self._objects.items():
            if key == res.key and (namespace is None or ns == namespace):
                yield obj

    def list(self, res: Resource, namespace: str | None, labels: str = "", fields: str = "") -> Obj:
        selector, terms = parse_selector(labels), parse_fields(fields)
        items = [
            copy.deepcopy(o)
            for o in self.items(res, namespace)
            if selector_matches(selector, (o["metadata"].get("labels") or {})) and fields_match(terms, o)
        ]
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        return {
            "apiVersion": res.api_version,
            "kind": f"{res.kind}List",
            "metadata": {"resourceVersion": str(self.version)},
            "items": items,
        }

    # -- watches -------------------------------------------------------------------------------
    def listen(self, listener: Listener) -> None:
        """Call `listener` with every event (the in-process controllers and node agent)."""
        self._listeners.append(listener)

    def watch(self, res: Resource, namespace: str | None, labels: str, fields: str, since: str) -> Watch:
        watch = Watch(res, namespace, parse_selector(labels), parse_fields(fields))
        if since in ("", "0"):
            for obj in self.items(res, namespace):
                watch.queue.put_nowait(Event(self.version, res.key, "ADDED", copy.deepcopy(obj), None))
        elif int(since) + 1 < self._floor:
            raise ApiError(410, "Expired", f"too old resource version: {since} ({self._floor})")
        else:
            for event in self._history:
                if event.resource == res.key and event.version > int(since):
                    watch.queue.put_nowait(event)
        self._watches.add(watch)
        return watch

    def unwatch(self, watch: Watch) -> None:
        self._watches.discard(watch)

    def close_watches(self) -> None:
        for watch in self._watches:
            watch.queue.put_nowait(None)

    def _emit(self, res: Resource, kind: str, obj: Obj, old: Obj | None) -> None:
        event = Event(self.version, res.key, kind, copy.deepcopy(obj), old)
        if len(self._history) == self._history.maxlen:
            self._floor = self._history[0].version + 1
        self._history.append(event)
        for watch in self._watches:
            if watch.resource.key == res.key:
                watch.queue.put_nowait(event)
        for listener in list(self._listeners):
            listener(event)

    def _stamp(self, obj: Obj) -> None:
        self.version = next(self._versions)
        obj["metadata"]["resourceVersion"] = str(self.version)

    # -- writes --------------------------------------------------------------------------------
    def create(self, res: Resource, namespace: str | None, obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise ApiError(422, "Invalid", f"{res.kind} has no metadata.name (nor generateName)")
            meta["name"] = f"{prefix}{uuid.uuid4().hex[:5]}"
        if res.namespaced:
            ns = namespace or meta.get("namespace") or "default"
            if meta.get("namespace") and meta["namespace"] != ns:
                raise ApiError(400, "BadRequest", "the namespace of the object does not match the namespace of the URL")
            meta["namespace"] = ns
            if res.kind != "Namespace" and (
                self.find(self.registry.get("v1", "namespaces"), None, ns) is None  # type: ignore[arg-type]
            ):
                raise ApiError(404, "NotFound", f'namespaces "{ns}" not found')
        else:
            meta.pop("namespace", None)
        key = (res.key, meta.get("namespace", ""), meta["name"])
        if key in self._objects:
            group = f".{res.group}" if res.group else ""
            details = {"name": meta["name"], "group": res.group, "kind": res.plural}
            raise ApiError(409, "AlreadyExists", f'{res.plural}{group} "{meta["name"]}" already exists', details)
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self._clock())
        meta["generation"] = 1
        meta.pop("deletionTimestamp", None)
        for admit in self.admission:
            admit(res, obj)
        if res.kind == "Pod":
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        elif res.kind == "Namespace":
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]
            obj["status"] = {"phase": "Active"}
        if res.kind == "CustomResourceDefinition":
            self.registry.add_crd(obj)
            obj["status"] = {
                "conditions": [{"type": "Established", "status": "True"}],
                "acceptedNames": obj["spec"]["names"],
            }
        self._stamp(obj)
        self._objects[key] = obj
        self._emit(res, "ADDED", obj, None)
        return copy.deepcopy(obj)

    def update(self, res: Resource, namespace: str | None, name: str, obj: Obj, subresource: str = "") -> Obj:
        current = self._objects.get((res.key, namespace or "", name))
        if current is None:
            raise not_found(res, name)
        wanted = (obj.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            group = f".{res.group}" if res.group else ""
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {res.plural}{group} "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
            )
        return self._write(res, current, copy.deepcopy(obj), subresource)

    def patch(
        self, res: Resource, namespace: str | None, name: str, kind: str, body: Any, subresource: str = ""
    ) -> Obj:
        current = self._objects.get((res.key, namespace or "", name))
        if current is None:
            raise not_found(res, name)
        try:
            if kind == "merge":
                new = patching.merge_patch(current, body)
            elif kind == "strategic":
                new = patching.strategic_merge(current, body)
            elif kind == "json":
                new = patching.json_patch(current, body)
            else:
                raise ApiError(415, "UnsupportedMediaType", f"the patch type {kind} is not served here")
        except (patching.PatchError, KeyError, IndexError, ValueError, TypeError) as err:
            raise ApiError(422, "Invalid", f"the patch does not apply: {err}") from None
        if not isinstance(new, dict):
            raise ApiError(422, "Invalid", "the patch turns the object into something that is not an object")
        wanted = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise ApiError(
                409, "Conflict", f'Operation cannot be fulfilled on {res.plural} "{name}": the object has been modified'
            )
        return self._write(res, current, new, subresource)

    def _write(self, res: Resource, current: Obj, new: Obj, subresource: str) -> Obj:
        old = copy.deepcopy(current)
        meta = new.setdefault("metadata", {})
        for fixed in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ):
            if fixed in current["metadata"]:
                meta[fixed] = current["metadata"][fixed]
            else:
                meta.pop(fixed, None)
        new["apiVersion"], new["kind"] = res.api_version, res.kind
        if subresource == "status":
            kept = copy.deepcopy(current)
            kept["status"] = new.get("status", {})
            new = kept
        elif res.status and res.kind not in ("Namespace",):
            if "status" in current:
                new["status"] = copy.deepcopy(current["status"])
            else:
                new.pop("status", None)
        body_changed = {k: v for k, v in new.items() if k not in ("metadata", "status")} != {
            k: v for k, v in current.items() if k not in ("metadata", "status")
        }
        meta["generation"] = current["metadata"].get("generation", 1) + (1 if body_changed else 0)
        meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        if new == current:
            return copy.deepcopy(current)  # no change: the API server writes nothing either
        if res.kind == "CustomResourceDefinition":
            self.registry.add_crd(new)
        current.clear()
        current.update(new)
        self._stamp(current)
        released = current["metadata"].get("deletionTimestamp") and not current["metadata"].get("finalizers")
        if released and (res.kind != "Pod" or not (current.get("spec") or {}).get("nodeName")):
            self._remove(res, current)
            return copy.deepcopy(current)
        self._emit(res, "MODIFIED", current, old)
        return copy.deepcopy(current)

    def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        grace: int | None = None,
        uid: str | None = None,
    ) -> Obj:
        current = self._objects.get((res.key, namespace or "", name))
        if current is None:
            raise not_found(res, name)
        if uid and uid != current["metadata"].get("uid"):
            raise ApiError(
                409,
                "Conflict",
                f"Precondition failed: UID in precondition: {uid}, UID in object meta: {current['metadata'].get('uid')}",
            )
        meta = current["metadata"]
        pod_waits = res.kind == "Pod" and (current.get("spec") or {}).get("nodeName") and grace != 0
        phase = (current.get("status") or {}).get("phase")
        if pod_waits and phase in ("Succeeded", "Failed"):
            pod_waits = False
        if meta.get("finalizers") or pod_waits:
            old = copy.deepcopy(current)
            if not meta.get("deletionTimestamp"):
                meta["deletionTimestamp"] = rfc3339(self._clock())
                if res.kind == "Pod":
                    default = (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
                    meta["deletionGracePeriodSeconds"] = default if grace is None else grace
            elif res.kind == "Pod" and grace is not None:
                meta["deletionGracePeriodSeconds"] = min(grace, meta.get("deletionGracePeriodSeconds", grace))
            self._stamp(current)
            self._emit(res, "MODIFIED", current, old)
            return copy.deepcopy(current)
        self._remove(res, current)
        return copy.deepcopy(current)

    def _remove(self, res: Resource, obj: Obj) -> None:
        meta = obj["metadata"]
        del self._objects[(res.key, meta.get("namespace", ""), meta["name"])]
        self._stamp(obj)
        self._emit(res, "DELETED", obj, None)
        if res.kind == "CustomResourceDefinition":
            self.registry.remove_crd(meta["name"])
        if res.kind == "Namespace":
            for other in self.registry.all():
                if other.namespaced:
                    for child in list(self.items(other, meta["name"])):
                        self._delete_quietly(other, child)
        self._collect(meta["uid"])

    def _collect(self, owner_uid: str) -> None:
        """Garbage collection (background): dependents whose every owner is gone are deleted."""
        live = {o["metadata"]["uid"] for o in self._objects.values()}
        for (key, _, _), obj in list(self._objects.items()):
            refs = obj["metadata"].get("ownerReferences") or []
            if any(r.get("uid") == owner_uid for r in refs) and not any(r.get("uid") in live for r in refs):
                res = next(r for r in self.registry.all() if r.key == key)
                self._delete_quietly(res, obj)

    def _delete_quietly(self, res: Resource, obj: Obj) -> None:
        meta = obj["metadata"]
        if (res.key, meta.get("namespace", ""), meta["name"]) in self._objects:
            self.delete(res, meta.get("namespace"), meta["name"])

    def resource(self, key: str) -> Resource:
        found = next((r for r in self.registry.all() if r.key == key), None)
        assert found is not None, key
        return found
