"""LocalSlurm: a stack's rendered Slurm files booted on real daemons on this host.

Each daemon runs from its own role's image, as in the cluster: slurmctld from the slurmctld image,
MariaDB (through the image's entrypoint) from mariadb, slurmdbd (through the manifest's start
script) from slurmdbd, one slurmd per simulated node from slurmd, slurmrestd (JWT) from
slurmrestd, and the Slurm clients from login; with auth/munge, a munged in each Slurm root. The
images are built (and cached by input hash) by runtime/images/build.py and unpacked once; each
instance mounts them under private overlays (jail.py). All roots share one /etc/slurm (the
ConfigMaps: the files `sunk.render.render_slurm_files` produced with only the off-cluster overrides
of overrides.py) and one /tmp (standing in for a shared home: job output is visible everywhere).
"""

from __future__ import annotations

import atexit
import logging
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Self

from sunk import naming
from sunk.images import SUPPORTED_SLURM
from sunk.manifests import scripts
from sunk.render import (
    ACCOUNTING_SETUP,
    TopologyNode,
    gres_conf_key,
    render_gres_conf,
    render_slurm_files,
    render_topology_conf,
    render_topology_yaml,
)
from sunk.render.gres import node_gres
from sunk.spec.cluster import ClusterSpec

from ..images.build import Builder
from . import daemons
from .identity import SSSD_ROLES, DirectorySecrets, start_sssd
from .jail import Jail, lookup_ids
from .layout import (
    SLURM_ROLES,
    SimNode,
    default_nodes,
    make_devices,
    prepare_etc,
    prepare_role,
    short_hostname,
    write_node_conf,
    write_slurm_files,
)
from .overrides import LocalPorts, backup_address, controller_hosts, directive, gres_device_files, local_files
from .ports import free_ports, wait_until

log = logging.getLogger(__name__)

RELEASE_ENV = "SUNK_HARNESS_SLURM_VERSION"
"""A Slurm release (sunk.images.SUPPORTED_SLURM) every cluster the harness starts runs, unless its
spec names one: how the real-Slurm tests run on a release other than the default."""


def with_release(spec: ClusterSpec) -> ClusterSpec:
    """`spec` on the release RELEASE_ENV names, where it names one and the spec sets none."""
    release = os.environ.get(RELEASE_ENV, "")
    if not release or "slurm" in spec.model_fields_set or release == spec.slurm.version:
        return spec
    if release not in SUPPORTED_SLURM:
        raise ValueError(f"{RELEASE_ENV}={release!r}: not a Slurm release sunk supports ({', '.join(SUPPORTED_SLURM)})")
    data = spec.model_dump(by_alias=True, exclude_unset=True)  # python mode: SecretStr stays secret
    return ClusterSpec.model_validate({**data, "slurm": {"version": release}})


TERMINAL = {
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "TIMEOUT",
}


VOLUME_ROLES = {"login": "login", "compute": "slurmd", "controller": "slurmctld"}
"""The root standing in for each pod kind a shared volume mounts on."""


class SlurmCommandError(subprocess.CalledProcessError):
    def __str__(self) -> str:
        return f"{super().__str__()}\nstdout: {self.stdout}\nstderr: {self.stderr}"


def _topology_text(spec: ClusterSpec, rendered: Mapping[str, str]) -> str:
    """The spec's topology file (topology.conf or topology.yaml) as rendered, or "" without one."""
    return rendered[spec.topology_file] if spec.topology_file is not None else ""


