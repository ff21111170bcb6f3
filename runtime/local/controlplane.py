"""The real Kubernetes control plane as processes: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler from the cached build (kubebuild.py), on loopback, in one folder.

`ControlPlane(folder).start()` makes the certificates (pki.py: the cluster CA, the API server's
serving certificate, a client certificate per component, the ServiceAccount signing pair), starts
the four processes with their logs in the folder, and returns once the API server answers /readyz
and both controllers /healthz. `stop()` ends them in reverse order (SIGTERM, then SIGKILL past the
grace). What it serves is Kubernetes' own: protobuf, server-side apply, CRD schema validation,
TokenRequest JWTs, RBAC with the Node authorizer, Pod Security and ServiceAccount admission, the
controllers and the scheduler. No kubelet: Nodes are whoever registers them (issue 37 stage 3).

The flags are the ones kubeadm sets for a single-node control plane, less what a one-machine
cluster has no use for (no aggregation layer, no leader election: one of each component), plus the
node lifecycle's knobs `sunk local up` takes (Settings, `lifecycle_flags`): the
node-lifecycle controller's grace periods, eviction rates and zone thresholds and pod GC's threshold
for kube-controller-manager, and the DefaultTolerationSeconds admission's seconds for the API server.

The API server listens on loopback at a free port (`ControlPlane(folder)`), or for pods
(`ControlPlane.for_pods(folder, address)`) on the pod network's bridge address at 443, which it
also advertises: the `kubernetes` Service's endpoint, its ClusterIP translated there by the node
agents (nodeagents.py). Its certificate names loopback, the address, the ClusterIP and the
`kubernetes.default.svc` names, so an in-cluster client verifies it whichever it dials.
"""

from __future__ import annotations

import contextlib
import ipaddress
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from . import kubebuild, pki

SERVICE_CIDR = "10.96.0.0/16"
"""ClusterIPs the API server allocates (kubeadm's default range)."""
KUBERNETES_SERVICE_IP = str(ipaddress.IPv4Network(SERVICE_CIDR).network_address + 1)
"""The `kubernetes` Service's ClusterIP: the API server gives it the range's first address."""
POD_API_PORT = 443
"""Where pods reach the API server on the bridge address (the `kubernetes` Service's port)."""
ISSUER = "https://kubernetes.default.svc.cluster.local"
"""The ServiceAccount tokens' `iss`, and their default audience."""
READY_TIMEOUT = 120.0
"""Seconds for every component to report healthy: the API server's first start installs its
bootstrap RBAC and priority levels into an empty etcd, which takes tens of seconds on 2 loaded cores."""
STOP_GRACE = 15.0
"""Seconds a component has to exit after SIGTERM before SIGKILL (`ControlPlane.stop`)."""
API_SERVER_STOP_GRACE = 1.0
"""The API server's: after SIGTERM it stops listening at once, then waits up to its request
timeout (60 s) for the requests in flight, watches included, before it exits (measured on the
local cluster: the watchers closed 60 s after SIGTERM, the process still there 80 s after). That
drain is for clients that can go to another API server; a local cluster that stops has none, and
its API server holds no state (etcd does, and is stopped after it with the full grace). It cost
every `sunk local down` 15 s."""


