"""Informer: a cache of one kind of Kubernetes object, filled by one list and kept current by a
watch, so a controller reads the cluster from memory instead of listing it every cycle.

How it follows the API server's contract (client-go's reflector does the same):
- list (paged, `limit`/`continue`), then watch from the list's resourceVersion with
  `allowWatchBookmarks`; a watch the server ends (its `timeoutSeconds`) resumes from the last
  version seen, bookmarks included, without a new list;
- 410 Gone (the version left the server's window, on the watch or a list's continue token):
  list again; the store is replaced and the difference recorded as changes;
- any other failure (transport, 5xx, a bad line): wait with capped exponential backoff and
  jitter, then resume the watch from the last version (a 410 then turns it into a relist).

Bounded memory: the store keeps what `transform(obj)` returns (a small projection of the fields
a controller reads, or None for an object it does not want), never the raw objects, and a list is
read page by page. The change log is bounded too: a reader too far behind is told "everything".

"Changed since": every change to the store bumps `seq`; `view(since)` returns a snapshot and the
keys added, modified or deleted after `since`, so a controller can act only on those.

Pure parts (no I/O, no clock, no thread) live beside it: the store and how a watch event is
applied to it (runtime/common/store.py: `Store`, `handle_event`, `Gone`, `WatchError`), label
selectors (runtime/common/selectors.py), and `backoff` here. `Informer` is the thread around them; `step()` is one list-and-watch
round, so tests drive it synchronously with a scripted source. The source on the official
client is runtime/common/kubewatch.py."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

from .selectors import parse_selector, selector_matches
from .store import Gone, Store, View, WatchError, handle_event, object_key, older_than_written, version_number

log = logging.getLogger("sunk.informer")

T = TypeVar("T")


class WatchStream(Protocol):
    """One watch request's events, as the server streams them ({"type": ..., "object": ...}).
    Iteration ends when the server ends the watch; `close()` may be called from another thread
    and makes a blocked iteration end (with any exception)."""

    def __iter__(self) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


class ListWatch(Protocol):
    """The two requests an informer makes. Both raise Gone for 410 and WatchError for any other
    failure worth retrying."""

    def list(self, *, label_selector: str, field_selector: str, limit: int, continue_token: str) -> dict[str, Any]: ...

    def watch(
        self, *, resource_version: str, label_selector: str, field_selector: str, timeout_seconds: int
    ) -> WatchStream: ...


def backoff(failures: int, base: float, cap: float) -> float:
    """Seconds to wait after `failures` consecutive failures (1, 2, ...): base, 2*base, ... cap."""
    return float(min(cap, base * 2 ** max(0, failures - 1)))


class Informer(Generic[T]):
    """One kind of object, listed once and watched. Read it with `view()` / `get()` from any
    thread; `wait_for_change(seq, timeout)` blocks until something changed after `seq`.

    `transform(obj)` returns the projection to keep or None to keep nothing; it runs on the
    informer's thread, so it must not call back into the informer. `on_change()` runs on the
    informer's thread after each batch of changes (outside the lock): keep it short."""

    def __init__(
        self,
        source: ListWatch,
        transform: Callable[[dict[str, Any]], T | None],
        *,
        name: str,
        label_selector: str = "",
        field_selector: str = "",
        key: Callable[[Mapping[str, Any]], str] = object_key,
        page: int = 500,
        watch_timeout: int = 300,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        log_limit: int = 10_000,
        on_change: Callable[[], None] | None = None,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.source = source
        self.transform = transform
        self.name = name
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.selector = parse_selector(label_selector)  # also checked client-side: the server's filter is its job
        self.key = key
        self.page = page
        self.watch_timeout = watch_timeout
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.on_change = on_change
        self._jitter = jitter
        self._store: Store[T] = Store(log_limit)
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stream: WatchStream | None = None
        self._failures = 0
        self._gone_streak = 0
        self._written: dict[str, int] = {}
        """Key -> resourceVersion of our own writes applied from their replies (observe), until the
        watch catches up with them."""
        self.resource_version = ""
        # Counters for metrics, tests and benchmarks.
        self.lists = 0
        """List requests (pages included)."""
        self.relists = 0
        """Lists after the first (a 410, or a failed first list retried)."""
        self.watches = 0
        self.events = 0
        self.errors = 0
        self.last_error = ""

    # --- reading ---------------------------------------------------------------------------

    def view(self, since: int | None = None) -> View[T]:
        with self._lock:
            return self._store.view(since)

    def get(self, key: str) -> T | None:
        with self._lock:
            return self._store.get(key)

    @property
    def synced(self) -> bool:
        with self._lock:
            return self._store.synced

    @property
    def seq(self) -> int:
        with self._lock:
            return self._store.seq

    @property
    def failures(self) -> int:
        """Consecutive failed rounds (reset when the watch delivers an event)."""
        return self._failures

    @property
    def watching(self) -> bool:
        """A watch is open now (after an outage: connected again, even before its first event)."""
        with self._lock:
            return self._stream is not None

    def wait_synced(self, timeout: float) -> bool:
        with self._lock:
            return self._lock.wait_for(lambda: self._store.synced, timeout)

    def wait_for_change(self, since: int, timeout: float) -> bool:
        """True once the store changed after `since` (False on timeout or stop)."""
        with self._lock:
            return self._lock.wait_for(lambda: self._store.seq > since or self._stop.is_set(), timeout) and (
                self._store.seq > since
            )

    def observe(self, obj: dict[str, Any]) -> None:
        """A write's reply (the object as the server stored it): apply it now, as its MODIFIED
        event would be, so a cycle planned before the watch delivers that event sees the write and
        does not repeat it. Events older than it are then skipped for that object until the
        watch reaches the write (versions compared only when both are numbers)."""
        if not isinstance(obj.get("metadata"), dict):
            return
        with self._lock:
            before = self._store.seq
            handle_event(
                self._store, {"type": "MODIFIED", "object": obj}, self.transform, key=self.key, selector=self.selector
            )
            number = version_number(str(obj["metadata"].get("resourceVersion") or ""))
            if number is not None:
                self._written[self.key(obj)] = number
        self._notify(before)

    # --- one round -------------------------------------------------------------------------

    def _notify(self, before: int) -> None:
        with self._lock:
            changed = self._store.seq != before
            self._lock.notify_all()
        if changed and self.on_change is not None:
            self.on_change()

    def _relist(self) -> None:
        items: dict[str, T] = {}
        token = ""
        version = ""
        while True:
            self.lists += 1
            reply = self.source.list(
                label_selector=self.label_selector,
                field_selector=self.field_selector,
                limit=self.page,
                continue_token=token,
            )
            for obj in reply.get("items") or []:
                meta = obj.get("metadata") or {}
                if not selector_matches(self.selector, meta.get("labels") or {}):
                    continue
                value = self.transform(obj)
                if value is not None:
                    items[self.key(obj)] = value
            meta = reply.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")  # the first page's: the list's snapshot
            token = str(meta.get("continue") or "")
            if not token:
                break
        with self._lock:
            before = self._store.seq
            changed = self._store.replace(items)
            self._written.clear()  # a list is newer than any write we observed before it
            self.resource_version = version
        log.info("%s: listed %d objects (%d changed) at resourceVersion %s", self.name, len(items), changed, version)
        self._notify(before)

    def _watch(self) -> int:
        """One watch until it ends; returns how many events it delivered."""
        self.watches += 1
        delivered = 0
        timeout = int(self.watch_timeout * (1 + self._jitter()))  # spread reconnects of many watchers
        stream = self.source.watch(
            resource_version=self.resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=timeout,
        )
        with self._lock:
            self._stream = stream
        if self._stop.is_set():
            stream.close()
        try:
            for event in stream:
                if self._stop.is_set():
                    return delivered
                delivered += 1
                with self._lock:
                    before = self._store.seq
                    version = self._apply(event)
                    if version:
                        self.resource_version = version
                self.events += 1
                self._gone_streak = 0
                self._failures = 0  # the watch delivers: the connection is healthy again
                self._notify(before)
        finally:
            with self._lock:
                self._stream = None
            stream.close()
        return delivered

    def _apply(self, event: Mapping[str, Any]) -> str:
        """One watch event, under the lock; one predating a write observed from its reply is
        skipped (its version still moves the watch on)."""
        obj = event.get("object") or {}
        if self._written and event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
            key = self.key(obj)
            version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
            if older_than_written(self._written, key, version) and event.get("type") != "DELETED":
                return version
            self._written.pop(key, None)
        return handle_event(self._store, event, self.transform, key=self.key, selector=self.selector)

    def step(self) -> float:
        """One round: a list if there is no version to watch from, then one watch until the
        server ends it or it fails. Returns the seconds to wait before the next round."""
        try:
            if not self.resource_version:
                if self.lists:
                    self.relists += 1
                self._relist()
            if self._watch() == 0 and not self._stop.is_set():
                # A server that ends watches at once (a proxy, a broken server) must not make
                # this a busy loop; real watches carry bookmarks, so an empty one is unusual.
                return self._delay("the watch ended without an event")
            return 0.0
        except Gone as exc:
            self.resource_version = ""
            self._gone_streak += 1
            log.info("%s: %s; listing again", self.name, exc)
            if self._gone_streak == 1:
                return 0.0  # the ordinary case: relist at once
            return self._delay("410 Gone again right after a list")
        except Exception as exc:  # a watcher must outlive any failure; it is counted and logged
            if self._stop.is_set():
                return 0.0
            if not isinstance(exc, WatchError):
                log.exception("%s: unexpected failure", self.name)
            return self._delay(f"{type(exc).__name__}: {exc}")

    def _delay(self, why: str) -> float:
        self._failures += 1
        self.errors += 1
        self.last_error = why
        delay = backoff(self._failures, self.backoff_base, self.backoff_cap) * (1 + 0.2 * self._jitter())
        log.warning("%s: %s; retrying in %.1fs", self.name, why, delay)
        return delay

    # --- the thread ------------------------------------------------------------------------

    def start(self) -> Informer[T]:
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.name}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            delay = self.step()
            if delay:
                self._stop.wait(delay)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        with self._lock:
            stream = self._stream
            self._lock.notify_all()
        if stream is not None:
            try:
                stream.close()
            except Exception:  # closing from another thread is best effort; the thread is a daemon
                log.debug("%s: closing the watch failed", self.name, exc_info=True)
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> Informer[T]:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