class LocalSlurm:
    """One booted cluster. Use `with LocalSlurm.start(spec) as slurm:`; `stop()` is idempotent."""

    def __init__(
        self,
        spec: ClusterSpec,
        nodes: Iterable[SimNode],
        *,
        accounting: bool,
        restapi: bool,
        jail: Jail,
        directory: DirectorySecrets | None = None,
    ) -> None:
        self.spec = spec
        self.directory = directory
        self.accounting = accounting and spec.accounting.enabled
        self.restapi = restapi
        self.host = short_hostname()
        self.jail = jail
        self._nodes: dict[str, SimNode] = {}
        self._wanted = list(nodes)
        ports = free_ports(5)
        self.ports = LocalPorts(*ports)
        self._taken = set(ports)
        self.node_ports: dict[str, int] = {}
        self.files: dict[str, str] = {}
        self._deploy_topology = ""
        self.timings: dict[str, float] = {}
        self._stopped = False
        self._db_password = ""

    # -- lifecycle -------------------------------------------------------------------------
    @classmethod
    def start(
        cls,
        spec: ClusterSpec,
        nodes: Iterable[SimNode] | None = None,
        *,
        accounting: bool = True,
        restapi: bool = True,
        workdir: Path | None = None,
        directory: DirectorySecrets | None = None,
    ) -> Self:
        """Boot the cluster; on any failure (or Ctrl-C) everything started is torn down.
        Overlay uppers, logs and shared folders go into a new folder under `workdir` (default: the temp dir).
        `directory`: with the spec's auth.ldap, what its Secrets hold; an sssd then runs in every
        Slurm root (as the sidecar in every Slurm pod), started before the daemons."""
        if directory is not None and spec.auth.ldap is None:
            raise ValueError("directory secrets given, but the spec has no auth.ldap")
        spec = with_release(spec)
        started = time.monotonic()
        wanted_roles = roles_for(spec, accounting=accounting, restapi=restapi)
        builder = Builder(release=spec.slurm.version)
        lowers = {role: builder.rootfs(role) for role in wanted_roles}
        built = time.monotonic()
        workdir = Path(tempfile.mkdtemp(prefix="sunk-slurm-", dir=workdir))
        jail = Jail(workdir, lowers)
        try:
            wanted = default_nodes(spec) if nodes is None else list(nodes)
            self = cls(spec, wanted, accounting=accounting, restapi=restapi, jail=jail, directory=directory)
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        if built - started > 1:
            self.timings["build"] = built - started  # images built or unpacked (first run, or new inputs)
        atexit.register(self.stop)
        try:
            jail.open()
            self.timings["mount"] = time.monotonic() - built
            self._boot()
        except BaseException:
            self.stop()
            raise
        self.timings["total"] = time.monotonic() - started
        log.debug("LocalSlurm %s up in %.1f s (%s)", spec.name, self.timings["total"], self._timing_text())
        return self

    def _exists(self, path: str) -> bool:
        """Whether the slurmd image has `path` (a SPANK plugin plugstack.conf names, say)."""
        return (self.jail.root("slurmd") / path.lstrip("/")).exists()

    # -- roots -----------------------------------------------------------------------------
    @property
    def roles(self) -> list[str]:
        return list(self.jail.lowers)

    def role_root(self, role: str) -> Path:
        """A role's root filesystem as this process reads and writes it."""
        return self.jail.root(role)

    @property
    def root(self) -> Path:
        """The login root: where users (and the tests) see /tmp, /etc/slurm and the clients."""
        return self.jail.root("login")

    @property
    def etc(self) -> Path:
        """The shared /etc/slurm (a host folder bound into every Slurm root)."""
        return self.jail.workdir / "shared" / "etc-slurm"

    @property
    def log_dir(self) -> Path:
        return self.jail.log_dir

    def add_hosts_line(self, line: str) -> None:
        """Append a line to /etc/hosts in every root (name resolution is per image)."""
        for role in self.roles:
            with (self.role_root(role) / "etc/hosts").open("a") as hosts:
                hosts.write(line.rstrip("\n") + "\n")

    def _timing_text(self) -> str:
        return ", ".join(f"{k} {v:.1f} s" for k, v in self.timings.items())

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _boot(self) -> None:
        spec = self.spec
        mark = time.monotonic()
        for node in self._wanted:
            self._check_new(node)
        # Deploy-time rendering: topology.conf names no node yet. Once slurmd have registered it is
        # re-rendered from them for slurmctld (as the operator does from live Nodes): on 24.11 a
        # block topology naming nodes that do not exist yet is fatal to slurmctld and slurmd.
        rendered = render_slurm_files(spec, [])
        self._deploy_topology = _topology_text(spec, rendered)
        for ns in spec.nodesets:
            if ns.power is not None:  # CLOUD nodes: slurm.conf names each, with its port here
                for ordinal in range(ns.max_nodes):
                    self._node_port(naming.slurm_node_name(ns.name, ordinal))
        self.files = local_files(
            rendered,
            host=self.host,
            ports=self.ports,
            accounting=self.accounting,
            exists=self._exists,
            node_ports=self.node_ports,
        )
        self._prepare()
        if self.directory is not None:
            for role in SSSD_ROLES:
                if role in self.roles:
                    start_sssd(self.jail, role, spec, self.directory)
        for role in SLURM_ROLES:
            if role in self.roles and spec.auth.type == "munge":
                daemons.start_munged(self.jail, role)
        if self.accounting:
            self._db_password = secrets.token_hex(24)
            daemons.start_mariadb(self.jail, spec, self.ports.mariadb, self.files["slurmdbd.conf"], self._db_password)
            daemons.start_slurmdbd(self.jail, self.ports.slurmdbd, self._db_password)
        self.timings["base"] = time.monotonic() - mark
        if spec.auth.type == "slurm":
            daemons.start_sackd(self.jail)  # a native sidecar: up before the login pod's clients
        qos = scripts.partition_qos(spec)
        if self.accounting and qos:
            # slurmctld waits for the QOS its partitions name (the controller's wait-qos init
            # container and its command), which the setup creates before anything that needs
            # slurmctld registered.
            daemons.create_qos(self.jail, qos)
        self._start_controllers()
        if self.accounting and ACCOUNTING_SETUP in self.files:
            daemons.setup_accounting(self.jail, spec.name, f"{naming.SLURM_ETC}/{ACCOUNTING_SETUP}")
        for node in self._wanted:
            self._spawn_slurmd(node)
        daemons.wait_nodes_idle(self.jail, list(self._nodes))
        if spec.topology_file is not None:
            self._render_topology()
            # Dynamic nodes join topology.conf's switches only on reconfigure (measured 2026-11 on 24.11).
            self.reconfigure()
        if self.restapi:
            self.start_slurmrestd()
        self.timings["daemons"] = time.monotonic() - mark

    def _prepare(self) -> None:
        """The shared folders bound into every Slurm root, and each root's own keys and folders."""
        shared = self.jail.workdir / "shared"
        (shared / "tmp").mkdir(parents=True, exist_ok=True)
        (shared / "tmp").chmod(0o1777)
        self.etc.mkdir(parents=True, exist_ok=True)
        slurm = lookup_ids(self.jail.root("slurmctld"), "slurm")
        prepare_etc(self.etc, self.files, slurm=slurm, auth=self.spec.auth.type)
        devices = [d for rel, text in self.files.items() if rel.startswith("gres") for d in gres_device_files(text)]
        munge_key = secrets.token_bytes(1024) if self.spec.auth.type == "munge" else None
        for role in self.roles:
            if role in SLURM_ROLES:
                self.jail.bind(role, self.etc, naming.SLURM_ETC)
                self.jail.bind(role, shared / "tmp", "/tmp")
            if role == "slurmd":
                # No cgroup hierarchy in the jail (cgroup plugins are off, overrides.py), but crun
                # (srun --container) refuses to start unless /sys/fs/cgroup is a cgroup or tmpfs mount.
                self.jail.mount_tmpfs(role, "/sys/fs/cgroup")
            for volume in self.spec.shared_volumes:
                # A shared volume (a ReadWriteMany claim): one host folder in every root it mounts on.
                if role in (VOLUME_ROLES[on] for on in volume.mount_on):
                    folder = shared / "volumes" / volume.name
                    folder.mkdir(parents=True, exist_ok=True)
                    self.jail.bind(role, folder, volume.mount_path, read_only=volume.read_only)
            root = self.jail.root(role)
            prepare_role(root, role, host=self.host, munge_key=munge_key, devices=devices if role == "slurmd" else ())
        for index, name in enumerate(self.controller_hosts[1:], start=1):
            self.add_hosts_line(f"{backup_address(index)} {name}")  # a backup's pod name resolves

    def stop(self) -> None:
        """Cancel jobs, stop daemons by PID, reap, end the namespace (every mount with it) and
        delete the work folder."""
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        try:
            if "slurmctld" in self.jail.processes:
                self.jail.run(["sh", "-c", "squeue -h -o %i | xargs -r scancel"], timeout=10)
        except (OSError, subprocess.SubprocessError):
            pass  # teardown goes on regardless
        finally:
            try:
                self.jail.close()
            finally:
                self.jail.remove()  # refuses (raises) while anything is still mounted under it

    # -- clients ---------------------------------------------------------------------------
    def run(
        self, *argv: str, check: bool = False, input: str | None = None, timeout: float = 60, role: str = "login"
    ) -> subprocess.CompletedProcess[str]:
        """A command (any Slurm client) in a role's root (the login image by default), as root,
        with a clean environment."""
        done = self.jail.run(argv, role=role, input=input, timeout=timeout)
        if check and done.returncode != 0:
            raise SlurmCommandError(done.returncode, list(argv), done.stdout, done.stderr)
        return done

    def sbatch(self, script: str, *args: str) -> int:
        """Submit `script` (starting with #!) with sbatch; returns the job id."""
        out = self.run("sbatch", "--parsable", *args, input=script, check=True).stdout
        return int(out.strip().split(";")[0])

    def job_state(self, job_id: int) -> str:
        done = self.run("scontrol", "show", "job", "-o", str(job_id))
        for word in done.stdout.split():
            if word.startswith("JobState="):
                return word.removeprefix("JobState=")
        # Gone from slurmctld's memory: ask accounting.
        acct = self.run("sacct", "-X", "-n", "-P", "-o", "State", "-j", str(job_id))
        lines = acct.stdout.split()
        return lines[0] if lines else "UNKNOWN"

    def cancel_all(self, timeout: float = 120) -> None:
        """Cancel every job and wait until no job is left and the running nodes are idle."""
        self.run("sh", "-c", "squeue -h -o %i | xargs -r scancel", check=True)

        def drained() -> bool:
            return not self.run("squeue", "-h", "-o", "%i").stdout.strip()

        wait_until("jobs to end after scancel", drained, timeout=timeout, interval=0.2)
        daemons.wait_nodes_idle(self.jail, [n.name for n in self.nodes], timeout=timeout)

    def wait_job(self, job_id: int, states: Iterable[str] = ("COMPLETED",), timeout: float = 120) -> str:
        """Poll until the job reaches one of `states`; fail early if it ends in another."""
        wanted = set(states)
        deadline = time.monotonic() + timeout
        while True:
            state = self.job_state(job_id)
            if state in wanted:
                return state
            if state in TERMINAL or time.monotonic() > deadline:
                detail = self.run("scontrol", "show", "job", str(job_id)).stdout
                raise RuntimeError(f"job {job_id} is {state}, wanted {sorted(wanted)}\n{detail}")
            time.sleep(0.2)

    def wait_accounted(self, job_id: int, states: Iterable[str] = ("COMPLETED",), timeout: float = 120) -> str:
        """Poll sacct until the job's record reaches one of `states` (slurmctld sends job records to
        slurmdbd asynchronously, so sacct may lag scontrol)."""
        wanted = set(states)
        deadline = time.monotonic() + timeout
        while True:
            out = self.run("sacct", "-X", "-n", "-P", "-o", "State", "-j", str(job_id)).stdout.split()
            state = out[0] if out else "MISSING"
            if state in wanted:
                return state
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {job_id}: sacct says {state}, wanted {sorted(wanted)}")
            time.sleep(0.2)

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.slurmrestd}"

    @property
    def jwt_key_path(self) -> Path:
        """The JWT key as the host sees it (in the shared /etc/slurm)."""
        return self.etc / naming.JWT_KEY_PATH.removeprefix(naming.SLURM_ETC).lstrip("/")

    def token(self, user: str = "slurm", lifespan: int = 3600) -> str:
        out = self.run("scontrol", "token", f"username={user}", f"lifespan={lifespan}", check=True).stdout
        return out.strip().partition("=")[2]

    def log(self, daemon: str, lines: int = 50) -> str:
        """The last lines of a daemon's output (slurmctld, slurmd-<node>, slurmdbd, ...)."""
        return self.jail.log_tail(daemon, lines)

    # -- daemons ---------------------------------------------------------------------------
    @property
    def nodes(self) -> list[SimNode]:
        """Simulated nodes whose slurmd runs."""
        return [n for n in self._nodes.values() if f"slurmd-{n.name}" in self.jail.processes]

    def start_slurmrestd(self) -> None:
        daemons.start_slurmrestd(self.jail, self.ports.slurmrestd, accounting=self.accounting)

    def stop_slurmrestd(self) -> None:
        self.jail.stop("slurmrestd")

    def restart_slurmdbd(self, *args: str, conf: str | None = None) -> None:
        """Stop slurmdbd and start it again with `args` (`-vvv`: it logs every setting it read);
        `conf`: the slurmdbd.conf it then reads instead (bytes the spec never rendered, to see
        what the real parser makes of them)."""
        self.jail.stop("slurmdbd", timeout=30)
        if conf is not None:
            (self.etc / "slurmdbd.conf").write_bytes(conf.encode())
        daemons.start_slurmdbd(self.jail, self.ports.slurmdbd, self._db_password, args)

    def restart_slurmctld(self) -> None:
        """Stop slurmctld (it saves its state) and start it again from StateSaveLocation."""
        self.jail.stop("slurmctld", timeout=30)
        daemons.start_slurmctld(self.jail, self.ports.slurmctld)

    def _start_controllers(self) -> None:
        """The primary slurmctld, then each backup (controller.replicas 2-3)."""
        daemons.start_slurmctld(self.jail, self.ports.slurmctld)
        for index in range(1, len(self.controller_hosts)):
            self.start_backup(index)

    @property
    def controller_hosts(self) -> list[str]:
        """`hostname -s` of each slurmctld, primary first (this host, then the backups' pod names)."""
        return controller_hosts(self.files["slurm.conf"])

    @staticmethod
    def controller_process(index: int) -> str:
        """The daemon name of slurmctld `index` (0: the primary, "slurmctld" as without backups)."""
        return "slurmctld" if index == 0 else f"slurmctld-{index}"

    def start_backup(self, index: int) -> None:
        """Start backup slurmctld `index` (1 or 2) under its pod's hostname on its own address."""
        daemons.start_backup_slurmctld(
            self.jail,
            self.controller_process(index),
            self.ports.slurmctld,
            hostname=self.controller_hosts[index],
            address=backup_address(index),
        )

    def kill_slurmctld(self, index: int = 0) -> None:
        """SIGKILL slurmctld `index`: it saves nothing and tells no peer, as when its Node loses power."""
        self.jail.kill(self.controller_process(index))

    def reconfigure(self) -> None:
        self.run("scontrol", "reconfigure", check=True)
        daemons.wait_ctld(self.jail)
        daemons.wait_nodes_idle(self.jail, [n.name for n in self.nodes], allow_busy=True)

    def start_slurmd(self, node: SimNode, *, wait: bool = True) -> None:
        """Add a simulated node at runtime. With topology on, slurmctld's topology.conf is then
        re-rendered with it (as the operator does from live Nodes); call reconfigure() to bind it
        into the switches. `wait=False`: return once slurmd runs, whatever state the node gets."""
        self._check_new(node)
        known = daemons.node_states(self.jail)
        bound = int(directive(self.files["slurm.conf"], "MaxNodeCount") or 0)
        if node.name not in known and bound and len(known) >= bound:
            raise ValueError(
                f"MaxNodeCount={bound} (the spec's NodeSet sizes) is reached: {sorted(known)}; "
                "delete a node (scontrol delete) or boot a spec with more replicas"
            )
        self._spawn_slurmd(node)
        # A CLOUD node powered up for a job stays POWERING_UP (and NOT_RESPONDING) until every
        # node of that job has registered (measured 2026-11 on 24.11): waiting here for one would stall.
        if wait and self.spec.nodeset(node.nodeset).power is None:
            daemons.wait_nodes_idle(self.jail, [node.name], allow_busy=True)
        if self.spec.topology_file is not None:
            self._render_topology()

    def _render_topology(self) -> None:
        """slurmctld's topology.conf (or topology.yaml, with named topologies) from every node
        started so far (read on reconfigure)."""
        nodes = [TopologyNode(n.name, n.labels) for n in self._nodes.values()]
        if self.spec.topologies:
            name, topo = (
                "topology.yaml",
                render_topology_yaml(self.spec.topologies, nodes, release=self.spec.slurm.version),
            )
        else:
            name, topo = "topology.conf", render_topology_conf(self.spec, nodes)
        self.files[name] = topo
        write_slurm_files(self.etc, {name: topo})

    def stop_slurmd(self, name: str) -> None:
        """Stop one node's slurmd (like its pod dying); the Slurm node record stays."""
        self.jail.stop(f"slurmd-{name}")

    def _check_new(self, node: SimNode) -> None:
        if f"slurmd-{node.name}" in self.jail.processes:
            raise ValueError(f"slurmd {node.name} already runs")
        self.spec.nodeset(node.nodeset)  # raises for an unknown NodeSet

    def _node_port(self, name: str) -> int:
        if name not in self.node_ports:
            port = free_ports(1, self._taken)[0]
            self._taken.add(port)
            self.node_ports[name] = port
        return self.node_ports[name]

    def _spawn_slurmd(self, node: SimNode, role: str = "slurmd") -> None:
        self._node_port(node.name)
        self._nodes[node.name] = node
        # What the slurmd pod mounts: its NodeSet's gres.conf and the deploy-time topology.conf.
        topology = self.spec.topology_file
        files = {**self.files, topology: self._deploy_topology} if topology and self._deploy_topology else self.files
        ns = self.spec.nodeset(node.nodeset)
        gres = None
        if ns.gpus is not None and ns.gpus.from_node_labels:
            # As the operator builds the pod on this Node: GRES from its GPU feature discovery
            # labels, in the slurmd --conf line and the pod's own gres.conf.
            gres = node_gres(ns.gpus, node.labels)
            own = render_gres_conf(self.spec, ns, gres)
            files = {**files, gres_conf_key(ns.name): own}
            make_devices(self.jail.root(role), gres_device_files(own))
        conf = write_node_conf(self.jail.root(role), self.etc, node, files)
        daemons.start_slurmd(
            self.jail,
            ns,
            node.name,
            conf,
            self.node_ports[node.name],
            sack=self.spec.auth.type == "slurm",
            gres=gres,
            role=role,
        )


def roles_for(spec: ClusterSpec, *, accounting: bool = True, restapi: bool = True) -> list[str]:
    """The images a harness instance boots: slurmctld, slurmd and login (the clients) always;
    mariadb and slurmdbd with accounting; slurmrestd with the REST API."""
    roles = ["slurmctld", "slurmd", "login"]
    if accounting and spec.accounting.enabled:
        roles += ["mariadb", "slurmdbd"]
    if restapi:
        roles.append("slurmrestd")
    return roles
