"""The informer's store: projections of one kind of object by key, a sequence number bumped by
every real change and a bounded change log, so `view(since)` answers "what changed after this
cursor"; and how one watch event ({"type": ..., "object": ...}) is applied to it, with the two
errors a list or watch signals (410 Gone: relist; WatchError: retry). Pure: no I/O, no clock,
no thread (runtime/common/informer.py is the thread around it)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .selectors import Requirement, selector_matches

T = TypeVar("T")


class Gone(Exception):
    """HTTP 410: the resourceVersion (or continue token) is older than the server keeps: relist."""


class WatchError(Exception):
    """A list or watch failed in a way worth retrying (transport, 5xx, an ERROR event, bad JSON)."""


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name`, or `name` for a cluster-scoped object (client-go's MetaNamespaceKey)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


@dataclass(frozen=True)
class View(Generic[T]):
    """A snapshot of a store and what changed in it since a cursor."""

    items: Mapping[str, T]
    seq: int
    """The cursor to pass next time."""
    changed: frozenset[str] | None
    """Keys added, modified or deleted after the cursor given (a deleted key is absent from
    `items`); None: anything may have changed (no cursor, or the change log no longer reaches
    back that far): look at everything."""
    synced: bool
    """A first list has filled the store: an absent key means the object does not exist."""


_ABSENT: Any = object()


class Store(Generic[T]):
    """Projections by key, a sequence number bumped by every real change, and a bounded log of
    (seq, key). Values must compare by value (frozen dataclasses, tuples, msgspec Structs):
    writing an equal value is not a change. Not thread-safe: the Informer holds a lock."""

    def __init__(self, log_limit: int = 10_000) -> None:
        self._items: dict[str, T] = {}
        self._log: deque[tuple[int, str]] = deque(maxlen=max(1, log_limit))
        self.seq = 0
        self.synced = False

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> T | None:
        return self._items.get(key)

    def _changed(self, key: str) -> None:
        self.seq += 1
        self._log.append((self.seq, key))

    def upsert(self, key: str, value: T) -> bool:
        if self._items.get(key, _ABSENT) == value:
            return False
        self._items[key] = value
        self._changed(key)
        return True

    def delete(self, key: str) -> bool:
        if self._items.pop(key, _ABSENT) is _ABSENT:
            return False
        self._changed(key)
        return True

    def replace(self, items: Mapping[str, T]) -> int:
        """The store becomes `items` (a relist); returns how many keys changed."""
        count = sum(self.delete(key) for key in [k for k in self._items if k not in items])
        count += sum(self.upsert(key, value) for key, value in items.items())
        self.synced = True
        return count

    def changes(self, since: int | None) -> frozenset[str] | None:
        if since is None:
            return None
        if since >= self.seq:
            return frozenset()
        if not self._log or self._log[0][0] > since + 1:
            return None  # entries after `since` fell off the log
        out: set[str] = set()
        for seq, key in reversed(self._log):
            if seq <= since:
                break
            out.add(key)
        return frozenset(out)

    def view(self, since: int | None = None) -> View[T]:
        return View(dict(self._items), self.seq, self.changes(since), self.synced)


def handle_event(
    store: Store[T],
    event: Mapping[str, Any],
    transform: Callable[[dict[str, Any]], T | None],
    *,
    key: Callable[[Mapping[str, Any]], str] = object_key,
    selector: tuple[Requirement, ...] = (),
) -> str:
    """Applies one watch event; returns the resourceVersion it carries ("" if none). An object
    the selector or the transform refuses is removed (it may have just left the selection)."""
    kind = event.get("type")
    obj = event.get("object") or {}
    if kind == "ERROR":
        code = obj.get("code")
        if code == 410:
            raise Gone(str(obj.get("message") or "resource version too old"))
        raise WatchError(f"watch ERROR event: {code} {obj.get('reason', '')} {obj.get('message', '')}".strip())
    meta = obj.get("metadata") or {}
    version = str(meta.get("resourceVersion") or "")
    if kind == "BOOKMARK":
        return version
    name = key(obj)
    if kind == "DELETED":
        store.delete(name)
    elif kind in ("ADDED", "MODIFIED"):
        value = transform(obj) if selector_matches(selector, meta.get("labels") or {}) else None
        if value is None:
            store.delete(name)
        else:
            store.upsert(name, value)
    else:
        raise WatchError(f"unknown watch event type {kind!r}")
    return version


def version_number(version: str) -> int | None:
    """A resourceVersion as a number, or None. The API contract calls versions opaque; etcd's (and
    kmock's) are its revision, a number that only grows, which is all `Informer.observe` relies on,
    and only when both sides are numbers."""
    return int(version) if version.isdigit() else None


def older_than_written(written: Mapping[str, int], key: str, version: str) -> bool:
    """A watch event for `key` at `version` predates a write of ours already applied from its
    reply (`Informer.observe`): applying it would put the store back before our write until the
    write's own event arrives."""
    mine = written.get(key)
    number = version_number(version)
    return mine is not None and number is not None and number < mine
