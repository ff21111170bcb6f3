"""What the node agent's parts (agent.py, sandbox.py, podrunner.py, events.py, ports.py, ...) say
of the API server: an object, an answer other than success, an event, and the `Store` they read
and write through. remote.py's RemoteStore is the one Store: kube-apiserver, as each Node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .resources import Resource

Obj = dict[str, Any]


class ApiError(Exception):
    """An answer other than success, with the API server's Status fields."""

    def __init__(self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = dict(details or {})


@dataclass
class Event:
    """One change the Store saw: ADDED, MODIFIED or DELETED, with the object before (`old`) when known."""

    version: int
    resource: str
    type: str
    obj: Obj
    old: Obj | None


Listener = Callable[[Event], None]


class Store(Protocol):
    """The API server as the node agent's parts use it: reads from caches kept by watches (`find`,
    `items`, `listen`), writes one request each, raising ApiError with the server's Status."""

    def resource(self, key: str) -> Resource: ...

    def find(self, res: Resource, namespace: str | None, name: str) -> Obj | None: ...

    def items(self, res: Resource, namespace: str | None = None) -> Iterator[Obj]: ...

    def listen(self, listener: Listener) -> None: ...

    def create(self, res: Resource, namespace: str | None, obj: Obj) -> Obj: ...

    def update(self, res: Resource, namespace: str | None, name: str, obj: Obj, subresource: str = "") -> Obj: ...

    def patch(
        self, res: Resource, namespace: str | None, name: str, kind: str, body: Any, subresource: str = ""
    ) -> Obj: ...

    def delete(
        self, res: Resource, namespace: str | None, name: str, *, grace: int | None = None, uid: str | None = None
    ) -> Obj: ...
