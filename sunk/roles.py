"""What each of sunk's pod roles may have: the one table.

Every pod sunk renders or the operator creates plays one role, named by its
`app.kubernetes.io/component` label (`ROLES[name]`). A role's entry says, for its pods:

- `containers`: each container sunk puts in the pod (init containers and native sidecars
  included) -> the Linux capabilities it adds after dropping ALL (empty: none);
- `privileged`: the containers that run privileged (slurmd only);
- `root`: the containers that run as UID 0;
- `writable_root`: the containers whose root filesystem stays writable (every other container
  mounts it read-only);
- `escalation`: the containers that may gain privileges (setuid binaries): allowPrivilegeEscalation
  is false for every other one;
- `token`: whether the ServiceAccount token is mounted (only where a process calls the
  Kubernetes API);
- `container_secrets`: each container -> the purposes (`SecretPurpose`) of the Secrets it may
  reach (a volume it mounts, a projected source, env, envFrom); a container not listed (users'
  sidecars) reaches none, and `secrets` is their union, what the role's pods may hold at all.
  `sunk.manifests.auth.secret_purposes(spec)` maps a cluster's Secret names to purposes, and
  `allowed_secret_names(spec, role, container)` gives the names one container may reach;
- `host_paths`: `NONE` or `POLICY` (only the paths the operator's tenant policy allows);
- `host_network`: whether the pod shares the Node's network (no role does);
- `listens`: `Link`s it accepts: a port (None: any port) and the peers allowed to connect;
- `talks_to`: `Link`s it opens: a port and the peers it connects to (for the LDAP servers and an
  external database, None: the ports the spec names).

A peer is another role's name or one of the outside parties `OUTSIDE` lists (the Kubernetes API,
DNS, a Service's source ranges, metrics scrapers, the LDAP servers, an external database,
anywhere). `reasons` says why each grant beyond the restricted baseline is needed, keyed by
`"<container>.<grant>"` or `"token"`.

Everything that decides what a pod gets reads this table: the pod builders' tests compare every
rendered pod with it, the NetworkPolicies are built from `listens` and `talks_to`, and the
scanner's allowlist may only excuse what it grants. Pure data: this module imports nothing of
sunk, so every layer (the spec included) may import it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818
SLURMDBD_PORT = 6819
SLURMRESTD_PORT = 6820
SSH_PORT = 22
MARIADB_PORT = 3306
METRICS_PORT = 9090
"""The runtime's and the operator's /metrics, /healthz and /readyz."""
WEBHOOK_PORT = 8443
"""The admission webhook's HTTPS port (its Service listens on 443)."""

SecretPurpose = Literal[
    "auth", "jwt", "database", "ssh-host-keys", "ldap-bind", "ldap-ca", "ldap-client", "webhook-tls"
]
"""What a Secret holds: the Slurm auth key (munge.key or slurm.key), the JWT key, the accounting
database's passwords, the login host keys, the LDAP bind password, the LDAP CA certificate, the
LDAP client certificate and key, the admission webhook's serving certificate and key. (SSSD's
configuration holds no secret: a ConfigMap.)"""

HostPaths = Literal["none", "policy"]
NONE: HostPaths = "none"
POLICY: HostPaths = "policy"

# Outside parties a Link may name instead of a role.
KUBE_API = "kube-api"
"""The Kubernetes API server (its address differs per cluster: a configurable CIDR)."""
DNS = "dns"
"""The cluster's DNS (port 53, UDP and TCP)."""
SOURCE_RANGES = "source-ranges"
"""The source ranges the role's Service is exposed to (anywhere when it names none)."""
SCRAPERS = "metrics-scrapers"
"""Prometheus, in whatever namespace the platform runs it."""
LDAP = "ldap"
"""The LDAP servers of auth.ldap."""
DATABASE = "external-database"
"""accounting.external's database server."""
ANYWHERE = "anywhere"
"""Any address: users' jobs and login sessions reach what they need."""
OUTSIDE = frozenset({KUBE_API, DNS, SOURCE_RANGES, SCRAPERS, LDAP, DATABASE, ANYWHERE})


