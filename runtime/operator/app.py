"""The long-running operator process: settings from the environment, leader election, a
periodic level-based resync, Prometheus metrics and health endpoints.

    python -m sunk.runtime.operator      # in a pod (in-cluster config) or with KUBECONFIG

Environment (defaults in brackets): SUNK_OPERATOR_ID [hostname], SUNK_OPERATOR_NAMESPACE
[sunk-system] and SUNK_OPERATOR_LEASE [sunk-operator] (where the Lease lives),
SUNK_RESYNC_SECONDS [10], SUNK_LEASE_SECONDS [15], SUNK_RENEW_DEADLINE_SECONDS [10],
SUNK_TOPOLOGY_DELAY_SECONDS [90], SUNK_SLURMRESTD_URL
[http://{cluster}-restapi.{namespace}.svc.cluster.local:6820], SUNK_SLURM_USER [slurm],
SUNK_HEALTH_PORT [8080], SUNK_OPERATOR_POLICY [the default sunk.policy.TenantPolicy: tenant
namespaces only, images from ghcr.io/sunk-dev/, no hostPath] as JSON in the policy's camelCase."""

from __future__ import annotations

import base64
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from pydantic import ValidationError

from sunk import naming
from sunk.policy import TenantPolicy
from sunk.spec.errors import format_errors

from ..common.health import HealthServer
from ..slurmrest import JwtMinter, SlurmRestClient
from .clients import KubeApi, RestSlurm, SlurmApi
from .leader import LeaderElector, LeaseApi
from .reconcile import ClusterRef, Reconciler, SlurmFactory

log = logging.getLogger("sunk.operator")


@dataclass(frozen=True)
class Settings:
    identity: str
    lease_namespace: str = "sunk-system"
    lease_name: str = "sunk-operator"
    resync: float = 10.0
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    topology_delay: float = 90.0
    slurmrestd_url: str = f"http://{{cluster}}-restapi.{{namespace}}.svc.cluster.local:{naming.SLURMRESTD_PORT}"
    slurm_user: str = "slurm"
    health_port: int = 8080
    policy: TenantPolicy = field(default_factory=TenantPolicy)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Settings:
        d = cls(identity="")
        return cls(
            identity=env.get("SUNK_OPERATOR_ID") or socket.gethostname(),
            lease_namespace=env.get("SUNK_OPERATOR_NAMESPACE", d.lease_namespace),
            lease_name=env.get("SUNK_OPERATOR_LEASE", d.lease_name),
            resync=float(env.get("SUNK_RESYNC_SECONDS", d.resync)),
            lease_duration=float(env.get("SUNK_LEASE_SECONDS", d.lease_duration)),
            renew_deadline=float(env.get("SUNK_RENEW_DEADLINE_SECONDS", d.renew_deadline)),
            topology_delay=float(env.get("SUNK_TOPOLOGY_DELAY_SECONDS", d.topology_delay)),
            slurmrestd_url=env.get("SUNK_SLURMRESTD_URL", d.slurmrestd_url),
            slurm_user=env.get("SUNK_SLURM_USER", d.slurm_user),
            health_port=int(env.get("SUNK_HEALTH_PORT", d.health_port)),
            policy=_policy(env.get("SUNK_OPERATOR_POLICY")),
        )


class SettingsError(Exception):
    """A setting the operator can't start with; the message names it."""


def _policy(text: str | None) -> TenantPolicy:
    if not text:
        return TenantPolicy()
    try:
        return TenantPolicy.model_validate_json(text, by_alias=True, by_name=False)
    except ValidationError as err:
        raise SettingsError("SUNK_OPERATOR_POLICY: " + "; ".join(format_errors(err, TenantPolicy))) from None


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
        client = SlurmRestClient(url, user=self.user, token=JwtMinter(key, self.user), retries=1, timeout=10.0)
        if hit is not None:
            hit[1].client.close()
        api = RestSlurm(client)
        self._cache[ref] = (self.monotonic(), api)
        return api


class Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.resyncs = Counter("sunk_operator_resyncs", "Resyncs run", registry=registry)
        self.actions = Counter("sunk_operator_actions", "Actions applied", ["kind"], registry=registry)
        self.errors = Counter("sunk_operator_errors", "Failed actions and resyncs", registry=registry)
        self.seconds = Histogram("sunk_operator_resync_seconds", "Resync wall time", registry=registry)
        self.leader = Gauge("sunk_operator_leader", "1 while this replica leads", registry=registry)
        self.slurm_unreadable = Gauge(
            "sunk_operator_slurm_unreadable_clusters", "Clusters whose Slurm could not be read", registry=registry
        )


class Operator:
    """Elect, then resync every `settings.resync` seconds while leading."""

    def __init__(
        self,
        kube: KubeApi,
        leases: LeaseApi,
        settings: Settings,
        *,
        slurm_for: SlurmFactory | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.settings = settings
        self.monotonic = monotonic
        self.elector = LeaderElector(
            leases,
            settings.lease_namespace,
            settings.lease_name,
            settings.identity,
            duration=settings.lease_duration,
            renew_deadline=settings.renew_deadline,
            monotonic=monotonic,
            wall=clock,
        )
        self.reconciler = Reconciler(
            kube,
            slurm_for or SlurmClients(kube, settings.slurmrestd_url, settings.slurm_user),
            clock=clock,
            topology_delay=timedelta(seconds=settings.topology_delay),
            may_act=self.elector.is_leader,
            identity=settings.identity,
            policy=settings.policy,
        )
        self.registry = registry or CollectorRegistry()
        self.metrics = Metrics(self.registry)
        self._next_resync = 0.0
        self.last_resync_ok: float | None = None

    def step(self) -> bool:
        """One election tick, and a resync when leading and due. Returns whether one ran."""
        leading = self.elector.tick()
        self.metrics.leader.set(1 if leading else 0)
        now = self.monotonic()
        if not leading or now < self._next_resync:
            return False
        self._next_resync = now + self.settings.resync
        started = time.monotonic()
        try:
            report = self.reconciler.resync()
        except Exception:
            log.exception("resync failed")
            self.metrics.errors.inc()
            return True
        self.metrics.seconds.observe(time.monotonic() - started)
        self.metrics.resyncs.inc()
        self.metrics.slurm_unreadable.set(len(report.slurm_unreadable))
        for action in report.applied:
            self.metrics.actions.labels(type(action).__name__).inc()
        self.metrics.errors.inc(len(report.errors))
        self.last_resync_ok = self.monotonic()
        return True

    def run(self, stop: threading.Event) -> None:
        # Renew well within the deadline: a third of the lease duration, as client-go's retry period.
        tick = min(self.settings.resync, self.settings.lease_duration / 3)
        try:
            while not stop.is_set():
                self.step()
                stop.wait(tick)
        finally:
            self.elector.release()

    def alive(self) -> tuple[bool, str]:
        return True, "running"

    def ready(self) -> tuple[bool, str]:
        # A follower is ready (it stands by); a leader must have completed a resync lately.
        if not self.elector.is_leader():
            return True, "standing by"
        last = self.last_resync_ok
        if last is None or self.monotonic() - last > 3 * self.settings.resync + 30:
            return False, "leading but no successful resync lately"
        return True, "leading"


def kube_client() -> Any:
    """An ApiClient from the in-cluster service account, else KUBECONFIG."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    return client.ApiClient()


def main() -> int:
    from .clients import OfficialKube

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings.from_env()
    except SettingsError as err:
        log.error("%s", err)
        return 2
    kube = OfficialKube(kube_client())
    operator = Operator(kube, kube, settings)
    health = HealthServer(settings.health_port, operator.registry, alive=operator.alive, ready=operator.ready)
    health.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info(
        "sunk operator %s starting (lease %s/%s)", settings.identity, settings.lease_namespace, settings.lease_name
    )
    try:
        operator.run(stop)
    finally:
        health.stop()
    return 0
