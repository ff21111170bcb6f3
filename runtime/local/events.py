"""Events as the kubelet's and kube-scheduler's recorders write them (client-go's legacy
`record.EventRecorder`, core/v1 Events), so `kubectl describe pod` and `kubectl get events` show
what a real cluster shows: Pulled, Created, Started, Killing, BackOff, Failed and FailedMount from
the node agent (kube-scheduler writes its own FailedScheduling).

What the recorder decides is client-go's EventCorrelator (tools/record/events_cache.go), kept in
`Correlator`, pure but for its bounded memory, the clock passed in:
- **aggregation**: events alike but for their message (same source, object, type and reason) are
  counted per message; once `SIMILAR_MAX` different messages came within `SIMILAR_SECONDS`, further
  ones are folded into one Event whose message starts "(combined from similar events): ";
- **dedupe**: an event the same as one already posted (same source, object with fieldPath, type,
  reason, message) raises that Event's `count` and moves its `lastTimestamp` (a PATCH), instead of
  a new object; a new one is named `<object>.<nanoseconds in hex>`, as the kubelet names them;
- **the spam filter**: each (source, object) has a token bucket of `SPAM_BURST` events refilled one
  every `SPAM_REFILL_SECONDS`; an event past it is counted in memory but not written;
- every map is an LRU of `CACHE_SIZE` entries (client-go's 4096), so a long-lived agent's memory is
  bounded whatever it runs: an entry that falls out starts a new Event, as in client-go.

Like the kubelet's recorder it writes no `series` (that is events.k8s.io/v1's recorder, which the
kubelet does not use) and never reads Events back (a Node may create and patch Events, not list
them). Writing is best effort: a refused or failed write is logged at debug level and forgotten, it
never stops the pod's work.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from ..common.timefmt import rfc3339
from .apitypes import ApiError, Obj, Store

log = logging.getLogger("sunk.local.events")

CACHE_SIZE = 4096
"""Entries each of the recorder's maps keeps (client-go's maxLruCacheEntries)."""
SIMILAR_MAX = 10
"""Different messages of one (source, object, type, reason) before they are combined (maxEvents)."""
SIMILAR_SECONDS = 600.0
"""How long those messages are remembered (defaultAggregateIntervalInSeconds)."""
SPAM_BURST = 25
"""Events one (source, object) may post at once (defaultSpamBurst)."""
SPAM_REFILL_SECONDS = 300.0
"""Seconds for one more (defaultSpamQPS = 1/300)."""
COMBINED = "(combined from similar events): "
NORMAL, WARNING = "Normal", "Warning"

K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """A map that forgets its least recently used entry past `size`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        if key not in self.items:
            return None
        self.items.move_to_end(key)
        return self.items[key]

    def put(self, key: K, value: V) -> None:
        self.items[key] = value
        self.items.move_to_end(key)
        while len(self.items) > self.size:
            self.items.popitem(last=False)

    def pop(self, key: K) -> None:
        self.items.pop(key, None)

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True)
class Occurrence:
    """One thing a component saw about an object, before correlation."""

    source: tuple[str, str]
    """(component, host)."""
    involved: tuple[str, str, str, str, str, str]
    """(apiVersion, kind, namespace, name, uid, fieldPath)."""
    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class Posting:
    """What to write: a new Event (count 1 or more after an LRU miss) or a PATCH of `name`'s count."""

    name: str
    message: str
    count: int
    first: float
    """When the Event was first posted (firstTimestamp), seconds since the epoch."""
    patch: bool


@dataclass
class _Seen:
    name: str
    count: int
    first: float
    last: float


@dataclass
class _Similar:
    messages: OrderedDict[str, None]
    last: float


@dataclass
class _Bucket:
    tokens: float
    last: float