@dataclass(frozen=True)
class Link:
    """Traffic on `port` (None: any port) with each of `peers` (role names or OUTSIDE parties)."""

    port: int | None
    peers: tuple[str, ...]
    protocol: Literal["TCP", "UDP"] = "TCP"


@dataclass(frozen=True)
class Role:
    """One row of the table (see the module docstring)."""

    name: str
    containers: Mapping[str, frozenset[str]]
    token: bool = False
    container_secrets: Mapping[str, frozenset[SecretPurpose]] = field(default_factory=dict)
    privileged: frozenset[str] = frozenset()
    root: frozenset[str] = frozenset()
    writable_root: frozenset[str] = frozenset()
    escalation: frozenset[str] = frozenset()
    host_paths: HostPaths = NONE
    host_network: bool = False
    listens: tuple[Link, ...] = ()
    talks_to: tuple[Link, ...] = ()
    reasons: Mapping[str, str] = field(default_factory=dict)

    @property
    def secrets(self) -> frozenset[SecretPurpose]:
        """What some container of the role may reach: what its pods may hold at all."""
        return frozenset(p for purposes in self.container_secrets.values() for p in purposes)

    def capabilities(self, container: str) -> frozenset[str]:
        """What `container` adds (KeyError: the role has no such container)."""
        return self.containers[container]

    def peers_out(self) -> frozenset[str]:
        return frozenset(p for link in self.talks_to for p in link.peers)


def _caps(*names: str) -> frozenset[str]:
    return frozenset(names)


