"""An in-memory ListWatch (runtime/common/informer.py) that keeps the API server's contract
where an informer relies on it, for driving `Informer.step()` synchronously in tests:

- every write gets the next resourceVersion; a list is a snapshot at one version, paged with
  `limit` and a `continue` token that expires (410) when `expire_continues()` is called;
- a watch from version V streams the events after V, then ends (as a server's `timeoutSeconds`
  ends it); from a version older than the kept history (`compact()`) it streams one ERROR event
  with code 410, as the API server does;
- label selectors filter lists and watches (an object leaving the selection is a DELETED
  event), unless `ignore_selectors` (kmock ignores them: the informer must filter too);
- `fail_watches` / `fail_lists` raise WatchError on the next calls (a dropped connection),
  `fail_after` ends the next watch with WatchError after that many events (a stream cut mid-way),
  `gone_on_watch` answers the next watch with HTTP 410 instead of a stream;
- a watch ends with a BOOKMARK at the current version (a server sends them about once a minute,
  so a real watch is never empty); `bookmarks = False` leaves it out, `bookmark()` adds one
  mid-stream.

Not modelled: watch caches answering from a slightly older version, resourceVersionMatch."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from sunk.runtime.common.selectors import parse_selector, selector_matches
from sunk.runtime.common.store import Gone, WatchError


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


class FakeStream:
    def __init__(self, events: list[dict[str, Any]], fail_after: int | None) -> None:
        self._events = events
        self._fail_after = fail_after
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i, event in enumerate(self._events):
            if self._fail_after is not None and i >= self._fail_after:
                raise WatchError("connection reset by peer (scripted)")
            yield event
        if self._fail_after is not None and self._fail_after <= len(self._events):
            raise WatchError("connection reset by peer (scripted)")

    def close(self) -> None:
        self.closed = True


class FakeListWatch:
    def __init__(self, *, ignore_selectors: bool = False) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.history: list[tuple[int, str, dict[str, Any]]] = []
        """(version, type, object) of every write still kept."""
        self.version = 0
        self.oldest = 0
        """Watches from a version below this get 410."""
        self.ignore_selectors = ignore_selectors
        self.fail_watches = 0
        self.fail_lists = 0
        self.fail_after: int | None = None
        self.gone_on_watch = False
        self.bookmarks = True
        self._continues: set[str] = set()
        self.list_calls: list[dict[str, Any]] = []
        self.watch_calls: list[dict[str, Any]] = []

    # --- writes ------------------------------------------------------------------------------

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        return obj

    def put(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        kind = "MODIFIED" if name in self.objects else "ADDED"
        stamped = self._stamp(obj)
        self.objects[name] = stamped
        self.history.append((self.version, kind, stamped))

    def remove(self, name: str) -> None:
        stamped = self._stamp(self.objects.pop(name))
        self.history.append((self.version, "DELETED", stamped))

    def bookmark(self) -> None:
        """The next watch starts with a BOOKMARK at the current version."""
        self.history.append((self.version, "BOOKMARK", {"metadata": {"resourceVersion": str(self.version)}}))

    def compact(self) -> None:
        """Forget all history: any watch from an earlier version now gets 410 (etcd compaction)."""
        self.oldest = self.version + 1
        self.history.clear()

    def expire_continues(self) -> None:
        self._continues.clear()

    # --- the ListWatch protocol --------------------------------------------------------------

    def _admits(self, obj: dict[str, Any], selector: str) -> bool:
        return self.ignore_selectors or selector_matches(parse_selector(selector), _labels(obj))

    def list(self, *, label_selector: str, field_selector: str, limit: int, continue_token: str) -> dict[str, Any]:
        self.list_calls.append({"label_selector": label_selector, "limit": limit, "continue": continue_token})
        if self.fail_lists:
            self.fail_lists -= 1
            raise WatchError("connection refused (scripted)")
        start = 0
        if continue_token:
            if continue_token not in self._continues:
                raise Gone("410 the provided continue parameter is too old")
            start = int(continue_token.split(":")[1])
        items = [copy.deepcopy(o) for _, o in sorted(self.objects.items()) if self._admits(o, label_selector)]
        page = items[start : start + limit] if limit else items[start:]
        meta: dict[str, Any] = {"resourceVersion": str(self.version)}
        if limit and start + limit < len(items):
            token = f"{self.version}:{start + limit}"
            self._continues.add(token)
            meta["continue"] = token
        return {"kind": "List", "metadata": meta, "items": page}

    def watch(
        self, *, resource_version: str, label_selector: str, field_selector: str, timeout_seconds: int
    ) -> FakeStream:
        self.watch_calls.append({"resource_version": resource_version, "label_selector": label_selector})
        if self.fail_watches:
            self.fail_watches -= 1
            raise WatchError("connection refused (scripted)")
        if self.gone_on_watch:
            self.gone_on_watch = False
            raise Gone("410 Gone (scripted)")
        fail_after, self.fail_after = self.fail_after, None
        since = int(resource_version or 0)
        if since + 1 < self.oldest:
            status = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
            return FakeStream([{"type": "ERROR", "object": status}], fail_after)
        events: list[dict[str, Any]] = []
        for version, kind, obj in self.history:
            if version <= since and kind != "BOOKMARK":
                continue
            if kind == "BOOKMARK":
                if version >= since:
                    events.append({"type": kind, "object": copy.deepcopy(obj)})
                continue
            if kind != "DELETED" and not self._admits(obj, label_selector):
                kind = "DELETED"  # it left the selection (a server sends nothing for one that never matched)
            events.append({"type": kind, "object": copy.deepcopy(obj)})
        self.history = [h for h in self.history if h[1] != "BOOKMARK"]
        if self.bookmarks:
            events.append({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self.version)}}})
        return FakeStream(events, fail_after)
