"""What must differ when the rendered Slurm files boot on one host instead of a Kubernetes cluster.

Everything here is pure (text in, text out) and each function says why its change is needed
off-cluster. Nothing else in the rendered files is touched: the harness proves those bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sunk.hostlist import expand
from sunk.render import ACCOUNTING_SETUP

LOOPBACK = "127.0.0.1"
MARKER = "# sunk local harness overrides (off-cluster only)"


@dataclass(frozen=True)
class LocalPorts:
    """Free ports for one harness instance, so several can run on one host at once."""

    slurmctld: int
    slurmd: int
    slurmdbd: int
    mariadb: int
    slurmrestd: int


def _key(line: str) -> str | None:
    """The directive a `Key=Value` line sets (lower case); None for comments, blanks and
    multi-word lines such as `PartitionName=... Nodes=...` (their first key names the record)."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#") or "=" not in stripped:
        return None
    key, _, value = stripped.partition("=")
    if " " in key or " " in value.strip():
        return None
    return key.strip().lower()


def set_directives(text: str, values: Mapping[str, str]) -> str:
    """Replace `Key=...` lines in place (Slurm keys are case-insensitive); append the keys the file
    lacks under a marker comment. Keys mapped to "" are removed."""
    wanted = {k.lower(): (k, v) for k, v in values.items()}
    seen: set[str] = set()
    out: list[str] = []
    for line in text.splitlines():
        key = _key(line)
        if key in wanted:
            if key not in seen:
                seen.add(key)
                name, value = wanted[key]
                if value:
                    out.append(f"{name}={value}")
            continue
        out.append(line)
    missing = [(name, value) for key, (name, value) in wanted.items() if key not in seen and value]
    if missing:
        out += [MARKER, *(f"{name}={value}" for name, value in missing)]
    return "\n".join(out) + "\n"


def directive(text: str, key: str) -> str | None:
    """The value of the last `Key=Value` line for `key` (case-insensitive), if any."""
    found = None
    for line in text.splitlines():
        if _key(line) == key.lower():
            found = line.partition("=")[2].strip()
    return found


def controller_hosts(text: str) -> list[str]:
    """The short names of the SlurmctldHost lines, in order (primary first)."""
    return [
        line.partition("=")[2].strip().partition("(")[0] for line in text.splitlines() if _key(line) == "slurmctldhost"
    ]


def backup_address(index: int) -> str:
    """Backup `index` (1, 2) listens on its own loopback address: every slurmctld uses SlurmctldPort."""
    return f"127.0.0.{index + 1}"


def _controllers(text: str, host: str) -> str:
    """One SlurmctldHost line per rendered one, in place. slurmctld only starts where its
    SlurmctldHost is `hostname -s`: in-cluster the primary is pod -0 of the controller StatefulSet,
    here it is this host on loopback; each backup keeps its pod's name (the harness gives its
    slurmctld that hostname) on an address of its own."""
    out: list[str] = []
    index = 0
    for line in text.splitlines():
        if _key(line) == "slurmctldhost":
            name = line.partition("=")[2].strip().partition("(")[0]
            out.append(
                f"SlurmctldHost={host}({LOOPBACK})" if index == 0 else f"SlurmctldHost={name}({backup_address(index)})"
            )
            index += 1
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def local_slurm_conf(text: str, *, host: str, ports: LocalPorts, accounting: bool) -> str:
    """slurm.conf for daemons that share one host, one filesystem and no cgroup hierarchy."""
    parameters = [p for p in (directive(text, "SlurmdParameters") or "").split(",") if p]
    backups = len(controller_hosts(text)) > 1
    text = _controllers(text, host)
    values = {
        # Free ports per instance: several harnesses (test sessions) may run at once.
        "SlurmctldPort": str(ports.slurmctld),
        "SlurmdPort": str(ports.slurmd),
        # One pod per slurmd in-cluster; here all slurmd share a filesystem, so spool and pid
        # files are per node name (%n).
        "SlurmdSpoolDir": "/var/spool/slurmd/%n",
        "SlurmdPidFile": "/run/slurmd/%n.pid",
        # cgroup/v2 fails on hosts in cgroup hybrid mode, and a chroot has no delegated cgroup
        # tree: track processes through /proc instead (the cluster keeps the rendered plugins).
        "ProctrackType": "proctrack/linuxproc",
        "TaskPlugin": "task/affinity",
        # Simulated nodes claim the NodeSet's CPUs and memory, more than this host has.
        "SlurmdParameters": ",".join(dict.fromkeys([*parameters, "config_overrides"])),
        # The daemons run in the foreground (-D) and log to stderr, which carries no time unless
        # format_stderr: the harness's logs then say when (bench/scheduler_bench.py times its stages
        # from them). In-cluster the container runtime stamps each line.
        "LogTimeFormat": "iso8601_ms,format_stderr",
    }
    if backups:
        # Every slurmctld binds SlurmctldPort on all addresses by default; on one host each must
        # bind only the address its hostname resolves to (in-cluster each pod has its own IP).
        values["CommunicationParameters"] = "NoCtldInAddrAny"
    if directive(text, "JobAcctGatherType"):
        values["JobAcctGatherType"] = "jobacct_gather/linux"  # the cgroup one needs cgroups too
    if accounting:
        # slurmdbd runs beside slurmctld on loopback instead of behind its Service name.
        values["AccountingStorageHost"] = LOOPBACK
        values["AccountingStoragePort"] = str(ports.slurmdbd)
    else:
        # Booting without slurmdbd (accounting=False) although the spec has it.
        values["AccountingStorageType"] = "accounting_storage/none"
        values["AccountingStorageHost"] = ""
        values["AccountingStoragePort"] = ""
        values["AccountingStoreFlags"] = ""
        values["AccountingStorageTRES"] = ""
        values["AccountingStorageEnforce"] = ""
        values["JobAcctGatherType"] = ""  # as the renderer does without accounting
        # No accounting, no QOS: slurmctld 26.05 exits on an AllowQos naming one it lacks
        # (24.11 ignored it), so the partitions lose their QOS lists here.
        text = "".join(
            " ".join(w for w in line.split(" ") if not w.startswith("AllowQos=")) + "\n"
            if line.startswith("PartitionName=")
            else line + "\n"
            for line in text.splitlines()
        )
    return set_directives(text, values)