class Correlator:
    """client-go's EventCorrelator (see the module's docstring): `correlate` says what to write for
    one occurrence at `now`, or None when the spam filter holds it back."""

    def __init__(
        self,
        size: int = CACHE_SIZE,
        similar_max: int = SIMILAR_MAX,
        similar_seconds: float = SIMILAR_SECONDS,
        burst: int = SPAM_BURST,
        refill_seconds: float = SPAM_REFILL_SECONDS,
        repeat_seconds: float = 0.0,
    ) -> None:
        self.repeat_seconds = repeat_seconds
        """An occurrence the same as one counted less than this ago is not counted (0: each is):
        what stands in for a component's own retry back-off where it retries faster than the
        real one."""
        self.similar_max = similar_max
        self.similar_seconds = similar_seconds
        self.burst = burst
        self.refill_seconds = refill_seconds
        self.similar: _Lru[tuple[object, ...], _Similar] = _Lru(size)
        self.seen: _Lru[tuple[object, ...], _Seen] = _Lru(size)
        self.buckets: _Lru[tuple[object, ...], _Bucket] = _Lru(size)

    def correlate(self, occurrence: Occurrence, now: float) -> Posting | None:
        message, key = self._aggregate(occurrence, now)
        seen = self.seen.get(key)
        if seen is None:
            name = f"{occurrence.involved[3]}.{int(now * 1e9):x}"
            seen = _Seen(name, 0, now, now - self.repeat_seconds)
        elif now - seen.last < self.repeat_seconds:
            return None
        seen.count += 1
        seen.last = now
        self.seen.put(key, seen)
        if not self._allowed(occurrence, now):
            return None
        return Posting(seen.name, message, seen.count, seen.first, patch=seen.count > 1)

    def forget(self, occurrence: Occurrence, posting: Posting) -> None:
        """A write that failed: the next occurrence starts a new Event."""
        for key, seen in list(self.seen.items.items()):
            if seen.name == posting.name:
                self.seen.pop(key)

    def _aggregate(self, o: Occurrence, now: float) -> tuple[str, tuple[object, ...]]:
        """(message, dedupe key): the occurrence's own, or the combined one past SIMILAR_MAX messages."""
        group = (o.source, o.involved[:5], o.type, o.reason)
        record = self.similar.get(group)
        if record is None or now - record.last > self.similar_seconds:
            record = _Similar(OrderedDict(), now)
        record.messages[o.message] = None
        record.last = now
        if len(record.messages) < self.similar_max:
            self.similar.put(group, record)
            return o.message, (o.source, o.involved, o.type, o.reason, o.message)
        record.messages.popitem(last=False)  # kept at the cap, as client-go's PopAny
        self.similar.put(group, record)
        return COMBINED + o.message, (group, "combined")

    def _allowed(self, o: Occurrence, now: float) -> bool:
        key = (o.source, o.involved[:5])
        bucket = self.buckets.get(key) or _Bucket(float(self.burst), now)
        bucket.tokens = min(float(self.burst), bucket.tokens + (now - bucket.last) / self.refill_seconds)
        bucket.last = now
        self.buckets.put(key, bucket)
        if bucket.tokens < 1:
            return False
        bucket.tokens -= 1
        return True


def reference(involved: Obj, field_path: str = "") -> tuple[str, str, str, str, str, str]:
    meta = involved["metadata"]
    return (
        involved.get("apiVersion", "v1"),
        involved.get("kind", "Pod"),
        meta.get("namespace", "default"),
        meta["name"],
        meta.get("uid", ""),
        field_path,
    )


def container_path(pod: Obj, container: str) -> str:
    """The fieldPath of a container's Events: spec.containers{NAME} or spec.initContainers{NAME}."""
    inits = {c.get("name") for c in (pod.get("spec") or {}).get("initContainers") or []}
    return f"spec.initContainers{{{container}}}" if container in inits else f"spec.containers{{{container}}}"


def body(occurrence: Occurrence, posting: Posting, now: float) -> Obj:
    """The core/v1 Event a posting creates (pure)."""
    api_version, kind, namespace, name, uid, field_path = occurrence.involved
    component, host = occurrence.source
    about = {"apiVersion": api_version, "kind": kind, "namespace": namespace, "name": name, "uid": uid}
    if field_path:
        about["fieldPath"] = field_path
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": posting.name, "namespace": namespace},
        "involvedObject": about,
        "reason": occurrence.reason,
        "message": posting.message,
        "type": occurrence.type,
        "count": posting.count,
        "firstTimestamp": rfc3339(datetime.fromtimestamp(posting.first, UTC)),
        "lastTimestamp": rfc3339(datetime.fromtimestamp(now, UTC)),
        "source": {"component": component, **({"host": host} if host else {})},
        "reportingComponent": component,
        "reportingInstance": host or component,
    }


class Recorder:
    """One component's recorder (the kubelet of every Node of the agent, or the scheduler): a
    Correlator in front of the store's writes."""

    def __init__(
        self,
        store: Store,
        component: str,
        *,
        clock: Callable[[], float] = time.time,
        correlator: Correlator | None = None,
    ) -> None:
        self.store = store
        self.component = component
        self.clock = clock
        self.correlator = correlator or Correlator()
        self._lock = threading.Lock()

    def event(
        self, involved: Obj, severity: str, reason: str, message: str, *, host: str = "", field_path: str = ""
    ) -> None:
        occurrence = Occurrence((self.component, host), reference(involved, field_path), severity, reason, message)
        with self._lock:
            now = self.clock()
            posting = self.correlator.correlate(occurrence, now)
            if posting is None:
                return
            try:
                self._write(occurrence, posting, now)
            except ApiError as err:  # best effort, as a recorder's
                log.debug("event %s %s not written: %s", reason, posting.name, err.message)
                if err.code != 409:
                    self.correlator.forget(occurrence, posting)

    def _write(self, occurrence: Occurrence, posting: Posting, now: float) -> None:
        res, event = self.store.resource("v1/events"), body(occurrence, posting, now)
        namespace = event["metadata"]["namespace"]
        if posting.patch:
            # involvedObject unchanged, so a remote store routes it as the Node of the pod (remote.py).
            change = {
                "involvedObject": event["involvedObject"],
                "count": posting.count,
                "lastTimestamp": event["lastTimestamp"],
                "message": posting.message,
            }
            try:
                self.store.patch(res, namespace, posting.name, "merge", change)
                return
            except ApiError as err:
                if err.code != 404:  # gone (expired from the API's TTL): created again, as client-go does
                    raise
        self.store.create(res, namespace, event)
