"""ListWatch on the official `kubernetes` client: the source an Informer reads through.

It takes one generated list function (`CoreV1Api(api).list_node`,
`functools.partial(CoreV1Api(api).list_namespaced_pod, "ns")`,
`functools.partial(CustomObjectsApi(api).list_namespaced_custom_object, group, version, ns, plural)`)
and calls it twice over: as a list and as a watch (`watch=True`). The client keeps what it is good
at (kubeconfig and in-cluster auth, TLS, token refresh); replies are read raw
(`_preload_content=False`) and decoded with msgspec, never through the generated models, which at
10,000 objects cost more than the rest of a controller's cycle."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import urllib3

from .store import Gone, WatchError

_decode = msgspec.json.Decoder().decode


def _failure(what: str, exc: Exception) -> Exception:
    status = getattr(exc, "status", None)
    if status == 410:
        return Gone(f"{what}: 410 {getattr(exc, 'reason', '')}".strip())
    return WatchError(f"{what}: {status or type(exc).__name__} {getattr(exc, 'reason', '') or exc}".strip())


class _Stream:
    """A watch response read line by line (the API server sends one JSON event per line)."""

    def __init__(self, response: Any, what: str) -> None:
        self._response = response
        self._what = what
        self._closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        pending = b""
        try:
            for chunk in self._response.stream(2**16, decode_content=True):
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    if line.strip():
                        yield _decode(line)
            if pending.strip():
                yield _decode(pending)
        except (urllib3.exceptions.HTTPError, OSError, msgspec.DecodeError, ValueError) as exc:
            if not self._closed:
                raise WatchError(f"{self._what}: {type(exc).__name__}: {exc}") from exc

    def close(self) -> None:
        """Unblocks a reader in another thread (socket shutdown), then drops the connection."""
        if self._closed:
            return
        self._closed = True
        # Already released or never connected: nothing is blocked on it.
        with contextlib.suppress(ValueError, RuntimeError, OSError, AttributeError):
            self._response.shutdown()
        self._response.close()


class KubeListWatch:
    """`ListWatch` over one list function of the official client.

    `connect_timeout` bounds connecting; a watch's read timeout is its `timeoutSeconds` plus
    `read_slack` (the server ends it first; the slack covers a slow last flush), a list's is
    `list_timeout`."""

    def __init__(
        self,
        list_fn: Callable[..., Any],
        *,
        connect_timeout: float = 10.0,
        list_timeout: float = 60.0,
        read_slack: float = 30.0,
    ) -> None:
        self._fn = list_fn
        inner = getattr(list_fn, "func", list_fn)  # a functools.partial names its function
        self._what = str(getattr(inner, "__name__", "list"))
        self.connect_timeout = connect_timeout
        self.list_timeout = list_timeout
        self.read_slack = read_slack

    def _selectors(self, label_selector: str, field_selector: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if label_selector:
            out["label_selector"] = label_selector
        if field_selector:
            out["field_selector"] = field_selector
        return out

    def list(self, *, label_selector: str, field_selector: str, limit: int, continue_token: str) -> dict[str, Any]:
        kwargs = self._selectors(label_selector, field_selector)
        if continue_token:
            kwargs["_continue"] = continue_token
        try:
            reply = self._fn(
                limit=limit,
                _preload_content=False,
                _request_timeout=(self.connect_timeout, self.list_timeout),
                **kwargs,
            )
            data = _decode(reply.data)
        except Exception as exc:  # ApiException, urllib3 errors, bad JSON: all retriable or 410
            raise _failure(self._what, exc) from exc
        if not isinstance(data, dict):
            raise WatchError(f"{self._what}: the list reply is not an object")
        return data

    def watch(
        self, *, resource_version: str, label_selector: str, field_selector: str, timeout_seconds: int
    ) -> _Stream:
        try:
            response = self._fn(
                watch=True,
                resource_version=resource_version or None,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout_seconds,
                _preload_content=False,
                _request_timeout=(self.connect_timeout, timeout_seconds + self.read_slack),
                **self._selectors(label_selector, field_selector),
            )
        except Exception as exc:
            raise _failure(f"{self._what} watch", exc) from exc
        return _Stream(response, f"{self._what} watch")
