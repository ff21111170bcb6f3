"""Spec sections for the Slurm daemons that are not compute nodes."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from sunk.images import (
    DEFAULT_ARCH,
    DEFAULT_REGISTRY,
    DEFAULT_SLURM,
    ROLES,
    SLURM_VERSION,
    Arch,
    repository,
    tag_for,
)
from sunk.problem import Problem, Problems
from sunk.spec.base import (
    Cidr,
    DnsLabel,
    DnsSubdomain,
    Image,
    Labels,
    Model,
    PositiveQuantity,
    Registry,
    Resources,
    SecretRef,
    _matcher,
    quantity_value,
    resources,
)
from sunk.spec.identity import AuthSpec, KeySource, LdapSpec, LoginSpec
from sunk.spec.pod import ExtraArgs, HeadlessServiceSettings, PodRole, PodSettings, ServiceSettings
from sunk.spec.slurmtext import SlurmConfLines, SlurmdbdConfLines

RoleField = Literal["controller", "accounting", "restapi", "login", "slurmd", "mariadb", "runtime"]
"""A field of Images: one per role."""

ROLE_OF: dict[RoleField, str] = {
    "controller": "slurmctld",
    "accounting": "slurmdbd",
    "restapi": "slurmrestd",
    "login": "login",
    "slurmd": "slurmd",
    "mariadb": "mariadb",
    "runtime": "runtime",
}
"""The sunk.images role behind each field of Images."""


def ours(
    role: str,
    registry: str = DEFAULT_REGISTRY,
    arch: Arch = DEFAULT_ARCH,
    variant: str | None = None,
    release: str = DEFAULT_SLURM,
) -> Image:
    """The image sunk builds for `role` (sunk.images.ROLES) of a Slurm release, as an Image."""
    return Image(repository=repository(role, registry), tag=tag_for(ROLES[role], arch, variant, release))


class Images(Model):
    """One image per role, each built by `sunk images build` from runtime/images (sunk.images.ROLES).
    A role left unset is ours: `<registry>/<image>:<tag>`, of the cluster's Slurm release
    (`slurm.version`: slurmctld:26.05.5, sunk-runtime:0.1.0-slurm26.05), for the architecture of the NodeSet
    that runs it and, with pyxis enabled, the pyxis variant of slurmd and login. A role set here is
    used as given, everywhere (https://kubernetes.io/docs/concepts/containers/images/)."""

    registry: Registry | None = None
    """Registry (and path) every unset role's image comes from, e.g. registry.example.com:5000/hpc
    for a mirror filled by `sunk images push`. Default: none (ghcr.io/sunk-dev)."""
    controller: Image = ours("slurmctld")
    """slurmctld. Default: ghcr.io/sunk-dev/slurmctld:26.05.5 (24.11.5 with Slurm 24.11)."""
    accounting: Image = ours("slurmdbd")
    """slurmdbd. Default: ghcr.io/sunk-dev/slurmdbd:26.05.5 (24.11.5 with Slurm 24.11)."""
    restapi: Image = ours("slurmrestd")
    """slurmrestd. Default: ghcr.io/sunk-dev/slurmrestd:26.05.5 (24.11.5 with Slurm 24.11)."""
    login: Image = ours("login")
    """Login (sshd, sssd, Slurm clients). Default: ghcr.io/sunk-dev/login:26.05.5, with pyxis
    enabled login:26.05.5-pyxis."""
    slurmd: Image = ours("slurmd")
    """slurmd for every NodeSet without its own `image`, whatever its architecture (so set a
    multi-arch image here). Default: ghcr.io/sunk-dev/slurmd:26.05.5 for amd64 NodeSets,
    slurmd:26.05.5-arm64 for arm64 ones; with pyxis enabled slurmd:26.05.5-pyxis and
    slurmd:26.05.5-pyxis-arm64 (24.11.5 in each with Slurm 24.11)."""
    mariadb: Image = ours("mariadb")
    """In-cluster accounting database (Debian's mariadb-server with sunk's entrypoint).
    Default: ghcr.io/sunk-dev/mariadb:11.8."""
    runtime: Image = ours("runtime")
    """Operator, syncer and scheduler (one Python image). Default: ghcr.io/sunk-dev/sunk-runtime:0.1.0-slurm26.05
    (its Slurm clients are the cluster's release: 0.1.0-slurm24.11 with Slurm 24.11)."""
    pull_secrets: list[DnsSubdomain] = []
    """imagePullSecrets of every pod of the cluster (slurmd pods included), before each role's own
    `imagePullSecrets`: Secrets of type kubernetes.io/dockerconfigjson in the cluster's namespace,
    for a private registry (https://kubernetes.io/docs/tasks/configure-pod-container/pull-image-private-registry/).
    Default: none."""

    @model_validator(mode="after")
    def _from_registry(self) -> Images:
        if self.registry is not None:
            for field, role in ROLE_OF.items():
                if field not in self.model_fields_set:
                    # The model is frozen; this is its own validation filling a default, which
                    # stays unset (model_fields_set), so a dump and reload gives the same result.
                    object.__setattr__(self, field, ours(role, self.registry))
        return self

    def resolve(
        self, field: RoleField, arch: Arch = DEFAULT_ARCH, variant: str | None = None, release: str = DEFAULT_SLURM
    ) -> Image:
        """The image of role `field` for `arch`, `variant` (such as pyxis) and Slurm `release`:
        as set, else ours."""
        if field in self.model_fields_set:
            image: Image = getattr(self, field)
            return image
        return ours(ROLE_OF[field], self.registry or DEFAULT_REGISTRY, arch, variant, release)

    def for_release(self, release: str) -> Images:
        """These images with every unset role's default taken from Slurm `release`'s family."""
        copy = self.model_copy()
        for field, role in ROLE_OF.items():
            if field not in self.model_fields_set:
                # As in _from_registry: a default filled, still unset in model_fields_set.
                object.__setattr__(copy, field, ours(role, self.registry or DEFAULT_REGISTRY, release=release))
        return copy


class StateStorage(Model):
    """PersistentVolumeClaim for StateSaveLocation (https://slurm.schedmd.com/slurm.conf.html#OPT_StateSaveLocation)."""

    size: PositiveQuantity = "10Gi"
    """Default: 10Gi."""
    storage_class: DnsSubdomain | None = None
    """StorageClass. Default: the cluster's default class."""
    access_mode: Literal["ReadWriteOnce", "ReadWriteMany"] | None = None
    """The claim's access mode (https://kubernetes.io/docs/concepts/storage/persistent-volumes/#access-modes),
    as `storageClass` provides it: sunk can't ask a StorageClass what it supports before the claim
    exists, so you state it. ReadWriteMany (NFS, CephFS, a cloud file service) is what
    `controller.replicas` 2 or 3 needs: every slurmctld reads and writes the one StateSaveLocation.
    Default: ReadWriteOnce."""


CONTROLLER_REPLICAS_MAX = 3
"""Slurm accepts more SlurmctldHost lines, but each backup pings the primary and every client tries
the list in order while the primary is away: a third copy already covers a Node lost while another
is drained (docs/how-to/ha.md)."""


class ControllerSpec(PodSettings):
    """slurmctld (https://slurm.schedmd.com/slurmctld.html), and its pod (sunk.spec.pod.PodSettings)."""

    POD_ROLE: ClassVar[PodRole] = "controller"

    replicas: Annotated[int, Field(ge=1, le=CONTROLLER_REPLICAS_MAX)] = 1
    """How many slurmctld run (https://slurm.schedmd.com/quickstart_admin.html#HA). 1: one pod
    that Kubernetes restarts (state on a ReadWriteOnce claim). 2 or 3: a primary and hot
    backups, one `SlurmctldHost` per pod in order, sharing StateSaveLocation on a ReadWriteMany
    claim (`stateStorage.accessMode: ReadWriteMany` with a named `stateStorage.storageClass`), one
    pod per Node; a backup takes control when the primary has been silent for SlurmctldTimeout
    (8 s with backups, Slurm's 120 s default without). Default: 1. docs/how-to/ha.md says when each wins."""
    resources: Resources = resources("500m", "1Gi", "4Gi")
    """Default: requests 500m/1Gi, limit 4Gi memory."""
    state_storage: StateStorage = StateStorage()
    """Default: 10Gi on the default StorageClass."""
    extra_slurm_conf: SlurmConfLines = []
    """Lines appended verbatim to slurm.conf, after everything sunk renders: `Key=Value` words or
    `#` comments, printable, none ending in a backslash; no password key, and no key sunk renders
    (Slurm keeps the last of a repeated key) but the tuning defaults InactiveLimit, KillWait,
    MinJobAge, SlurmdTimeout, Waittime, ReturnToService, MpiDefault and TreeWidth. Default: none."""
    extra_args: ExtraArgs = []
    """Arguments appended to `slurmctld -D`, e.g. `[-v]`. Default: none."""
    service: HeadlessServiceSettings = HeadlessServiceSettings()
    """Annotations and labels of slurmctld's headless Service (its type is fixed: its DNS name is
    SlurmctldHost). Default: none."""
    metrics: bool = False
    """slurmctld's own OpenMetrics endpoints (`MetricsType=metrics/openmetrics`, Slurm 25.11 and
    later: refused with slurm.version "24.11"): `GET /metrics/{jobs,nodes,partitions,scheduler,
    jobs-users-accts}` over HTTP on slurmctld's port, unauthenticated, for any client that reaches
    that port (the names of users and accounts included). Default: false. sunk's exporter stays
    the scrape target (monitoring.exporter): measured on 26.05.5 at 5,000 jobs, one scrape of every
    endpoint costs slurmctld 173 ms of CPU, the exporter's read 17 ms (docs/slurm-releases.md);
    /metrics/nodes has series per node. https://slurm.schedmd.com/metrics.html"""

    @property
    def ha(self) -> bool:
        """A primary and backups (replicas 2 or 3), not one restarted pod."""
        return self.replicas > 1

    @model_validator(mode="after")
    def _ha_storage(self) -> ControllerSpec:
        if not self.ha:
            return self
        storage = self.state_storage
        why = (
            f"replicas {self.replicas} run a primary and backups that read and write one "
            "StateSaveLocation, so the claim must be ReadWriteMany"
        )
        problems = []
        if storage.access_mode != "ReadWriteMany":
            stated = "unset (ReadWriteOnce)" if storage.access_mode is None else storage.access_mode
            problems.append(
                Problem(
                    "stateStorage.accessMode",
                    f"is {stated}: {why}; set ReadWriteMany with a storageClass that provides it, "
                    "or replicas: 1 (restart-only)",
                )
            )
        if storage.storage_class is None:
            problems.append(
                Problem(
                    "stateStorage.storageClass",
                    f"is unset: {why}, and the cluster's default class can't be known offline to "
                    "provide it; name a ReadWriteMany class (NFS, CephFS, a cloud file service), or replicas: 1",
                )
            )
        if problems:
            raise Problems(problems)
        return self


MARIADB_BUFFER_POOL_MIB = 2048
"""innodb_buffer_pool_size of the in-cluster MariaDB: with less, slurmdbd 24.11 logs errors
(measured on real Slurm; 1G still errs)."""
MARIADB_HEADROOM_MIB = 512
"""Memory MariaDB needs above its buffer pool (buffer-pool bookkeeping, connections, log buffer)."""


class MariaDbSpec(PodSettings):
    """In-cluster MariaDB for slurmdbd, and its pod (sunk.spec.pod.PodSettings)."""

    POD_ROLE: ClassVar[PodRole] = "mariadb"

    storage_size: PositiveQuantity = "20Gi"
    """Default: 20Gi."""
    storage_class: DnsSubdomain | None = None
    """Default: the cluster's default class."""
    resources: Resources = resources("250m", "2560Mi", "3Gi")
    """Default: requests 250m/2.5Gi, limit 3Gi memory (the InnoDB buffer pool is 2Gi). A memory
    request must hold the buffer pool and a limit must leave 512Mi above it."""
    extra_args: ExtraArgs = []
    """mariadbd options appended to sunk's, e.g. `[--max-connections=500]`. Default: none."""

    @model_validator(mode="after")
    def _room_for_the_buffer_pool(self) -> MariaDbSpec:
        pool = MARIADB_BUFFER_POOL_MIB * 2**20
        limit, request = self.resources.limits.memory, self.resources.requests.memory
        need = MARIADB_BUFFER_POOL_MIB + MARIADB_HEADROOM_MIB
        if limit is not None and quantity_value(limit) < need * 2**20:
            raise Problems(
                [
                    Problem(
                        "resources.limits.memory",
                        f"{limit} would OOM-kill MariaDB, whose InnoDB buffer pool alone is "
                        f"{MARIADB_BUFFER_POOL_MIB}Mi; use at least {need}Mi (default 3Gi)",
                    )
                ]
            )
        if request is not None and quantity_value(request) < pool:
            raise Problems(
                [
                    Problem(
                        "resources.requests.memory",
                        f"{request} is less than MariaDB's {MARIADB_BUFFER_POOL_MIB}Mi InnoDB "
                        f"buffer pool; request at least {MARIADB_BUFFER_POOL_MIB}Mi (default 2560Mi)",
                    )
                ]
            )
        return self


class ExternalDbSpec(Model):
    """An existing MySQL/MariaDB server (https://slurm.schedmd.com/slurmdbd.conf.html#OPT_StorageHost)."""

    host: Annotated[str, _matcher(r"[A-Za-z0-9.-]+", "a host name or IP address such as db.example.com", 253)]
    """Host name or address. Required."""
    port: Annotated[int, Field(ge=1, le=65535)] = 3306
    """Default: 3306."""
    database: Annotated[str, _matcher(r"[A-Za-z0-9_]+", "a database name: letters, digits, '_'", 64)] = "slurm_acct_db"
    """StorageLoc. Default: slurm_acct_db."""
    user: Annotated[str, _matcher(r"[A-Za-z0-9_.-]+", "a database user: letters, digits, '_', '.', '-'", 80)] = "slurm"
    """StorageUser. Default: slurm."""
    password_secret: SecretRef
    """Secret holding the password; read by slurmdbd at start, never rendered. Required."""


class AccountingSpec(PodSettings):
    """slurmdbd and its database (https://slurm.schedmd.com/accounting.html). The pod settings
    (sunk.spec.pod.PodSettings) are slurmdbd's; its scheduling, pull and pod metadata settings also
    reach the accounting setup Job. MariaDB has its own under `mariadb`."""

    POD_ROLE: ClassVar[PodRole] = "accounting"

    enabled: bool = True
    """Default: true."""
    external: ExternalDbSpec | None = None
    """Use an external database instead of the in-cluster MariaDB. Default: none (in-cluster)."""
    mariadb: MariaDbSpec = MariaDbSpec()
    """In-cluster MariaDB, used when `external` is unset. Default: 20Gi storage."""
    resources: Resources = resources("100m", "256Mi", "1Gi")
    """slurmdbd container. Default: requests 100m/256Mi, limit 1Gi memory."""
    extra_args: ExtraArgs = []
    """Arguments appended to `slurmdbd -D`, e.g. `[-v]`. Default: none."""
    extra_slurmdbd_conf: SlurmdbdConfLines = []
    """Lines appended verbatim to slurmdbd.conf. Default: none."""
    enforce: list[Literal["associations", "limits", "qos", "safe", "wckeys"]] = [
        "associations",
        "limits",
        "qos",
        "safe",
    ]
    """AccountingStorageEnforce: what slurmctld enforces from accounting. `limits`, `qos` and
    `safe` imply `associations`: only users with an association (the spec's `accounts`, or root)
    may run jobs, and QOS limits such as `qos[].maxWall` hold. An empty list enforces nothing,
    so limits are only recorded. Default: associations, limits, qos, safe.
    https://slurm.schedmd.com/slurm.conf.html#OPT_AccountingStorageEnforce"""

    @model_validator(mode="after")
    def _no_password_line(self) -> AccountingSpec:
        errors: list[Problem] = []
        if not self.enabled and self.external is not None:
            errors.append(Problem("external", "only used when accounting is enabled; drop it or set enabled: true"))
        if not self.enabled and "enforce" in self.model_fields_set and self.enforce:
            errors.append(
                Problem(
                    "enforce",
                    "AccountingStorageEnforce needs accounting, and accounting.enabled is false, so nothing "
                    "would be enforced; drop enforce or set enabled: true",
                )
            )
        if len(set(self.enforce)) != len(self.enforce):
            errors.append(Problem("enforce", "each value at most once"))
        for i, line in enumerate(self.extra_slurmdbd_conf):
            if line.startswith("#"):
                continue
            words = line.split()
            if len(words) != 1:
                # slurmdbd.conf has no records: a second word would be a second setting on one line.
                errors.append(
                    Problem(
                        f"extraSlurmdbdConf[{i}]", f"one `Key=Value` per line, without spaces; got {len(words)} words"
                    )
                )
        if errors:
            raise Problems(errors)
        return self


class RestApiSpec(PodSettings):
    """slurmrestd with JWT auth (https://slurm.schedmd.com/rest.html), its pods
    (sunk.spec.pod.PodSettings) and its Service."""

    POD_ROLE: ClassVar[PodRole] = "restapi"

    enabled: bool = True
    """Default: true, and it must stay true: the syncer, the scheduler and the operator read and
    change Slurm through it."""
    replicas: Annotated[int, Field(ge=1, le=10)] = 1
    """Default: 1."""
    resources: Resources = resources("100m", "128Mi", "512Mi")
    """Default: requests 100m/128Mi, limit 512Mi memory."""
    extra_args: ExtraArgs = []
    """Arguments appended to slurmrestd's, e.g. `[-vv]`. Default: none."""
    service: ServiceSettings = ServiceSettings()
    """slurmrestd's Service. Exposed beyond the cluster (NodePort, LoadBalancer) it needs
    `sourceRanges`: its NetworkPolicy admits those ranges besides the runtime, login and the
    operator. Default: ClusterIP."""

    @model_validator(mode="after")
    def _exposure(self) -> RestApiSpec:
        kind = self.service.type or "ClusterIP"
        if kind == "NodePort":
            # sourceRanges are a load balancer's: a NodePort slurmrestd could name no client.
            raise Problems(
                [
                    Problem(
                        "service.type",
                        "a NodePort slurmrestd stays fenced by its NetworkPolicy (only the runtime, login "
                        "and the operator reach it) with no way to name other clients; use LoadBalancer with "
                        "sourceRanges, or ClusterIP",
                    )
                ]
            )
        errors = [p.under("service") for p in self.service.problems(kind)]
        if kind == "LoadBalancer" and not self.service.source_ranges:
            errors.append(
                Problem(
                    "service.sourceRanges",
                    "a LoadBalancer slurmrestd is fenced by its NetworkPolicy (only the runtime, "
                    "login and the operator reach it); list the client ranges that may, such as 10.0.0.0/8",
                )
            )
        if errors:
            raise Problems(errors)
        return self


class RuntimeSpec(PodSettings):
    """The syncer and scheduler pods (the per-tenant runtime): one set of pod settings for both."""

    POD_ROLE: ClassVar[PodRole] = "runtime"

    resources: Resources = resources("50m", "128Mi", "512Mi")
    """Each controller's container. Default: requests 50m/128Mi, limit 512Mi memory."""


GO_DURATION_MAX_S = (2**63 - 1) // 10**9
"""The longest duration Go holds (time.Duration: int64 nanoseconds, about 292 years): Prometheus
and the runtime parse these intervals as one, and refuse what overflows it."""


def _interval(value: str) -> str:
    """Whole seconds or minutes (30s, 1m) that Go's time.Duration holds."""
    if not re.fullmatch(r"[1-9][0-9]{0,11}(s|m)", value):
        raise ValueError(f"{value!r} is not an interval: whole seconds or minutes, e.g. 30s or 1m")
    if int(value[:-1]) * (60 if value.endswith("m") else 1) > GO_DURATION_MAX_S:
        raise ValueError(f"{value!r} is longer than a Go duration holds ({GO_DURATION_MAX_S}s); Prometheus refuses it")
    return value


def _exporter_interval(value: str) -> str:
    """Whole seconds or minutes (30s, 1m), at least 5s."""
    _interval(value)
    seconds = int(value[:-1]) * (60 if value.endswith("m") else 1)
    if seconds < 5:
        raise ValueError(f"{value!r} is shorter than 5s; every read lists all jobs and nodes from slurmctld")
    return value


class ExporterSpec(Model):
    """The Slurm metrics exporter (`python -m sunk.runtime.exporter`): a Deployment of the runtime
    image that reads slurmctld through slurmrestd and serves jobs, pending reasons, queue waits,
    nodes, CPUs/GPUs/memory by state and partition and sdiag's statistics as `sunk_slurm_*`."""

    enabled: bool = True
    """Deployed (with its Service and ServiceMonitor) when monitoring is enabled. Needs restapi.
    Default: true."""
    interval: Annotated[str, AfterValidator(_exporter_interval)] = "30s"
    """How often it reads Slurm, and its ServiceMonitor's scrape interval (at least 5s). Scrapes
    are served from the last read, so slurmctld's load does not grow with Prometheus replicas.
    Default: 30s."""
    per_user_metrics: bool = False
    """Also export jobs and CPUs per Slurm user (`sunk_slurm_user_jobs`, `sunk_slurm_user_cpus`).
    Default: false: one series per user and state grows with the user base."""


class MonitoringSpec(Model):
    """Prometheus Operator scraping and a Grafana dashboard for the sunk runtime
    (https://prometheus-operator.dev/docs/api-reference/api/#monitoring.coreos.com/v1.ServiceMonitor)."""

    enabled: bool = False
    """Default: false (the cluster may have no Prometheus Operator: ServiceMonitor is its CRD)."""
    service_monitor: bool = True
    """A ServiceMonitor for the syncer and scheduler metrics, when enabled. Default: true."""
    dashboard: bool = True
    """A Grafana dashboard ConfigMap (picked up by the Grafana sidecar), when enabled. Default: true."""
    rules: bool = True
    """A PrometheusRule with the runtime's alerts (Slurm unreachable, nodes drained for hours, a
    stuck queue, runtime errors, syncer and scheduler lag, a metrics endpoint down), when enabled.
    Default: true."""
    interval: Annotated[str, AfterValidator(_interval)] = "30s"
    """Scrape interval: whole seconds or minutes. Default: 30s."""
    labels: Labels = {}
    """Extra labels on the ServiceMonitor, e.g. the `release` your Prometheus selects. Default: none."""
    dashboard_labels: Labels = {"grafana_dashboard": "1"}
    """Labels the Grafana sidecar looks for. Default: grafana_dashboard: "1"."""
    exporter: ExporterSpec = ExporterSpec()
    """The Slurm metrics exporter. Default: enabled, reading every 30s, no per-user series."""


__all__ = [
    "DEFAULT_REGISTRY",
    "SLURM_VERSION",
    "AccountingSpec",
    "AuthSpec",
    "ControllerSpec",
    "DnsLabel",
    "ExporterSpec",
    "ExternalDbSpec",
    "Images",
    "KeySource",
    "LdapSpec",
    "LoginSpec",
    "MariaDbSpec",
    "MonitoringSpec",
    "RestApiSpec",
    "RuntimeSpec",
    "StateStorage",
]


class NetworkSpec(Model):
    """The NetworkPolicies sunk renders from its role table (sunk.roles, sunk.manifests.network):
    a default deny over sunk's own pods, and per role exactly the traffic the table lists.
    https://kubernetes.io/docs/concepts/services-networking/network-policies/"""

    policies: bool = True
    """Render them. Off only where the platform fences the namespace its own way. Default: true."""
    api_server_cidrs: Annotated[list[Cidr], Field(min_length=1, max_length=16)] = ["0.0.0.0/0", "::/0"]
    """Where the pods that call the Kubernetes API (syncer, scheduler, key generator, operator)
    may reach it: the API server's addresses differ per cluster (the `kubernetes` Service's
    endpoints, `kubectl get endpointslices -n default`), so narrow this to them. Default: anywhere,
    on api_server_ports only."""
    api_server_ports: Annotated[list[Annotated[int, Field(ge=1, le=65535)]], Field(min_length=1, max_length=4)] = [
        443,
        6443,
    ]
    """The API server's ports as pods reach it (after the Service's translation). Default: 443, 6443."""
