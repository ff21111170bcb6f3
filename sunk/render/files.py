"""The other Slurm files: slurmdbd.conf, cgroup.conf, gres.conf, plugstack.conf, job_submit.lua,
prolog/epilog scripts, and the sacctmgr commands that create QOS (topology.conf: topology.py)."""

from __future__ import annotations

from collections.abc import Iterable

from sunk import naming
from sunk.images import SPANK_DIR
from sunk.render.gres import Gres, spec_gres
from sunk.render.slurm_conf import HEADER
from sunk.spec.cluster import ClusterSpec
from sunk.spec.nodeset import NodeSetSpec
from sunk.spec.slurmtext import conf_file

DB_PASSWORD_NOTE = "# StoragePass is appended when slurmdbd starts, from the password Secret."


def _file(file: str, lines: Iterable[str], user: Iterable[str] = ()) -> str:
    return conf_file(HEADER, lines, user, file=file)


def _yn(flag: bool) -> str:
    return "yes" if flag else "no"


def render_slurmdbd_conf(spec: ClusterSpec) -> str:
    acct = spec.accounting
    ext = acct.external
    host, port = (ext.host, ext.port) if ext else (naming.mariadb(spec), 3306)
    lines = [
        f"AuthType=auth/{spec.auth.type}",
        "AuthAltTypes=auth/jwt",
        f"AuthAltParameters=jwt_key={naming.JWT_KEY_PATH}",
        "DbdHost=localhost",
        f"DbdPort={naming.SLURMDBD_PORT}",
        "SlurmUser=slurm",
        "PidFile=/run/slurmdbd/slurmdbd.pid",
        "StorageType=accounting_storage/mysql",
        f"StorageHost={host}",
        f"StoragePort={port}",
        f"StorageUser={ext.user if ext else 'slurm'}",
        f"StorageLoc={ext.database if ext else 'slurm_acct_db'}",
        DB_PASSWORD_NOTE,
    ]
    return _file("slurmdbd.conf", lines, acct.extra_slurmdbd_conf)


def finalize_slurmdbd_conf(rendered: str, password: str) -> str:
    """What slurmdbd reads: the rendered file plus the password. Written mode 0600 at start only;
    never stored in a ConfigMap or printed."""
    if "\n" in password:
        raise ValueError("database password must be one line")
    if not password or any(ch in password for ch in '#\\" \t'):
        # Slurm cuts a line at '#', joins at a trailing backslash, drops backslashes, ends a value
        # at a blank: the password would reach MariaDB changed (slurmdbd-start.sh refuses the same).
        raise ValueError(
            "database password: empty, or holds '#', a backslash, a quote or a blank, which slurmdbd.conf "
            "can't hold as written; use another"
        )
    return rendered + f"StoragePass={password}\n"


def render_cgroup_conf(spec: ClusterSpec) -> str:
    c = spec.cgroup
    lines = [f"CgroupPlugin={c.plugin}"]
    if c.plugin != "disabled":
        lines += [
            f"ConstrainCores={_yn(c.constrain_cores)}",
            f"ConstrainDevices={_yn(c.constrain_devices)}",
            f"ConstrainRAMSpace={_yn(c.constrain_ram_space)}",
            f"ConstrainSwapSpace={_yn(c.constrain_swap_space)}",
            f"AllowedRAMSpace={c.allowed_ram_space:g}",
        ]
        if c.ignore_systemd:
            lines.append("IgnoreSystemd=yes")
    return _file("cgroup.conf", lines, spec.extra_config.cgroup_conf)


def gres_conf_key(nodeset: str) -> str:
    """Rendered file holding one NodeSet's gres.conf; mounted as gres.conf in its pods only,
    because dynamic node names are not known when the file is rendered."""
    return f"gres-{nodeset}.conf"


def render_gres_conf(spec: ClusterSpec, ns: NodeSetSpec | None, gres: Gres | None = None) -> str:
    """gres.conf of a NodeSet's nodes (`gres`: one node's, when the operator derived it from its
    Node's labels; else the spec's)."""
    if gres is None and ns is not None and ns.gpus is not None:
        gres = spec_gres(ns.gpus)
    if gres is None and ns is not None and spec.release.probes_gpus and spec.has_gpus:
        # A node without GPUs in a cluster with GresTypes=gpu, on a release whose slurmd probes
        # every GPU library for it (Release.probes_gpus): AutoDetect off keeps its log clean.
        return _file("gres.conf", ["AutoDetect=off"], spec.extra_config.gres_conf)
    return gres_file(gres, spec.extra_config.gres_conf)


def gres_file(gres: Gres | None, extra: Iterable[str] = ()) -> str:
    """A gres.conf: the GRES lines, then the cluster's extraConfig.gresConf."""
    return _file("gres.conf", gres.conf_lines() if gres is not None else (), extra)


PYXIS_SO = f"{SPANK_DIR}/spank_pyxis.so"
"""In the pyxis variant of our slurmd and login images, on every architecture: one plugstack.conf
serves amd64 and arm64 NodeSets (Slurm's own plugin folder has the multiarch triplet in it)."""


OCI_STATE = "/run/user/%U"
"""crun's state folder: per job user (%U), as Slurm's rootless crun example keeps it."""


def render_oci_conf(spec: ClusterSpec) -> str:
    """oci.conf for `srun --container`: slurmstepd runs crun as the job's user (rootless), naming
    each container by node, user, job, step and task. `--cgroup-manager=disabled`: the step is
    already in its job cgroup, which confines the container; crun must not make (or fail to make)
    one of its own. SLURM_CONF stays out of the container's and the runtime's environment."""
    crun = f"crun --rootless=true --cgroup-manager=disabled --root={OCI_STATE}"
    name = "%n.%u.%j.%s.%t"
    lines = [
        'EnvExclude="^(SLURM_CONF|SLURM_CONF_SERVER)="',
        'RunTimeEnvExclude="^(SLURM_CONF|SLURM_CONF_SERVER)="',
        f'RunTimeQuery="{crun} state {name}"',
        f'RunTimeKill="{crun} kill -a {name}"',
        f'RunTimeDelete="{crun} delete --force {name}"',
        f'RunTimeRun="{crun} run --bundle %b {name}"',
    ]
    return _file("oci.conf", lines)


def render_plugstack_conf(spec: ClusterSpec) -> str:
    lines = []
    if spec.pyxis.enabled:
        lines.append(f"required {PYXIS_SO} {' '.join(spec.pyxis.args)}".rstrip())
    lines.append(f"include {naming.PLUGSTACK_DIR}/*")
    # plugstack.conf is SPANK's format (`required <plugin> [args]`), not `Key=Value`: the user's
    # lines get the checks of sunk's own (one printable line, no '#' but as a comment, no
    # continuation), which their field's pattern already made.
    return _file("plugstack.conf", [*lines, *spec.extra_config.plugstack_conf])