def local_cloud_nodes(text: str, node_ports: Mapping[str, int]) -> str:
    """CLOUD node lines (NodeSets with `power`) split into one line per node with its own port on
    loopback: in-cluster every pod has its own IP and the default port, here every slurmd shares
    one host. Names without a port here are left as rendered."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if not (words and words[0].startswith("NodeName=") and "State=CLOUD" in words):
            out.append(line)
            continue
        names = expand(words[0].removeprefix("NodeName="))
        rest = " ".join(words[1:])
        for name in names:
            if name in node_ports:
                out.append(f"NodeName={name} NodeAddr={LOOPBACK} Port={node_ports[name]} {rest}")
            else:
                out.append(f"NodeName={name} {rest}")
    return "\n".join(out) + "\n"


def local_slurmdbd_conf(text: str, *, ports: LocalPorts) -> str:
    """slurmdbd.conf pointing at the harness's private MariaDB instead of the in-cluster Service."""
    return set_directives(
        text,
        {
            # The MariaDB Service name does not resolve here; the harness's MariaDB listens on
            # loopback on its own port.
            "StorageHost": LOOPBACK,
            "StoragePort": str(ports.mariadb),
            # Free port per instance (slurmdbd listens on all addresses).
            "DbdPort": str(ports.slurmdbd),
        },
    )


def local_cgroup_conf(text: str) -> str:
    """slurmd always loads the cgroup plugin and dies without a usable cgroup fs, and cgroup/v2
    fails on hybrid-mode hosts: disable it locally (the cluster keeps the rendered plugin)."""
    return set_directives(text, {"CgroupPlugin": "disabled"})


def local_plugstack_conf(text: str, exists: Callable[[str], bool]) -> str:
    """Drop plugstack lines naming a SPANK plugin the package set does not ship (pyxis comes from
    the image build, not from Debian); slurmd and srun refuse to start on a missing `required` one."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] in {"required", "optional"} and not exists(words[1]):
            out.append(f"# dropped by the local harness ({words[1]} is not installed): {line}")
            continue
        out.append(line)
    return "\n".join(out) + "\n"


_FILE = re.compile(r"(?:^|\s)File=(\S+)")


def gres_device_files(text: str) -> list[str]:
    """Device paths named by `File=` in a gres.conf (ranges expanded): the harness fakes each one
    as a character device, since Slurm drops file-less GPUs and this host has none."""
    paths: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for match in _FILE.finditer(line):
            for path in expand(match.group(1)):
                if path not in paths:
                    paths.append(path)
    return paths


def local_files(
    files: Mapping[str, str],
    *,
    host: str,
    ports: LocalPorts,
    accounting: bool,
    exists: Callable[[str], bool],
    node_ports: Mapping[str, int] | None = None,
) -> dict[str, str]:
    """All rendered files with the overrides above applied; the others unchanged. Without
    accounting the slurmdbd files are left out (no slurmdbd runs)."""
    out = dict(files)
    conf = local_slurm_conf(files["slurm.conf"], host=host, ports=ports, accounting=accounting)
    out["slurm.conf"] = local_cloud_nodes(conf, node_ports or {})
    out["cgroup.conf"] = local_cgroup_conf(files["cgroup.conf"])
    out["plugstack.conf"] = local_plugstack_conf(files["plugstack.conf"], exists)
    if accounting:
        out["slurmdbd.conf"] = local_slurmdbd_conf(files["slurmdbd.conf"], ports=ports)
    else:
        out.pop("slurmdbd.conf", None)
        out.pop(ACCOUNTING_SETUP, None)
    return out
