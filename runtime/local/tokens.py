"""ServiceAccount tokens as a kubelet keeps them for a pod: one per (audience, expirationSeconds) of
the pod's projected `serviceAccountToken` sources, each bound to the pod, and a new one before the
old expires.

The rotation rule is the kubelet's token manager's (pkg/kubelet/token/token_manager.go,
`requiresRefresh`): a token is renewed once 80 % of its life has passed or it is 24 hours old,
without the manager's random jitter (up to 10 s) so that the rule is a pure function. A token with
no expiry is never renewed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .apitypes import Obj

DEFAULT_SECONDS = 3600
"""A projected serviceAccountToken's expirationSeconds when the pod names none (the API's default)."""
MAX_AGE = 24 * 3600
"""The kubelet renews a token at the latest after a day, whatever its expiry."""


@dataclass(frozen=True)
class Token:
    value: str
    issued: float
    """Seconds since the epoch: the expiry less the lifetime asked for (what the kubelet computes)."""
    expires: float | None
    """Seconds since the epoch; None for a token that lives as long as its pod."""


def due(token: Token | None, now: float) -> bool:
    """Whether a pod needs a new token at `now` (see the module's docstring)."""
    if token is None:
        return True
    if token.expires is None:
        return False
    return now >= token.expires - (token.expires - token.issued) / 5 or now >= token.issued + MAX_AGE


class Issuer(Protocol):
    """Where a node agent gets a pod's tokens: TokenRequest on the API server (nodeagents.py)."""

    def issue(self, pod: Obj, account: str, audience: str | None, seconds: int) -> Token: ...

    def now(self) -> float:
        """The clock rotation reads (seconds since the epoch)."""
        ...


def request_body(pod: Obj, audience: str | None, seconds: int) -> Obj:
    """The TokenRequest a kubelet sends for one projected source of `pod`: bound to the pod (name
    and uid, which NodeRestriction requires of a Node's request), the source's audience (none: the
    API server's own), and its lifetime."""
    meta = pod["metadata"]
    spec: Obj = {
        "expirationSeconds": seconds,
        "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]},
    }
    if audience:
        spec["audiences"] = [audience]
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
