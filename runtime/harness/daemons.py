"""Starting each daemon from its own role's image root and waiting until it serves. Secrets go
through files only, never through command lines (visible in `ps`) or logs."""

from __future__ import annotations

import secrets
from pathlib import Path

from sunk import naming
from sunk.images import MARIADB_ENTRYPOINT, NOBODY_UID, S6_INIT, SLURM_UID
from sunk.manifests import scripts
from sunk.manifests.accounting import mariadb_manifests
from sunk.manifests.meta import Manifest
from sunk.render import node_conf
from sunk.render.gres import Gres
from sunk.spec.cluster import ClusterSpec
from sunk.spec.nodeset import NodeSetSpec

from .jail import Jail, lookup_ids
from .layout import write_file
from .overrides import LOOPBACK, directive
from .ports import listening, wait_until

START_TIMEOUT = 120.0
"""A ceiling, not a wait: each daemon is up in a few seconds, but on a loaded 2-core machine (CI,
several test sessions at once) far later, and a start that merely took long is not a failure."""


def _fail(jail: Jail, name: str) -> str:
    return f"--- {name} log ---\n{jail.log_tail(name)}"


def start_munged(jail: Jail, role: str) -> None:
    """munged in one role's root, as the munge sidecar of that role's pod runs it (same image)."""
    name = f"munged-{role}"
    proc = jail.spawn(name, ["munged", "-F"], role=role, user="munge:munge")
    socket = jail.root(role) / naming.MUNGE_SOCKET.lstrip("/")
    wait_until(name, socket.exists, timeout=START_TIMEOUT, alive=proc, on_fail=lambda: _fail(jail, name))


def start_sackd(jail: Jail) -> None:
    """auth/slurm: the login pod's sackd sidecar. Slurm clients never read slurm.key; they ask a
    sack socket for credentials (measured 2026-11 on 24.11: scontrol with a readable slurm.key still fails
    with "failed to connect to any sack sockets" where no daemon serves one)."""
    proc = jail.spawn("sackd", ["sackd", "-D"], role="login")
    socket = jail.root("login") / "run/slurm/sack.socket"
    wait_until("sackd", socket.exists, timeout=START_TIMEOUT, alive=proc, on_fail=lambda: _fail(jail, "sackd"))


def _container(manifests: list[Manifest], kind: str, name: str) -> Manifest:
    for manifest in manifests:
        if manifest["kind"] == kind:
            for container in manifest["spec"]["template"]["spec"]["containers"]:
                if container["name"] == name:
                    return dict(container)
    raise KeyError(f"no {kind} container {name}")


def mariadb_env(spec: ClusterSpec) -> dict[str, str]:
    """The MariaDB container's environment as its StatefulSet sets it (where its Secret's files are)."""
    return {e["name"]: e["value"] for e in _container(mariadb_manifests(spec), "StatefulSet", "mariadb")["env"]}


def start_mariadb(jail: Jail, spec: ClusterSpec, port: int, slurmdbd_conf: str, password: str) -> None:
    """MariaDB from the mariadb image, started as its StatefulSet starts it: the image's entrypoint,
    the manifest's arguments, environment and user, with the password files where the manifest
    mounts its Secret. Off-cluster it listens on loopback on a free port. The entrypoint creates
    slurmdbd's database and user on this first start; the database and user are slurmdbd.conf's
    (an external database's names too: the harness stands in for it)."""
    container = _container(mariadb_manifests(spec), "StatefulSet", "mariadb")
    env = mariadb_env(spec)
    env["MARIADB_DATABASE"] = directive(slurmdbd_conf, "StorageLoc") or env["MARIADB_DATABASE"]
    env["MARIADB_USER"] = directive(slurmdbd_conf, "StorageUser") or env["MARIADB_USER"]
    root = jail.root("mariadb")
    mysql = lookup_ids(root, "mysql")
    for variable, value in (("MARIADB_PASSWORD_FILE", password), ("MARIADB_ROOT_PASSWORD_FILE", secrets.token_hex(24))):
        write_file(root / env[variable].lstrip("/"), value, 0o400, mysql)
    uid = container["securityContext"]["runAsUser"]
    argv = [*container["args"], f"--port={port}", f"--bind-address={LOOPBACK}"]
    proc = jail.spawn("mariadb", [MARIADB_ENTRYPOINT, *argv], role="mariadb", env=env, user=f"{uid}:{uid}")
    wait_until(
        "mariadb", lambda: listening(port), timeout=START_TIMEOUT, alive=proc, on_fail=lambda: _fail(jail, "mariadb")
    )


