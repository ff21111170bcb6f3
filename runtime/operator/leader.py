"""Leader election on a coordination.k8s.io/v1 Lease, so only one operator replica acts.

As client-go's leaderelection: a replica takes a Lease over only after watching its record stay
unchanged for a full leaseDurationSeconds on its own monotonic clock (no trust in other
machines' clocks), and it stops acting when it has not renewed within `renew_deadline`.
Writes are compare-and-swap: a JSON patch whose `test` operations check the holder and renew
time just read, so two replicas racing for one Lease cannot both win (the API server applies a
patch atomically and rejects it when a test fails). Both clocks are injected."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from ..common.timefmt import rfc3339_micro

log = logging.getLogger("sunk.operator.leader")

Decision = Literal["create", "renew", "takeover", "follow"]


class LeaseApi(Protocol):
    def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    def create_lease(self, body: Mapping[str, Any]) -> bool: ...
    def patch_lease(self, namespace: str, name: str, ops: list[dict[str, Any]]) -> bool: ...


@dataclass(frozen=True)
class LeaseView:
    holder: str
    renew_time: str
    duration: float
    transitions: int
    acquire_time: str

    @classmethod
    def parse(cls, obj: Mapping[str, Any] | None) -> LeaseView | None:
        if obj is None:
            return None
        spec = obj.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            duration=float(spec.get("leaseDurationSeconds") or 0),
            transitions=int(spec.get("leaseTransitions") or 0),
            acquire_time=str(spec.get("acquireTime") or ""),
        )


def decide(view: LeaseView | None, me: str, unchanged_since: float | None, now: float) -> Decision:
    """Pure: what to do with the Lease as read. `unchanged_since` is when (on our monotonic
    clock) we first saw this exact record."""
    if view is None:
        return "create"
    if view.holder == me:
        return "renew"
    if not view.holder:
        return "takeover"  # released on shutdown
    if unchanged_since is not None and now - unchanged_since >= view.duration:
        return "takeover"
    return "follow"


micro_time = rfc3339_micro


class LeaderElector:
    def __init__(
        self,
        api: LeaseApi,
        namespace: str,
        name: str,
        identity: str,
        *,
        duration: float = 15.0,
        renew_deadline: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if renew_deadline >= duration:
            raise ValueError("renew_deadline must be shorter than the lease duration")
        self.api = api
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration = duration
        self.renew_deadline = renew_deadline
        self.monotonic = monotonic
        self.wall = wall
        self._seen: tuple[str, str] | None = None
        self._seen_at: float | None = None
        self._renewed_at: float | None = None

    def is_leader(self) -> bool:
        return self._renewed_at is not None and self.monotonic() - self._renewed_at < self.renew_deadline

    def tick(self) -> bool:
        """Read the Lease and act on it once; returns whether we lead now."""
        now = self.monotonic()
        try:
            obj = self.api.get_lease(self.namespace, self.name)
        except Exception as err:  # the API server being away is no reason to crash; we just lose the lead
            log.warning("lease %s/%s unreadable: %s", self.namespace, self.name, err)
            return self.is_leader()
        view = LeaseView.parse(obj)
        record = (view.holder, view.renew_time) if view is not None else None
        if record != self._seen:
            self._seen, self._seen_at = record, now
        decision = decide(view, self.identity, self._seen_at, now)
        if decision == "follow":
            self._renewed_at = None
            return False
        stamp = micro_time(self.wall())
        spec: dict[str, Any] = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.duration),
            "renewTime": stamp,
        }
        if decision == "create":
            spec |= {"acquireTime": stamp, "leaseTransitions": 0}
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": spec,
            }
            won = self._call(lambda: self.api.create_lease(body))
        else:
            assert view is not None and obj is not None
            taking = decision == "takeover"
            spec |= {
                "acquireTime": stamp if taking else view.acquire_time or stamp,
                "leaseTransitions": view.transitions + (1 if taking else 0),
            }
            won = self._call(lambda: self.api.patch_lease(self.namespace, self.name, _swap(obj, spec)))
        if won:
            self._renewed_at = now
            if decision != "renew":
                log.info("lease %s/%s: %s is now the leader (%s)", self.namespace, self.name, self.identity, decision)
        elif decision != "renew":
            self._renewed_at = None
        return self.is_leader()

    def release(self) -> None:
        """Give the Lease up on shutdown so another replica takes over at once."""
        if not self.is_leader():
            return
        try:
            obj = self.api.get_lease(self.namespace, self.name)
        except Exception:
            return
        view = LeaseView.parse(obj)
        if obj is None or view is None or view.holder != self.identity:
            return
        spec = dict(obj.get("spec") or {})
        spec["holderIdentity"] = ""
        self._call(lambda: self.api.patch_lease(self.namespace, self.name, _swap(obj, spec)))
        self._renewed_at = None

    def _call(self, fn: Callable[[], bool]) -> bool:
        try:
            return fn()
        except Exception as err:
            log.warning("lease %s/%s write failed: %s", self.namespace, self.name, err)
            return False


def _swap(obj: Mapping[str, Any], spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JSON patch: replace the spec only if holder and renew time are still what we read."""
    old = obj.get("spec") or {}
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": f"/spec/{field}", "value": old[field]}
        for field in ("holderIdentity", "renewTime")
        if field in old
    ]
    ops.append({"op": "replace" if "spec" in obj else "add", "path": "/spec", "value": dict(spec)})
    return ops