MUNGE_CAPABILITIES = _caps("CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID")
"""munged's sidecar: starts as root to own the key and socket folder, then becomes munge."""
SSSD_CAPABILITIES = _caps("CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "SETGID", "SETUID")
"""sssd's sidecar: reads its 0600 config and serves NSS and PAM to the pod's other containers."""
SSHD_CAPABILITIES = _caps(
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "NET_BIND_SERVICE", "SETGID", "SETUID", "SYS_CHROOT"
)
"""What sshd keeps on login: binds 22, chroots its privilege-separated child, becomes each user."""

_NO_CAPS: frozenset[str] = frozenset()
# The sidecars a Slurm pod may carry: munged (auth munge), sackd (auth slurm on login), sssd (LDAP).
_MUNGE = {"munge": MUNGE_CAPABILITIES}
_SSSD = {"sssd": SSSD_CAPABILITIES}
_SIDECAR_ROOT = frozenset({"munge", "sssd"})
_SIDECAR_REASONS = {
    "munge.root": "munged's start owns the key copy and the socket folder, then runs munged as munge",
    "munge.capabilities": "CHOWN/FOWNER/DAC_OVERRIDE to own the key copy, SETUID/SETGID to become munge",
    "sssd.root": "sssd reads its 0600 configuration and the LDAP client key",
    "sssd.capabilities": "serves NSS and PAM to the other containers through a shared socket folder",
}
_LDAP: tuple[SecretPurpose, ...] = ("ldap-bind", "ldap-ca", "ldap-client")
_SSSD_SECRETS: dict[str, frozenset[SecretPurpose]] = {"sssd": frozenset(_LDAP)}
"""The LDAP bind password, CA and client key: the sssd sidecar's alone."""
_AUTH: frozenset[SecretPurpose] = frozenset({"auth"})
_MUNGE_SECRETS: dict[str, frozenset[SecretPurpose]] = {"munge": _AUTH}
_CTL: frozenset[SecretPurpose] = frozenset({"auth", "jwt"})
"""The controller's containers share its projected /etc/slurm, which holds slurm.key (auth/slurm)
and the JWT key slurm.conf names."""
_JWT: frozenset[SecretPurpose] = frozenset({"jwt"})
_DNS_OUT = (Link(53, (DNS,), "UDP"), Link(53, (DNS,)))
_METRICS_IN = (Link(METRICS_PORT, (SCRAPERS,)),)


def _role(role: Role) -> tuple[str, Role]:
    return role.name, role


ROLES: Mapping[str, Role] = MappingProxyType(
    dict(
        [
            _role(
                Role(
                    "controller",
                    # wait-qos: an init container, sacctmgr until the partitions' QOS exist.
                    # wait-slurmdbd and state-guard: init containers during a release upgrade
                    # (sunk.manifests.upgrade); the guard reads and writes the state and its copy.
                    containers={
                        "slurmctld": _NO_CAPS,
                        "reconfigure": _NO_CAPS,
                        "wait-qos": _NO_CAPS,
                        "wait-slurmdbd": _NO_CAPS,
                        "state-guard": _NO_CAPS,
                        # fence: with backups, holds the cluster's Lease while slurmctld is the
                        # primary (sunk.fence); it reads no Secret.
                        "fence": _NO_CAPS,
                        **_MUNGE,
                        **_SSSD,
                    },
                    container_secrets={
                        "slurmctld": _CTL,
                        "reconfigure": _CTL,
                        "wait-qos": _CTL,
                        "wait-slurmdbd": _CTL,
                        "state-guard": frozenset(),
                        "fence": frozenset(),
                        **_MUNGE_SECRETS,
                        **_SSSD_SECRETS,
                    },
                    # With backups only (sunk.manifests.controller.fenced); one controller's pod
                    # says automountServiceAccountToken: false.
                    token=True,
                    root=_SIDECAR_ROOT,
                    writable_root=frozenset({"sssd"}),
                    # controller from and to controller: with backups, each pings the others and a
                    # returning primary asks the backup in control to give it back. Blocked, a
                    # failback on the local cluster ran two primaries for 4 s (slurmctld: "Two
                    # slurmctld daemons are running as primary") and drained a node ("Duplicate jobid").
                    listens=(
                        Link(
                            SLURMCTLD_PORT,
                            (
                                "controller",
                                "slurmd",
                                "login",
                                "accounting",
                                "accounting-setup",
                                "restapi",
                                "syncer",
                                "exporter",
                            ),
                        ),
                    ),
                    talks_to=(
                        Link(SLURMCTLD_PORT, ("controller",)),
                        Link(SLURMD_PORT, ("slurmd",)),
                        Link(SLURMDBD_PORT, ("accounting",)),
                        # srun and salloc on login listen on ephemeral ports slurmctld calls back.
                        Link(None, ("login",)),
                        Link(None, (LDAP,)),
                        # The fence's Lease, with backups.
                        Link(None, (KUBE_API,)),
                        *_DNS_OUT,
                    ),
                    reasons={
                        **_SIDECAR_REASONS,
                        "token": "with backups the fence writes the cluster's Lease, the one grant of its ServiceAccount",
                    },
                )
            ),
            _role(
                Role(
                    "accounting",
                    # db-guard: a sidecar during a release upgrade, the database's dump and restore.
                    containers={"slurmdbd": _NO_CAPS, "db-guard": _NO_CAPS, **_MUNGE, **_SSSD},
                    # slurmdbd: the auth key, the JWT key (AuthAltParameters) and the DB password.
                    container_secrets={
                        "slurmdbd": frozenset({"auth", "jwt", "database"}),
                        "db-guard": frozenset({"database"}),
                        **_MUNGE_SECRETS,
                        **_SSSD_SECRETS,
                    },
                    root=_SIDECAR_ROOT,
                    writable_root=frozenset({"sssd"}),
                    listens=(Link(SLURMDBD_PORT, ("controller", "login", "restapi", "accounting-setup")),),
                    talks_to=(
                        Link(MARIADB_PORT, ("mariadb",)),
                        Link(None, (DATABASE,)),
                        Link(SLURMCTLD_PORT, ("controller",)),
                        Link(None, (LDAP,)),
                        *_DNS_OUT,
                    ),
                    reasons=_SIDECAR_REASONS,
                )
            ),
            _role(
                Role(
                    "mariadb",
                    containers={"mariadb": _NO_CAPS},
                    container_secrets={"mariadb": frozenset({"database"})},
                    listens=(Link(MARIADB_PORT, ("accounting",)),),
                    talks_to=_DNS_OUT,
                )
            ),
            _role(
                Role(
                    "accounting-setup",
                    containers={"setup": _NO_CAPS, **_MUNGE},
                    container_secrets={"setup": _AUTH, **_MUNGE_SECRETS},
                    root=frozenset({"munge"}),
                    talks_to=(
                        Link(SLURMDBD_PORT, ("accounting",)),
                        Link(SLURMCTLD_PORT, ("controller",)),
                        *_DNS_OUT,
                    ),
                    reasons=_SIDECAR_REASONS,
                )
            ),
            _role(
                Role(
                    "restapi",
                    containers={"slurmrestd": _NO_CAPS},
                    container_secrets={"slurmrestd": _AUTH},
                    listens=(
                        Link(
                            SLURMRESTD_PORT,
                            ("syncer", "scheduler", "exporter", "login", "operator", SOURCE_RANGES),
                        ),
                    ),
                    talks_to=(
                        Link(SLURMCTLD_PORT, ("controller",)),
                        Link(SLURMDBD_PORT, ("accounting",)),
                        *_DNS_OUT,
                    ),
                )
            ),
            _role(
                Role(
                    "login",
                    # wait-slurmctld: an init container during a release upgrade (sunk.manifests.upgrade).
                    containers={
                        "sshd": SSHD_CAPABILITIES,
                        "sackd": _NO_CAPS,
                        "wait-slurmctld": _NO_CAPS,
                        **_MUNGE,
                        **_SSSD,
                    },
                    # sshd holds its host keys and nothing else: users' sessions run in it.
                    container_secrets={
                        "sshd": frozenset({"ssh-host-keys"}),
                        "sackd": _AUTH,
                        "wait-slurmctld": frozenset(),
                        **_MUNGE_SECRETS,
                        **_SSSD_SECRETS,
                    },
                    root=frozenset({"sshd", "sackd", *_SIDECAR_ROOT}),
                    writable_root=frozenset({"sshd", "sackd", "sssd"}),
                    escalation=frozenset({"sshd"}),
                    listens=(
                        Link(SSH_PORT, (SOURCE_RANGES,)),
                        # srun, salloc and sattach: slurmctld and slurmstepd call back on ephemeral ports.
                        Link(None, ("controller", "slurmd")),
                    ),
                    # Users' sessions: srun to every slurmd and its steps, and whatever users fetch.
                    talks_to=(Link(None, (ANYWHERE,)),),
                    reasons={
                        **_SIDECAR_REASONS,
                        "sshd.root": "sshd binds port 22 and switches to each user who logs in",
                        "sshd.capabilities": "sshd's minimum: bind 22, chroot its privilege-separated child, "
                        "become the user, write the audit record, own the host keys it installs",
                        "sackd.root": "sackd reads the root-owned slurm.key and serves credentials to users",
                        "sshd.escalation": "users' sessions run setuid programs (su, sudo, passwd, newgrp)",
                    },
                )
            ),
            _role(
                Role(
                    "slurmd",
                    containers={"slurmd": _NO_CAPS, **_MUNGE, **_SSSD},
                    # Jobs run in slurmd's container: the auth key (slurm.key) only.
                    container_secrets={"slurmd": _AUTH, **_MUNGE_SECRETS, **_SSSD_SECRETS},
                    privileged=frozenset({"slurmd"}),
                    escalation=frozenset({"slurmd"}),
                    root=frozenset({"slurmd", *_SIDECAR_ROOT}),
                    writable_root=frozenset({"slurmd", "munge", "sssd"}),
                    host_paths=POLICY,
                    listens=(
                        Link(SLURMD_PORT, ("controller",)),
                        # Step launch and I/O, the step fan-out tree and MPI between nodes.
                        Link(None, ("slurmd", "login")),
                    ),
                    # Jobs reach whatever they need.
                    talks_to=(Link(None, (ANYWHERE,)),),
                    reasons={
                        **_SIDECAR_REASONS,
                        "slurmd.privileged": "slurmd creates a cgroup and a device filter per job, starts steps "
                        "as the job's user, and pyxis/enroot mount container filesystems",
                        "slurmd.root": "slurmd starts each job step as the job's user",
                    },
                )
            ),
            _role(
                Role(
                    "syncer",
                    containers={"syncer": _NO_CAPS},
                    token=True,
                    container_secrets={"syncer": _JWT},
                    listens=_METRICS_IN,
                    talks_to=(
                        Link(None, (KUBE_API,)),
                        Link(SLURMCTLD_PORT, ("controller",)),
                        Link(SLURMRESTD_PORT, ("restapi",)),
                        *_DNS_OUT,
                    ),
                    reasons={"token": "watches Nodes and pods, patches Node annotations and conditions"},
                )
            ),
            _role(
                Role(
                    "scheduler",
                    containers={"scheduler": _NO_CAPS},
                    token=True,
                    container_secrets={"scheduler": _JWT},
                    listens=_METRICS_IN,
                    talks_to=(Link(None, (KUBE_API,)), Link(SLURMRESTD_PORT, ("restapi",)), *_DNS_OUT),
                    reasons={"token": "watches pods and Nodes and binds pods"},
                )
            ),
            _role(
                Role(
                    "exporter",
                    containers={"exporter": _NO_CAPS},
                    container_secrets={"exporter": _JWT},
                    listens=_METRICS_IN,
                    talks_to=(
                        Link(SLURMCTLD_PORT, ("controller",)),
                        Link(SLURMRESTD_PORT, ("restapi",)),
                        *_DNS_OUT,
                    ),
                )
            ),
            _role(
                Role(
                    "webhook",
                    containers={"webhook": _NO_CAPS},
                    token=True,
                    container_secrets={"webhook": frozenset({"webhook-tls"})},
                    # The API server calls it from its own address, on the pod's port.
                    listens=(Link(WEBHOOK_PORT, (KUBE_API,)), *_METRICS_IN),
                    talks_to=(Link(None, (KUBE_API,)), *_DNS_OUT),
                    reasons={"token": "writes its CA into its own MutatingWebhookConfiguration (by name only)"},
                )
            ),
            _role(
                Role(
                    "keygen",
                    containers={"keygen": _NO_CAPS},
                    token=True,
                    talks_to=(Link(None, (KUBE_API,)),),
                    reasons={"token": "creates the cluster's key and password Secrets (create only, never reads)"},
                )
            ),
            _role(
                Role(
                    "operator",
                    containers={"operator": _NO_CAPS},
                    token=True,
                    listens=_METRICS_IN,
                    talks_to=(Link(None, (KUBE_API,)), Link(SLURMRESTD_PORT, ("restapi",)), *_DNS_OUT),
                    reasons={"token": "creates slurmd pods and Services for NodeSets, reads each tenant's JWT key"},
                )
            ),
        ]
    )
)
"""Role name (the pods' app.kubernetes.io/component) -> its row."""


def role(name: str) -> Role:
    """The row of role `name`; KeyError names the roles there are."""
    try:
        return ROLES[name]
    except KeyError:
        raise KeyError(f"no pod role {name!r}; roles: {', '.join(sorted(ROLES))}") from None