def start_slurmdbd(
    jail: Jail,
    port: int,
    password: str,
    args: tuple[str, ...] = (),
    *,
    timeout: float = START_TIMEOUT,
    script: str | None = None,
) -> None:
    """slurmdbd from the slurmdbd image, by the manifest's own start script (it adds the password
    from the mounted Secret to a private copy of slurmdbd.conf), as the slurm user; `args` go to
    slurmdbd after `-D` (`-vvv` logs every setting it read, at debug2). `script`: the start
    script as an upgrade's pod has it (marking the conversion's outcome for the database guard)."""
    root = jail.root("slurmdbd")
    write_file(root / scripts.DB_PASSWORD_FILE.lstrip("/"), password, 0o400, lookup_ids(root, "slurm"))
    argv = ["/bin/sh", "-c", script or scripts.slurmdbd_start(), "slurmdbd", *args]
    proc = jail.spawn("slurmdbd", argv, role="slurmdbd", user=f"{SLURM_UID}:{SLURM_UID}")
    wait_until(
        "slurmdbd", lambda: listening(port), timeout=timeout, alive=proc, on_fail=lambda: _fail(jail, "slurmdbd")
    )


def start_slurmctld(jail: Jail, port: int) -> None:
    proc = jail.spawn("slurmctld", ["slurmctld", "-D"], role="slurmctld")
    wait_until(
        "slurmctld",
        lambda: listening(port),
        timeout=START_TIMEOUT,
        alive=proc,
        on_fail=lambda: _fail(jail, "slurmctld"),
    )
    wait_ctld(jail)


def start_backup_slurmctld(jail: Jail, name: str, port: int, *, hostname: str, address: str) -> None:
    """A backup slurmctld (a SlurmctldHost line after the first) from the same image and state
    folder as the primary, under `hostname` (its pod's name), listening on `address`; up once
    `scontrol ping` reports it UP."""
    # Its own /run/slurmctld, as its pod's emptyDir: a shared pid file would make it kill the primary.
    private = {"/run/slurmctld": SLURM_UID}
    proc = jail.spawn(name, ["slurmctld", "-D"], role="slurmctld", hostname=hostname, private=private)
    wait_until(
        name, lambda: listening(port, address), timeout=START_TIMEOUT, alive=proc, on_fail=lambda: _fail(jail, name)
    )

    def up() -> bool:
        return f"at {hostname} is UP" in jail.run(["scontrol", "ping"], timeout=10).stdout

    wait_until(f"{name} ping", up, timeout=START_TIMEOUT, alive=proc, on_fail=lambda: _fail(jail, name), interval=0.2)


def wait_ctld(jail: Jail) -> None:
    def up() -> bool:
        return "is UP" in jail.run(["scontrol", "ping"], timeout=10).stdout

    wait_until(
        "slurmctld ping",
        up,
        timeout=START_TIMEOUT,
        alive=jail.processes.get("slurmctld"),
        on_fail=lambda: _fail(jail, "slurmctld"),
        interval=0.2,
    )


def create_qos(jail: Jail, names: list[str]) -> None:
    """What the accounting-setup Job's script does first, before slurmctld (which waits for its
    partitions' QOS) has registered: create the QOS; their settings follow in the full run."""
    for name in names:
        listed = jail.run(["sacctmgr", "-n", "-P", "show", "qos", "format=name"], role="slurmdbd", timeout=60)
        if name not in listed.stdout.split():
            done = jail.run(["sacctmgr", "-i", "add", "qos", name], role="slurmdbd", timeout=60)
            if done.returncode != 0:
                raise RuntimeError(f"sacctmgr add qos {name} failed: {done.stdout}{done.stderr}")


