"""The operator's Slurm side: the SlurmApi it needs, its implementation on the shared slurmrestd
client (every REST path is the client's), and one client per tenant cluster, its token minted from
that cluster's JWT key Secret."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..slurmrest.connect import SlurmAccess
from ..slurmrest.errors import INVALID_NODE_NAME, SlurmApiError
from ..slurmrest.models import Node as SlurmNode
from ..slurmrest.models import Reservation

if TYPE_CHECKING:
    from ..slurmrest.client import SlurmRestClient
    from .kube import KubeApi


class SlurmApi(Protocol):
    def list_nodes(self) -> list[SlurmNode]: ...
    def drain(self, name: str, reason: str) -> None: ...
    def resume(self, name: str) -> None: ...
    def remove(self, name: str, reason: str) -> None: ...
    def reconfigure(self) -> None: ...
    def list_reservations(self) -> list[Reservation]: ...
    def release(self) -> str | None:
        """The Slurm release of the last read's answer (slurmctld runs it or a later one); None
        when unknown."""
        ...


@dataclass(frozen=True)
class ClusterRef:
    """One Slurm cluster: its namespace, name and the Secret holding its slurmrestd JWT key."""

    namespace: str
    cluster: str
    jwt_secret: str
    jwt_key: str = "jwt_hs256.key"
    """The key inside jwt_secret."""


SlurmFactory = Callable[[ClusterRef], SlurmApi]


class RestSlurm:
    """SlurmApi over slurmrestd."""

    def __init__(self, client: SlurmRestClient) -> None:
        self.client = client

    def list_nodes(self) -> list[SlurmNode]:
        return self.client.list_nodes()

    def drain(self, name: str, reason: str) -> None:
        self.client.update_node(name, state="DRAIN", reason=reason)

    def resume(self, name: str) -> None:
        self.client.update_node(name, state="RESUME")

    def remove(self, name: str, reason: str) -> None:
        # DELETE answers "busy" (2016) until the node is DOWN; either call finding no node is done.
        try:
            self.client.update_node(name, state="DOWN", reason=reason)
            self.client.delete_node(name)
        except SlurmApiError as err:
            if err.code != INVALID_NODE_NAME:
                raise

    def reconfigure(self) -> None:
        self.client.reconfigure()

    def list_reservations(self) -> list[Reservation]:
        return self.client.list_reservations()

    def release(self) -> str | None:
        return self.client.release


class SlurmClients:
    """SlurmFactory: one slurmrestd client per cluster, its JWT minted from the cluster's key
    Secret (read once, again after `ttl` seconds so a rotated key is picked up)."""

    def __init__(
        self,
        kube: KubeApi,
        url_template: str,
        user: str,
        *,
        ttl: float = 600.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.url_template = url_template
        self.user = user
        self.ttl = ttl
        self.monotonic = monotonic
        self._cache: dict[ClusterRef, tuple[float, RestSlurm]] = {}

    def __call__(self, ref: ClusterRef) -> SlurmApi:
        hit = self._cache.get(ref)
        if hit is not None and self.monotonic() - hit[0] < self.ttl:
            return hit[1]
        secret = self.kube.read_secret(ref.namespace, ref.jwt_secret)
        if secret is None or ref.jwt_key not in secret:
            raise LookupError(f"Secret {ref.namespace}/{ref.jwt_secret} has no key {ref.jwt_key}")
        key = base64.b64decode(secret[ref.jwt_key])
        url = self.url_template.format(cluster=ref.cluster, namespace=ref.namespace)
        # One retry only: a resync reads every cluster in turn, and the next resync is the retry.
        client = SlurmAccess.from_key(url, self.user, key, retries=1).client()
        if hit is not None:
            hit[1].client.close()
        api = RestSlurm(client)
        self._cache[ref] = (self.monotonic(), api)
        return api
