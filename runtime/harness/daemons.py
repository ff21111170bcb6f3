"""Starting each daemon in the jail and waiting until it serves. Secrets go through files and
stdin only, never through command lines (visible in `ps`) or logs."""

from __future__ import annotations

from sunk import naming
from sunk.render import node_conf
from sunk.spec.nodeset import NodeSetSpec

from .jail import Jail
from .layout import write_slurmdbd_conf
from .overrides import LOOPBACK, directive
from .ports import listening, wait_until

MARIADB_SOCKET = "/run/mysqld/mysqld.sock"
# slurmdbd 24.11 logs "Database settings not recommended values" with a buffer pool below 2G
# (measured: 1G still warns, 2G does not) or a lock wait below 900 s. InnoDB touches the pool
# lazily: MariaDB's RSS is ~150 MB with 2G (~130 MB with 1G).
MARIADB_BUFFER_POOL = "2G"
MARIADB_LOCK_WAIT = "900"
START_TIMEOUT = 30.0


def _fail(jail: Jail, name: str) -> str:
    return f"--- {name} log ---\n{jail.log_tail(name)}"


def start_munged(jail: Jail) -> None:
    proc = jail.spawn("munged", ["munged", "-F"], user="munge:munge")
    socket = jail.root / naming.MUNGE_SOCKET.lstrip("/")
    wait_until("munged", socket.exists, timeout=START_TIMEOUT, alive=proc, on_fail=lambda: _fail(jail, "munged"))


def start_mariadb(jail: Jail, port: int, slurmdbd_conf: str, password: str) -> None:
    """MariaDB on loopback with its own socket and port; the package's postinst already created
    the data folder. Creates slurmdbd's user and database (the password goes in over stdin)."""
    argv = [
        "mariadbd",
        "--no-defaults",
        "--user=mysql",
        "--datadir=/var/lib/mysql",
        f"--socket={MARIADB_SOCKET}",
        f"--port={port}",
        f"--bind-address={LOOPBACK}",
        "--skip-name-resolve",
        f"--innodb-buffer-pool-size={MARIADB_BUFFER_POOL}",
        f"--innodb-lock-wait-timeout={MARIADB_LOCK_WAIT}",
        "--pid-file=/run/mysqld/mysqld.pid",
    ]
    proc = jail.spawn("mariadb", argv)
    wait_until(
        "mariadb", lambda: listening(port), timeout=START_TIMEOUT, alive=proc, on_fail=lambda: _fail(jail, "mariadb")
    )
    user = directive(slurmdbd_conf, "StorageUser") or "slurm"
    database = directive(slurmdbd_conf, "StorageLoc") or "slurm_acct_db"
    accounts = ", ".join(f"'{user}'@'{host}'" for host in ("localhost", LOOPBACK))
    sql = "".join(
        [
            *(
                f"CREATE USER IF NOT EXISTS '{user}'@'{host}' IDENTIFIED BY '{password}';\n"
                for host in ("localhost", LOOPBACK)
            ),
            f"CREATE DATABASE IF NOT EXISTS `{database}`;\n",
            f"GRANT ALL ON `{database}`.* TO {accounts};\n",
        ]
    )
    done = jail.run(["mariadb", "--no-defaults", f"--socket={MARIADB_SOCKET}", "-u", "root"], input=sql)
    if done.returncode != 0:
        # stderr only: the input (with the password) is never echoed.
        raise RuntimeError(f"creating the slurmdbd database user failed: {done.stderr}")


def start_slurmdbd(jail: Jail, port: int, finalized_conf: str) -> None:
    write_slurmdbd_conf(jail.root, finalized_conf)
    proc = jail.spawn("slurmdbd", ["slurmdbd", "-D"])
    wait_until(
        "slurmdbd", lambda: listening(port), timeout=START_TIMEOUT, alive=proc, on_fail=lambda: _fail(jail, "slurmdbd")
    )


def start_slurmctld(jail: Jail, port: int) -> None:
    proc = jail.spawn("slurmctld", ["slurmctld", "-D"])
    wait_until(
        "slurmctld",
        lambda: listening(port),
        timeout=START_TIMEOUT,
        alive=proc,
        on_fail=lambda: _fail(jail, "slurmctld"),
    )
    wait_ctld(jail)


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
    done = jail.run(["sh", script], timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed: {done.stdout}{done.stderr}")


def start_slurmd(jail: Jail, ns: NodeSetSpec, name: str, conf: str, port: int) -> None:
    """A dynamic node (-Z) registering with its NodeSet's node definition, on its own port."""
    # SlurmdSpoolDir is per node (%n) here; slurmd does not create it before binding its socket.
    spool = jail.root / "var/spool/slurmd" / name
    spool.mkdir(parents=True, exist_ok=True)
    argv = ["slurmd", "-D", "-Z", "-N", name, "-f", conf, "--conf", f"{node_conf(ns)} Port={port}"]
    jail.spawn(f"slurmd-{name}", argv)


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
    argv = ["slurmrestd", "-u", "nobody", "-g", "nogroup", "-a", "rest_auth/jwt", "-s", plugins, f"{LOOPBACK}:{port}"]
    proc = jail.spawn("slurmrestd", argv, env={"SLURM_JWT": "daemon"})
    wait_until(
        "slurmrestd",
        lambda: listening(port),
        timeout=START_TIMEOUT,
        alive=proc,
        on_fail=lambda: _fail(jail, "slurmrestd"),
    )