def setup_accounting(jail: Jail, cluster: str, script: str) -> None:
    """Run the rendered sacctmgr script once slurmctld has registered the cluster in slurmdbd
    (before that, `modify account` finds no association to change)."""

    def registered() -> bool:
        out = jail.run(["sacctmgr", "-n", "-P", "show", "cluster", "format=Cluster"], timeout=10).stdout
        return cluster in out.split()

    wait_until(
        "cluster registration in slurmdbd",
        registered,
        timeout=START_TIMEOUT,
        on_fail=lambda: _fail(jail, "slurmctld") + "\n" + _fail(jail, "slurmdbd"),
        interval=0.2,
    )
    # The accounting-setup Job runs it from the slurmdbd image.
    done = jail.run(["sh", script], role="slurmdbd", timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed: {done.stdout}{done.stderr}")


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file is at `path` (inode and change time: an inode number alone may be reused)."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_ino, info.st_ctime_ns


def start_slurmd(
    jail: Jail,
    ns: NodeSetSpec,
    name: str,
    conf: str,
    port: int,
    *,
    sack: bool = False,
    gres: Gres | None = None,
    role: str = "slurmd",
) -> None:
    """A dynamic node (-Z) registering with its NodeSet's node definition, on its own port. With
    s6 scripts, under the slurmd image's sunk-init as the pod runs it (one-shots first, services
    supervised beside slurmd), from per-node folders since the simulated nodes share one root.
    `role`: the root it runs in (another release's slurmd image, during an upgrade)."""
    root = jail.root(role)
    # SlurmdSpoolDir is per node (%n) here; slurmd does not create it before binding its socket.
    spool = root / "var/spool/slurmd" / name
    spool.mkdir(parents=True, exist_ok=True)
    if ns.power is not None:
        # A CLOUD node: slurm.conf defines it, with its port (overrides.local_cloud_nodes).
        argv = ["slurmd", "-D", "-b", "-N", name, "-f", conf, *ns.slurmd_args]  # -b: as the pod (nodeset_pod)
    else:
        argv = [
            "slurmd",
            "-D",
            "-Z",
            "-N",
            name,
            "-f",
            conf,
            "--conf",
            f"{node_conf(ns, gres)} Port={port}",
            *ns.slurmd_args,
        ]
    env: dict[str, str] = {}
    oneshots = ns.s6_oneshots
    if ns.s6_scripts or oneshots:
        base = f"/etc/sunk-nodes/{name}"
        for script, body in oneshots.items():
            write_file(root / base.lstrip("/") / "cont-init.d" / script, body, 0o755)
        for service, body in ns.s6_scripts.items():
            write_file(root / base.lstrip("/") / "services.d" / service / "run", body, 0o755)
        env = {
            "SUNK_ONESHOTS": f"{base}/cont-init.d",
            "SUNK_SERVICES": f"{base}/services.d",
            "SUNK_SCANDIR": f"/run/sunk-s6/{name}",
            "SLURMD_NODENAME": name,
        }
        argv = [S6_INIT, *argv]
    socket = root / "run/slurm/sack.socket"
    before = _identity(socket)
    proc = jail.spawn(f"slurmd-{name}", argv, role=role, env=env)
    if sack:
        # auth/slurm: every slurmd replaces /run/slurm/sack.socket (unlink, then bind) for the
        # clients of its pod. In a pod there is one slurmd; here they share a root, and two
        # binding at once kill one ("Unable to bind UNIX socket: Address already in use",
        # measured 2026-11). Wait for this one's socket before starting the next.
        wait_until(
            f"slurmd-{name} sack socket",
            lambda: _identity(socket) not in (None, before),
            timeout=START_TIMEOUT,
            alive=proc,
            on_fail=lambda: _fail(jail, f"slurmd-{name}"),
            interval=0.02,
        )


def node_states(jail: Jail) -> dict[str, str]:
    """Node name -> State (e.g. IDLE+DYNAMIC_NORM) from slurmctld."""
    out = jail.run(["scontrol", "show", "nodes", "-o"], timeout=10).stdout
    states = {}
    for line in out.splitlines():
        fields = dict(w.split("=", 1) for w in line.split() if "=" in w)
        if "NodeName" in fields:
            states[fields["NodeName"]] = fields.get("State", "")
    return states


def wait_nodes_idle(jail: Jail, names: list[str], *, allow_busy: bool = False, timeout: float = START_TIMEOUT) -> None:
    """Wait until every named node is registered and responding (IDLE, or MIXED/ALLOCATED if busy
    nodes count)."""
    ok = {"IDLE", "MIXED", "ALLOCATED"} if allow_busy else {"IDLE"}
    bad = {"NOT_RESPONDING", "DRAIN", "FAIL", "POWERED_DOWN", "INVALID_REG"}

    def ready() -> bool:
        states = node_states(jail)
        for name in names:
            parts = set(states.get(name, "UNKNOWN").split("+"))
            if not parts & ok or parts & bad:
                return False
        return True

    def fail() -> str:
        return f"states: {node_states(jail)}\n" + "\n".join(_fail(jail, f"slurmd-{n}") for n in names)

    wait_until(f"slurmd {','.join(names)}", ready, timeout=timeout, on_fail=fail, interval=0.1)


def start_slurmrestd(jail: Jail, port: int, *, accounting: bool) -> None:
    """slurmrestd refuses root and SlurmUser; SLURM_JWT=daemon only in its own environment (clients
    with SLURM_JWT set would authenticate by JWT and slurmd would reject their launches).
    Without slurmdbd the default plugin set fails ("Failure loading plugin path bindings"), so
    the OpenAPI plugins are named: openapi/slurmdbd only with accounting."""
    plugins = "openapi/slurmctld,openapi/slurmdbd" if accounting else "openapi/slurmctld"
    # By number: slurmrestd 26.05 exits on `-u nobody` ("Unable to resolve user: nobody", measured 2026-11
    # with the user in /etc/passwd); pods start it as that user already (runAsUser), with no -u.
    ids = ["-u", str(NOBODY_UID), "-g", str(NOBODY_UID)]
    argv = ["slurmrestd", *ids, "-a", "rest_auth/jwt", "-s", plugins, f"{LOOPBACK}:{port}"]
    proc = jail.spawn("slurmrestd", argv, role="slurmrestd", env={"SLURM_JWT": "daemon"})
    wait_until(
        "slurmrestd",
        lambda: listening(port),
        timeout=START_TIMEOUT,
        alive=proc,
        on_fail=lambda: _fail(jail, "slurmrestd"),
    )
