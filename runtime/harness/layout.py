"""Puts the (overridden) rendered files, keys and runtime folders into a root filesystem copy."""

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


def _write(path: Path, text: str | bytes, mode: int, owner: tuple[int, int] | None = None) -> None:
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


def prepare_root(
    root: Path, files: Mapping[str, str], *, host: str, devices: Sequence[str], auth: str = "munge"
) -> None:
    """Keys, /etc/hosts, runtime folders, fake GPU devices and /etc/slurm from `files`."""
    slurm = lookup_ids(root, "slurm")
    munge = lookup_ids(root, "munge")
    mysql = lookup_ids(root, "mysql")
    # The copy has no /etc/hosts and no DNS: the short hostname must resolve for SlurmctldHost.
    _write(root / "etc/hosts", f"127.0.0.1 localhost {host}\n", 0o644)
    # A fresh munge key per instance (the tarball's was made at build time and is shared).
    _folder(root / "etc/munge", 0o700, munge)
    _write(root / "etc/munge/munge.key", secrets.token_bytes(1024), 0o400, munge)
    # munged's socket folder must be owned by munge and world-searchable (clients connect).
    _folder(root / "run/munge", 0o755, munge)
    if auth == "slurm":
        # auth/slurm: one shared key, owned by SlurmUser and private (as its Secret is mounted).
        key = root / naming.SLURM_KEY_PATH.lstrip("/")
        _write(key, secrets.token_bytes(1024), 0o600, slurm)
    jwt_key = root / naming.JWT_KEY_PATH.lstrip("/")
    _folder(jwt_key.parent, 0o755, slurm)
    _write(jwt_key, secrets.token_bytes(32), 0o600, slurm)
    for folder in (naming.STATE_SAVE, "/run/slurmctld", "/run/slurmdbd", "/var/log/slurm"):
        _folder(root / folder.lstrip("/"), 0o755, slurm)
    for folder in ("/run/slurmd", "/var/spool/slurmd"):
        _folder(root / folder.lstrip("/"), 0o755, (0, 0))
    _folder(root / "run/mysqld", 0o755, mysql)
    _folder(root / "var/log/sunk", 0o755, (0, 0))
    for device in devices:
        target = root / device.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            # A char device like /dev/null (1,3): Slurm only checks that GRES files exist.
            os.mknod(target, 0o666 | 0o020000, os.makedev(1, 3))
    write_slurm_files(root, files)


def write_slurm_files(root: Path, files: Mapping[str, str]) -> None:
    etc = root / naming.SLURM_ETC.lstrip("/")
    for rel, text in files.items():
        if rel == SLURMDBD_CONF:
            continue  # written by finalize_slurmdbd (mode 0600, with the password)
        executable = rel.startswith(("prolog.d/", "epilog.d/")) or rel.endswith(".sh")
        _write(etc / rel, text, 0o755 if executable else 0o644)
    (etc / naming.PLUGSTACK_DIR.removeprefix(naming.SLURM_ETC).lstrip("/")).mkdir(exist_ok=True)


def write_slurmdbd_conf(root: Path, text: str) -> None:
    """slurmdbd refuses a slurmdbd.conf not owned by SlurmUser or readable by others."""
    _write(root / naming.SLURM_ETC.lstrip("/") / SLURMDBD_CONF, text, 0o600, lookup_ids(root, "slurm"))


def node_conf_dir(node: SimNode) -> str:
    return f"{NODE_CONF_ROOT}/{node.name}"


def write_node_conf(root: Path, node: SimNode, files: Mapping[str, str]) -> str:
    """A copy of /etc/slurm for one slurmd whose gres.conf is its NodeSet's (as its pod mounts it).
    Returns the slurm.conf path inside the jail."""
    folder = root / node_conf_dir(node).lstrip("/")
    folder.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        if rel == SLURMDBD_CONF or "/" in rel:
            continue  # the DB password stays with slurmdbd; scripts are referenced by absolute path
        body = files.get(gres_conf_key(node.nodeset), text) if rel == "gres.conf" else text
        _write(folder / rel, body, 0o755 if rel.endswith(".sh") else 0o644)
    key = root / naming.SLURM_KEY_PATH.lstrip("/")
    if key.exists() and not (folder / key.name).exists():
        # auth/slurm reads slurm.key beside slurm.conf; a hard link keeps owner and mode 0600.
        os.link(key, folder / key.name)
    return f"{node_conf_dir(node)}/slurm.conf"
