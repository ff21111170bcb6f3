"""The fence's I/O: the one Lease through the Kubernetes API (LeaseApi, KubeLeases), this pod's
primary mark, and the glue (`Fence.tick`) that reads both, asks sunk.fence.plan and acts.

Writes are optimistic: a Lease is replaced with the resourceVersion just read, so of two fences
racing for one Lease the API server accepts one write and answers the other 409 Conflict."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from sunk.fence import Action, Lease, Refuse, Release, Renew, Stop, Take, Timing, Unreadable, Wait, plan

from ..common.timefmt import rfc3339_micro

log = logging.getLogger("sunk.fence")


class LeaseApi(Protocol):
    """One Lease. `read` raises when the API server does not answer or refuses (401, 403);
    `create` and `replace` answer False when another wrote first (409) and raise otherwise."""

    def read(self) -> dict[str, Any] | None: ...
    def create(self, body: Mapping[str, Any]) -> bool: ...
    def replace(self, body: Mapping[str, Any]) -> bool: ...


class KubeLeases:
    """LeaseApi on the official client: in the pod, from its projected ServiceAccount token (the
    client reads the file again as the kubelet rotates it)."""

    def __init__(self, namespace: str, name: str, api_client: Any = None) -> None:
        from kubernetes import client

        if api_client is None:
            from kubernetes import config

            config.load_incluster_config()  # type: ignore[no-untyped-call]
            api_client = client.ApiClient()
        self.namespace, self.name = namespace, name
        self._coord = client.CoordinationV1Api(api_client)
        self._exc = client.exceptions.ApiException

    def read(self) -> dict[str, Any] | None:
        try:
            # _preload_content=False: the API server's JSON as sent (its MicroTimes unparsed).
            reply: Any = self._coord.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=5, _preload_content=False
            )
        except self._exc as err:
            if err.status == 404:
                return None
            raise
        out: dict[str, Any] = json.loads(reply.data)
        return out

    def create(self, body: Mapping[str, Any]) -> bool:
        create: Any = self._coord.create_namespaced_lease  # a dict body is sent as it is
        return self._write(lambda: create(self.namespace, dict(body), _request_timeout=5, _preload_content=False))

    def replace(self, body: Mapping[str, Any]) -> bool:
        replace: Any = self._coord.replace_namespaced_lease
        return self._write(
            lambda: replace(self.name, self.namespace, dict(body), _request_timeout=5, _preload_content=False)
        )

    def _write(self, call: Callable[[], Any]) -> bool:
        try:
            call()
        except self._exc as err:
            if err.status == 409:
                return False
            raise
        return True


def reason_of(err: Exception) -> str:
    """A short reason for a failed call, with no token or body in it."""
    status = getattr(err, "status", None)
    return f"HTTP {status}" if isinstance(status, int) and status else type(err).__name__


class Marks:
    """This pod's primary mark (SlurmctldPrimaryOnProg writes it, OffProg removes it) and the stop
    file the watcher SlurmctldPrimaryOnProg started reads. A takeover is known by the mark's
    modification time: a slurmctld that restarts in the same pod writes the mark anew."""

    def __init__(self, mark: Path, stop: Path) -> None:
        self.mark, self.stop_file = mark, stop

    def epoch(self) -> int | None:
        """The mark's modification time in ns; None while there is no mark."""
        try:
            return os.stat(self.mark).st_mtime_ns
        except FileNotFoundError:
            return None

    def stop(self, reason: str) -> None:
        tmp = self.stop_file.with_name(self.stop_file.name + ".tmp")
        tmp.write_text(reason + "\n")
        tmp.replace(self.stop_file)


@dataclass
class Fence:
    """Reads the Lease and the mark each period and acts on sunk.fence.plan; `stop` stops
    slurmctld (Marks.stop in the pod). Clocks are injected: `monotonic` for every decision, `wall`
    only for the times written on the Lease."""

    api: LeaseApi
    namespace: str
    name: str
    me: str
    marks: Marks
    timing: Timing = field(default_factory=Timing)
    monotonic: Callable[[], float] = time.monotonic
    wall: Callable[[], datetime] = lambda: datetime.now(UTC)
    _epoch: int | None = None
    _primary_since: float | None = None
    _renewed_at: float | None = None
    _stopped: int | None = None
    _record: tuple[str, str] | None = None
    _seen_at: float = 0.0

    def tick(self) -> Action:
        now = self.monotonic()
        epoch = self.marks.epoch()
        if epoch != self._epoch:
            self._epoch, self._renewed_at = epoch, None
            self._primary_since = None if epoch is None else now
        obj, lease = self._read(now)
        action = plan(lease, self.me, now, self.timing, primary_since=self._primary_since, renewed_at=self._renewed_at)
        if isinstance(action, Take | Renew) and self._stopped is not None and self._stopped == self._epoch:
            # Its slurmctld is being stopped (the mark outlives it until the container restarts):
            # it may not hold the Lease again before it takes control anew.
            return Wait("slurmctld is being stopped")
        if isinstance(action, Take | Renew):
            if self._write(obj, action):
                self._renewed_at = now
                if isinstance(action, Take):
                    log.info("lease %s/%s: %s holds it, its slurmctld the primary", self.namespace, self.name, self.me)
        elif isinstance(action, Release):
            assert obj is not None
            self._replace(obj, {**(obj.get("spec") or {}), "holderIdentity": ""})
            log.info("lease %s/%s released: slurmctld stands by", self.namespace, self.name)
        elif isinstance(action, Refuse | Stop):
            self._renewed_at = None
            if self._stopped != self._epoch:
                self._stopped = self._epoch
                log.error("stopping slurmctld: %s", action.reason)
                self.marks.stop(action.reason)
        elif isinstance(action, Wait) and self._primary_since is not None:
            log.warning("slurmctld is in control without the Lease: %s", action.reason)
        return action

    def _read(self, now: float) -> tuple[dict[str, Any] | None, Lease | Unreadable | None]:
        try:
            obj = self.api.read()
        except Exception as err:  # an API server away, or this pod's token refused
            return None, Unreadable(reason_of(err))
        if obj is None:
            self._record = None
            return None, None
        spec = obj.get("spec") or {}
        record = (str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or ""))
        if record != self._record:
            self._record, self._seen_at = record, now
        return obj, Lease(record[0], self._seen_at)

    def _write(self, obj: dict[str, Any] | None, action: Take | Renew) -> bool:
        stamp = rfc3339_micro(self.wall())
        spec: dict[str, Any] = {
            "holderIdentity": self.me,
            "leaseDurationSeconds": int(self.timing.duration),
            "renewTime": stamp,
        }
        if obj is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {**spec, "acquireTime": stamp, "leaseTransitions": 0},
            }
            return self._call(lambda: self.api.create(body))
        old = obj.get("spec") or {}
        taking = old.get("holderIdentity") != self.me or (isinstance(action, Take) and not old.get("acquireTime"))
        spec["acquireTime"] = stamp if taking else old.get("acquireTime") or stamp
        spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + (1 if taking else 0)
        return self._replace(obj, spec)

    def _replace(self, obj: Mapping[str, Any], spec: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "resourceVersion": meta.get("resourceVersion"),
            },
            "spec": dict(spec),
        }
        return self._call(lambda: self.api.replace(body))

    def _call(self, write: Callable[[], bool]) -> bool:
        try:
            return write()
        except Exception as err:
            log.warning("lease %s/%s write failed: %s", self.namespace, self.name, reason_of(err))
            return False