@dataclass(frozen=True)
class Settings:
    """The control plane's knobs the local cluster takes (`sunk local up` flags)."""

    node_monitor_grace: float = 50.0
    """--node-monitor-grace-period: seconds without a heartbeat before a Node's Ready is Unknown
    (v1.32 default 50 s)."""
    not_ready_toleration: int = 300
    """--default-not-ready-toleration-seconds of the DefaultTolerationSeconds admission plugin."""
    unreachable_toleration: int = 300
    """--default-unreachable-toleration-seconds."""
    node_startup_grace: float = 60.0
    """--node-startup-grace-period: seconds a registered Node that never posted Ready has before it
    is Unknown (v1.32 default 1m)."""
    eviction_rate: float = 0.1
    """--node-eviction-rate: Nodes per second, per zone, that get the NoExecute taint while the zone
    is healthy (and while it is fully down but another zone is not)."""
    secondary_eviction_rate: float = 0.01
    """--secondary-node-eviction-rate: the same while the zone is partly down, for a zone larger
    than `large_cluster_threshold` (0 for one this size or smaller)."""
    unhealthy_zone_threshold: float = 0.55
    """--unhealthy-zone-threshold: the fraction of a zone's Nodes not Ready (and at least 3) that
    makes it partly down."""
    large_cluster_threshold: int = 50
    """--large-cluster-size-threshold."""
    terminated_pod_gc_threshold: int = 12500
    """--terminated-pod-gc-threshold: terminated pods kept before pod GC deletes the oldest (0: never)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Ports:
    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int

    @classmethod
    def pick(cls, apiserver: int | None = None) -> Ports:
        return cls(free_port(), free_port(), apiserver or free_port(), free_port(), free_port())


def go_duration(seconds: float) -> str:
    """`seconds` as a Go duration flag takes it: 50.0 -> "50s", 0.5 -> "0.5s"."""
    return format(seconds, "f").rstrip("0").rstrip(".") + "s"


def lifecycle_flags(settings: Settings) -> dict[str, list[str]]:
    """The node lifecycle's settings as the components' flags (pure): the node-lifecycle
    controller's and pod GC's for kube-controller-manager, DefaultTolerationSeconds' for the API
    server. Pod GC's 40 s quarantine of a gone Node is upstream's constant, not a flag."""
    return {
        "kube-apiserver": [
            f"--default-not-ready-toleration-seconds={settings.not_ready_toleration}",
            f"--default-unreachable-toleration-seconds={settings.unreachable_toleration}",
        ],
        "kube-controller-manager": [
            f"--node-monitor-grace-period={go_duration(settings.node_monitor_grace)}",
            f"--node-startup-grace-period={go_duration(settings.node_startup_grace)}",
            f"--node-eviction-rate={settings.eviction_rate:g}",
            f"--secondary-node-eviction-rate={settings.secondary_eviction_rate:g}",
            f"--unhealthy-zone-threshold={settings.unhealthy_zone_threshold:g}",
            f"--large-cluster-size-threshold={settings.large_cluster_threshold}",
            f"--terminated-pod-gc-threshold={settings.terminated_pod_gc_threshold}",
        ],
    }


def commands(
    binaries: Path,
    folder: Path,
    ports: Ports,
    address: str = "127.0.0.1",
    settings: Settings | None = None,
    api_server_flags: tuple[str, ...] = (),
) -> dict[str, list[str]]:
    """Each component's command line, in start order (pure), the API server on `address`, the node
    lifecycle as `settings` say (`lifecycle_flags`; Kubernetes' defaults when None), and
    `api_server_flags` last on the API server's (an alpha API's feature gate and runtime-config).
    Credentials are read from `folder` as make_credentials() leaves them."""
    pki_dir = folder / "pki"
    lifecycle = lifecycle_flags(settings or Settings())

    def p(name: str) -> str:
        return str(pki_dir / name)

    etcd_url = f"http://127.0.0.1:{ports.etcd}"
    peer_url = f"http://127.0.0.1:{ports.etcd_peer}"
    return {
        "etcd": [
            str(binaries / "etcd"),
            "--name=sunk-local",
            f"--data-dir={folder / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=sunk-local={peer_url}",
            # A local cluster's state is thrown away with it: fsync buys nothing and costs
            # seconds per write on a loaded shared disk.
            "--unsafe-no-fsync",
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(binaries / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            f"--bind-address={address}",
            f"--advertise-address={address}",
            f"--secure-port={ports.apiserver}",
            f"--tls-cert-file={p('server.crt')}",
            f"--tls-private-key-file={p('server.key')}",
            f"--client-ca-file={p('ca.crt')}",
            f"--service-account-key-file={p('sa.pub')}",
            f"--service-account-signing-key-file={p('sa.key')}",
            f"--service-account-issuer={ISSUER}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            # On top of the default set (NamespaceLifecycle, LimitRanger, ServiceAccount,
            # PodSecurity, the webhooks, ...): a Node's credentials may touch only its own Node and pods.
            "--enable-admission-plugins=NodeRestriction",
            "--allow-privileged=true",
            f"--kubelet-client-certificate={p('apiserver-kubelet-client.crt')}",
            f"--kubelet-client-key={p('apiserver-kubelet-client.key')}",
            "--kubelet-preferred-address-types=InternalIP",
            # Webhooks (and aggregated APIs) dialled at a ready endpoint's pod address on the bridge,
            # not the Service's ClusterIP: this host routes no ClusterIP, so a call would leave the
            # machine by its default route (no kube-proxy here: our node agents translate only the
            # `kubernetes` Service's address, for pods).
            "--enable-aggregator-routing=true",
            "--profiling=false",
            *lifecycle["kube-apiserver"],
            *api_server_flags,
        ],
        "kube-controller-manager": [
            str(binaries / "kube-controller-manager"),
            *_client_flags(folder, "controller-manager.conf"),
            f"--secure-port={ports.controller_manager}",
            f"--service-account-private-key-file={p('sa.key')}",
            f"--root-ca-file={p('ca.crt')}",
            f"--cluster-signing-cert-file={p('ca.crt')}",
            f"--cluster-signing-key-file={p('ca.key')}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            # Each controller acts as its own ServiceAccount, with the bootstrap roles' rights only.
            "--use-service-account-credentials=true",
            "--controllers=*",
            *lifecycle["kube-controller-manager"],
        ],
        "kube-scheduler": [
            str(binaries / "kube-scheduler"),
            *_client_flags(folder, "scheduler.conf"),
            f"--secure-port={ports.scheduler}",
        ],
    }


def _client_flags(folder: Path, kubeconfig: str) -> list[str]:
    path = folder / kubeconfig
    return [
        f"--kubeconfig={path}",
        f"--authentication-kubeconfig={path}",
        f"--authorization-kubeconfig={path}",
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
        "--profiling=false",
    ]


CLIENTS = {
    # file stem: (user, groups): the bootstrap RBAC's subjects (kubeadm's names).
    "admin": ("sunk-local-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    "apiserver-kubelet-client": ("kube-apiserver-kubelet-client", ("system:masters",)),
}


def make_credentials(folder: Path, server: str, address: str = "127.0.0.1") -> Path:
    """The CA, certificates, SA key pair and the components' kubeconfigs; the admin kubeconfig's path."""
    pki_dir = folder / "pki"
    ca, _, _ = pki.make_certificates(
        pki_dir,
        list(dict.fromkeys(["127.0.0.1", address, KUBERNETES_SERVICE_IP])),
        [
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ],
    )
    pki.signing_key_pair(pki_dir)
    for stem, (user, groups) in CLIENTS.items():
        cert, key = pki.client_certificate(pki_dir, stem, user, groups)
        if stem != "apiserver-kubelet-client":
            conf = folder / f"{stem}.conf"
            conf.write_text(pki.client_kubeconfig(server, ca, cert, key))
            conf.chmod(0o600)
    return folder / "admin.conf"


def node_credentials(folder: Path, node: str) -> tuple[Path, Path]:
    """A client certificate of the cluster's CA for Node `node`'s kubelet (see ControlPlane)."""
    return pki.client_certificate(folder / "pki", f"node-{node}", f"system:node:{node}", ("system:nodes",))


@dataclass
class ControlPlane:
    folder: Path
    binaries: Path | None = None
    ports: Ports = field(default_factory=Ports.pick)
    address: str = "127.0.0.1"
    """Where the API server listens and what it advertises."""
    settings: Settings = field(default_factory=Settings)
    """The node lifecycle's knobs (`sunk local up`'s flags), passed to the components."""
    api_server_flags: tuple[str, ...] = ()
    """Added to the API server's command line (`commands`); none by default."""
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _logs: list[IO[bytes]] = field(default_factory=list)

    @classmethod
    def for_pods(cls, folder: Path, address: str, settings: Settings | None = None) -> ControlPlane:
        """The API server on `address` (a bridge address of this host) at 443, where pods reach it."""
        return cls(folder, ports=Ports.pick(apiserver=POD_API_PORT), address=address, settings=settings or Settings())

    @property
    def server(self) -> str:
        return f"https://{self.address}:{self.ports.apiserver}"

    @property
    def kubeconfig(self) -> Path:
        return self.folder / "admin.conf"

    def node_credentials(self, node: str) -> tuple[Path, Path]:
        """(certificate, key) a Node's kubelet presents: user `system:node:NODE` in `system:nodes`,
        which the Node authorizer and NodeRestriction hold to that Node's own objects and pods."""
        return node_credentials(self.folder, node)

    def start(self, timeout: float = READY_TIMEOUT) -> ControlPlane:
        binaries = self.binaries or kubebuild.locate()
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        make_credentials(self.folder, self.server, self.address)
        deadline = time.monotonic() + timeout
        try:
            for name, argv in commands(
                binaries, self.folder, self.ports, self.address, self.settings, self.api_server_flags
            ).items():
                log = (self.folder / f"{name}.log").open("ab")
                self._logs.append(log)
                self.processes[name] = subprocess.Popen(
                    argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
                if name == "kube-apiserver":
                    self._wait(name, f"{self.server}/readyz", deadline)
            self._wait(
                "kube-controller-manager", f"https://127.0.0.1:{self.ports.controller_manager}/healthz", deadline
            )
            self._wait("kube-scheduler", f"https://127.0.0.1:{self.ports.scheduler}/healthz", deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait(self, name: str, url: str, deadline: float) -> None:
        ca = self.folder / "pki" / "ca.crt"
        context = ssl.create_default_context(cafile=str(ca))
        if name != "kube-apiserver":
            # The controllers serve /healthz with a self-signed certificate made at start.
            context = ssl._create_unverified_context()
        context.load_cert_chain(self.folder / "pki" / "admin.crt", self.folder / "pki" / "admin.key")
        last = ""
        while time.monotonic() < deadline:
            for other, proc in self.processes.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{other} exited with {proc.returncode}: see {self.folder / (other + '.log')}")
            try:
                with urllib.request.urlopen(url, context=context, timeout=5) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError) as err:
                last = str(err)
            time.sleep(0.5)
        raise TimeoutError(f"{name} not healthy at {url} in time ({last}): see {self.folder / (name + '.log')}")

    def stop(self) -> None:
        for name in reversed(list(self.processes)):
            proc = self.processes.pop(name)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(API_SERVER_STOP_GRACE if name == "kube-apiserver" else STOP_GRACE)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for log in self._logs:
            with contextlib.suppress(OSError):
                log.close()
        self._logs.clear()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()
