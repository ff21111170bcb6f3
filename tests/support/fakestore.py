"""A fake of the node agent's Store (runtime/local/apitypes.Store) for unit tests of its parts
(events.py's recorder, ports.py): objects in a dict, listeners called at once on each write.

What it can't model, so a test that depends on any of it belongs on the real control plane
(marker `controlplane`, tests/runtime/local/controlplane):
- no resourceVersion conflicts (every write wins) and no watch history;
- no admission, defaulting, validation or RBAC (the Node authorizer and NodeRestriction included):
  objects are stored as written, plus a uid, a name from generateName and a resourceVersion;
- merge patches only (RFC 7386), applied to the whole object: no strategic merge, no JSON patch,
  and a /status write changes the rest of the object too;
- deletion is immediate: no finalizers, no grace period, no garbage collection of dependents.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from collections.abc import Iterator
from typing import Any

from sunk.runtime.local.apitypes import ApiError, Event, Listener, Obj
from sunk.runtime.local.resources import Registry, Resource


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class FakeStore:
    def __init__(self) -> None:
        self.registry = Registry()
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self._listeners: list[Listener] = []
        self._versions = itertools.count(1)

    def resource(self, key: str) -> Resource:
        found = next((r for r in self.registry.all() if r.key == key), None)
        assert found is not None, key
        return found

    def find(self, res: Resource, namespace: str | None, name: str) -> Obj | None:
        found = self.objects.get((res.key, namespace or "", name))
        return copy.deepcopy(found) if found is not None else None

    def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        found = self.find(res, namespace, name)
        if found is None:
            raise ApiError(404, "NotFound", f'{res.plural} "{name}" not found')
        return found

    def items(self, res: Resource, namespace: str | None = None) -> Iterator[Obj]:
        for (key, ns, _), obj in list(self.objects.items()):
            if key == res.key and namespace in (None, ns):
                yield copy.deepcopy(obj)

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _store(self, res: Resource, kind: str, obj: Obj, old: Obj | None) -> Obj:
        version = next(self._versions)
        obj["metadata"]["resourceVersion"] = str(version)
        meta = obj["metadata"]
        key = (res.key, meta.get("namespace", ""), meta["name"])
        if kind == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        for listener in list(self._listeners):
            listener(Event(version, res.key, kind, copy.deepcopy(obj), old))
        return copy.deepcopy(obj)

    def create(self, res: Resource, namespace: str | None, obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        meta["name"] = meta.get("name") or f"{meta.get('generateName', '')}{uuid.uuid4().hex[:5]}"
        if res.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        if self.find(res, meta.get("namespace"), meta["name"]) is not None:
            raise ApiError(409, "AlreadyExists", f'{res.plural} "{meta["name"]}" already exists')
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        meta["uid"] = str(uuid.uuid4())
        return self._store(res, "ADDED", obj, None)

    def update(self, res: Resource, namespace: str | None, name: str, obj: Obj, subresource: str = "") -> Obj:
        old = self.get(res, namespace, name)
        new = copy.deepcopy(obj)
        new["metadata"] = {**old["metadata"], **(new.get("metadata") or {})}
        return self._store(res, "MODIFIED", new, old)

    def patch(
        self, res: Resource, namespace: str | None, name: str, kind: str, body: Any, subresource: str = ""
    ) -> Obj:
        if kind != "merge":
            raise NotImplementedError(f"FakeStore patches with merge only, not {kind}")
        old = self.get(res, namespace, name)
        new: Obj = merge_patch(old, body)
        new["metadata"] = {**new.get("metadata", {}), "name": name, "uid": old["metadata"]["uid"]}
        return self._store(res, "MODIFIED", new, old)

    def delete(
        self, res: Resource, namespace: str | None, name: str, *, grace: int | None = None, uid: str | None = None
    ) -> Obj:
        old = self.get(res, namespace, name)
        if uid and uid != old["metadata"]["uid"]:
            raise ApiError(409, "Conflict", f"Precondition failed: UID in precondition: {uid}")
        return self._store(res, "DELETED", copy.deepcopy(old), None)
