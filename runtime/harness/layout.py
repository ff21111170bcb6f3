"""Puts the (overridden) rendered files, keys and runtime folders into the roles' root filesystems."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sunk import naming
from sunk.render import gres_conf_key
from sunk.spec.cluster import ClusterSpec

from .jail import lookup_ids

SLURMDBD_CONF = "slurmdbd.conf"
NODE_CONF_ROOT = "/etc/sunk-nodes"
"""Per-node copies of /etc/slurm (what each slurmd pod mounts); slurmd reads gres.conf, cgroup.conf
and plugstack.conf beside the slurm.conf it is given."""


@dataclass(frozen=True)
class SimNode:
    """A simulated Slurm node: one slurmd of a NodeSet, with the labels its Kubernetes Node
    would carry (they place it in topology.conf)."""

    name: str
    nodeset: str
    labels: Mapping[str, str] = field(default_factory=dict)


def default_nodes(spec: ClusterSpec, cap: int = 2) -> list[SimNode]:
    """Each NodeSet's first replicas (at most `cap`), named as their pods are, with topology labels:
    upper levels shared, one leaf per NodeSet."""
    keys = spec.topology.label_keys if spec.topology.plugin != "none" else []
    nodes = []
    for ns in spec.nodesets:
        wanted = ns.desired_replicas
        count = min(cap, ns.node_bound if wanted is None else wanted)
        for ordinal in range(count):
            labels = {}
            for depth, key in enumerate(keys):
                short = key.rsplit("/", 1)[-1]
                labels[key] = f"{short}-{ns.name}" if depth == len(keys) - 1 else f"{short}-0"
            nodes.append(SimNode(naming.slurm_node_name(ns.name, ordinal), ns.name, labels))
    return nodes


def short_hostname() -> str:
    """`hostname -s`: what slurmctld compares SlurmctldHost with."""
    return socket.gethostname().split(".")[0]


def write_file(path: Path, text: str | bytes, mode: int, owner: tuple[int, int] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Created with the final mode (not chmod-ed afterwards): key files are never world-readable.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(text.encode() if isinstance(text, str) else text)
    os.chmod(path, mode)
    if owner is not None:
        os.chown(path, *owner)


def _folder(path: Path, mode: int, owner: tuple[int, int]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, mode)
    os.chown(path, *owner)


SLURM_ROLES = ("slurmctld", "slurmdbd", "slurmrestd", "slurmd", "login")
"""Roles whose images run Slurm daemons or clients (and so a munged, with auth/munge)."""
ROLE_FOLDERS: dict[str, tuple[tuple[str, str], ...]] = {
    # (folder, owner): what each role's pod gets from its volumes or creates at start.
    "slurmctld": ((naming.STATE_SAVE, "slurm"), ("/run/slurmctld", "slurm")),
    "slurmdbd": (("/run/slurm", "slurm"), ("/run/slurmdbd", "slurm")),
    "slurmd": (("/run/slurmd", "root"), ("/var/spool/slurmd", "root")),
    "mariadb": (("/run/mysqld", "mysql"),),
    "login": (("/run/slurm", "root"),),
}


def prepare_etc(etc: Path, files: Mapping[str, str], *, slurm: tuple[int, int], auth: str = "munge") -> None:
    """The shared /etc/slurm (what the ConfigMaps and key Secrets project): the rendered files,
    the JWT key and, for auth/slurm, slurm.key; fresh keys per instance."""
    if auth == "slurm":
        # auth/slurm: one shared key, owned by SlurmUser and private (as its Secret is mounted).
        write_file(
            etc / naming.SLURM_KEY_PATH.removeprefix(naming.SLURM_ETC).lstrip("/"),
            secrets.token_bytes(1024),
            0o600,
            slurm,
        )
    jwt_key = etc / naming.JWT_KEY_PATH.removeprefix(naming.SLURM_ETC).lstrip("/")
    _folder(jwt_key.parent, 0o755, slurm)
    write_file(jwt_key, secrets.token_bytes(32), 0o600, slurm)
    write_slurm_files(etc, files)


def prepare_role(root: Path, role: str, *, host: str, munge_key: bytes | None, devices: Sequence[str] = ()) -> None:
    """One role's root: /etc/hosts, the munge key and socket folder (auth/munge), its runtime
    folders, and fake GPU device files (slurmd)."""
    # The image has no /etc/hosts and no DNS: the short hostname must resolve for SlurmctldHost.
    write_file(root / "etc/hosts", f"127.0.0.1 localhost {host}\n", 0o644)
    if munge_key is not None and role in SLURM_ROLES:
        munge = lookup_ids(root, "munge")
        _folder(root / "etc/munge", 0o700, munge)
        write_file(root / "etc/munge/munge.key", munge_key, 0o400, munge)
        # munged's socket folder must be owned by munge and world-searchable (clients connect).
        _folder(root / "run/munge", 0o755, munge)
    if role in SLURM_ROLES:
        _folder(root / "var/log/slurm", 0o755, lookup_ids(root, "slurm"))
    for folder, owner in ROLE_FOLDERS.get(role, ()):
        _folder(root / folder.lstrip("/"), 0o755, (0, 0) if owner == "root" else lookup_ids(root, owner))
    make_devices(root, devices)


def make_devices(root: Path, devices: Sequence[str]) -> None:
    """Fake GPU device files in a root, where missing."""
    for device in devices:
        target = root / device.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            # A char device like /dev/null (1,3): Slurm only checks that GRES files exist.
            os.mknod(target, 0o666 | 0o020000, os.makedev(1, 3))


def write_slurm_files(etc: Path, files: Mapping[str, str]) -> None:
    """The rendered files into /etc/slurm (slurmdbd.conf too: without its password, as in its
    ConfigMap; slurmdbd's start script adds the password to a private copy)."""
    for rel, text in files.items():
        executable = rel.startswith(
            ("prolog.d/", "epilog.d/", "health.d/", "prolog-slurmctld.d/", "epilog-slurmctld.d/", f"{naming.HA_DIR}/")
        )
        executable = executable or rel.endswith(".sh")
        write_file(etc / rel, text, 0o755 if executable else 0o644)
    (etc / naming.PLUGSTACK_DIR.removeprefix(naming.SLURM_ETC).lstrip("/")).mkdir(exist_ok=True)


def node_conf_dir(node: SimNode) -> str:
    return f"{NODE_CONF_ROOT}/{node.name}"


def write_node_conf(root: Path, etc: Path, node: SimNode, files: Mapping[str, str]) -> str:
    """A copy of /etc/slurm for one slurmd whose gres.conf is its NodeSet's (as its pod mounts it).
    Returns the slurm.conf path inside the jail."""
    folder = root / node_conf_dir(node).lstrip("/")
    folder.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        if rel == SLURMDBD_CONF or "/" in rel:
            continue  # the DB password stays with slurmdbd; scripts are referenced by absolute path
        body = files.get(gres_conf_key(node.nodeset), text) if rel == "gres.conf" else text
        write_file(folder / rel, body, 0o755 if rel.endswith(".sh") else 0o644)
    key = etc / naming.SLURM_KEY_PATH.removeprefix(naming.SLURM_ETC).lstrip("/")
    if key.exists() and not (folder / key.name).exists():
        # auth/slurm reads slurm.key beside slurm.conf: a copy with the same owner and mode 0600.
        info = key.stat()
        write_file(folder / key.name, key.read_bytes(), 0o600, (info.st_uid, info.st_gid))
    return f"{node_conf_dir(node)}/slurm.conf"
