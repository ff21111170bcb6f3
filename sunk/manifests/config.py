"""The rendered Slurm files as ConfigMaps, what each role mounts of them, and the hashes that
decide between a pod replacement and `scontrol reconfigure`.

One ConfigMap per rendered file (sunk.render.render_slurm_files): named by
sunk.naming.config_file_map (`<cluster>-slurm-conf`, `<cluster>-gres-gpu-conf`,
`<cluster>-prolog-00-mark-sh`), the file's name its only key, its path under /etc/slurm in the
`slurm.sunk.dev/slurm-file` annotation (keys.SLURM_FILE). So an edited file updates one object, and each pod lists
exactly the objects of the files its role reads. topology.conf is the exception:
`<cluster>-topology`, rendered with no nodes at deploy time; the NodeSet operator rewrites it from
the Node labels, so the components create it once and never overwrite its data.

Pods mount one projected volume at /etc/slurm with a configMap source per file (never subPath:
subPath mounts never see updates), so a changed ConfigMap reaches running pods and the reconfigure
watcher beside slurmctld applies it. Only changes Slurm cannot take through a reconfigure change a
pod template's hash."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

from sunk import keys, naming
from sunk.manifests.meta import Manifest, content_hash, metadata, obj
from sunk.memo import PerObject
from sunk.render import gres_conf_key, render_slurm_files
from sunk.spec.cluster import ClusterSpec
from sunk.spec.nodeset import NodeSetSpec

TOPOLOGY_FILE = "topology.conf"
TOPOLOGY_YAML = "topology.yaml"
TOPOLOGY_FILES = (TOPOLOGY_FILE, TOPOLOGY_YAML)
"""The operator-maintained topology files: topology.conf (one topology) or topology.yaml (named topologies)."""

Role = Literal["controller", "accounting", "accounting-setup", "restapi", "login"]

# What each role reads from /etc/slurm. Clients (login, sacctmgr) read slurm.conf on every call;
# srun on login also loads plugstack.conf (Pyxis). gres-<nodeset>.conf and prolog/epilog scripts
# belong to compute pods (nodeset_files), which the operator builds from the NodeSet resource.
_ROLE_FILES: dict[Role, tuple[str, ...]] = {
    "controller": ("slurm.conf", "cgroup.conf", "gres.conf", "plugstack.conf", "job_submit.lua"),
    "accounting": ("slurm.conf", "slurmdbd.conf"),
    "accounting-setup": ("slurm.conf", "accounting-setup.sh"),
    "restapi": ("slurm.conf",),
    "login": ("slurm.conf", "plugstack.conf"),
}
# What slurmd reads besides its gres.conf and the prolog, epilog and health check scripts.
_NODE_FILES = ("slurm.conf", "cgroup.conf", "plugstack.conf", "oci.conf")
_SCRIPT_DIRS = ("prolog.d/", "epilog.d/", "health.d/")
_CONTROLLER_SCRIPT_DIRS = ("prolog-slurmctld.d/", "epilog-slurmctld.d/", f"{naming.HA_DIR}/")

RESTART_KEYS = frozenset(
    {
        # slurm.conf(5) lists these as needing a daemon restart rather than `scontrol reconfigure`.
        "AuthAltParameters",
        "AuthAltTypes",
        "AuthInfo",
        "AuthType",
        "ClusterName",
        "CredType",
        "GresTypes",
        "PluginDir",
        "SelectType",
        "SelectTypeParameters",
        "SlurmctldHost",
        "SlurmctldPort",
        "SlurmdPort",
        "SlurmUser",
        "SlurmdUser",
        "StateSaveLocation",
        "SwitchType",
        "TaskPlugin",
        "ProctrackType",
        "TopologyPlugin",
        # Measured on 24.11: a reconfigure that changes MaxNodeCount kills slurmctld.
        "MaxNodeCount",
    }
)
_KEY = re.compile(r"^([A-Za-z]+)=")


def config_map_name(spec: ClusterSpec, path: str) -> str:
    """The ConfigMap holding rendered file `path` (relative to /etc/slurm)."""
    return naming.config_file_map(spec.name, path)


def topology_config_name(spec: ClusterSpec) -> str:
    return naming.topology_config_map(spec.name)


@dataclass(frozen=True)
class RenderedFiles:
    """A spec's deploy-time Slurm files and what every consumer reads from all of them, rendered
    once per spec (sunk.memo): the ConfigMaps, each role's projection, each NodeSet's files and
    hash, and the pod gate share one render. Per NodeSet, only its own gres file differs."""

    files: Mapping[str, str]
    """Exactly render_slurm_files(spec), the set the real-Slurm tests boot; read-only, it is shared."""
    restart: tuple[str, ...]
    """restart_lines of slurm.conf."""
    node_paths: tuple[str, ...]
    """What every slurmd mounts besides its NodeSet's gres.conf (sorted)."""


def _render(spec: ClusterSpec) -> RenderedFiles:
    files = render_slurm_files(spec)
    extra = spec.extra_config.files
    node = [path for path in files if path in _NODE_FILES or path in extra or path.startswith(_SCRIPT_DIRS)]
    return RenderedFiles(MappingProxyType(files), tuple(restart_lines(files["slurm.conf"])), tuple(node))


rendered_files = PerObject(_render)
"""The spec's RenderedFiles, rendered on the first call for that spec object."""


def slurm_files(spec: ClusterSpec) -> Mapping[str, str]:
    """The deploy-time files: exactly render_slurm_files(spec), the set the real-Slurm tests boot,
    rendered once per spec object (read-only: every consumer shares it)."""
    return rendered_files(spec).files


def config_maps(spec: ClusterSpec) -> list[Manifest]:
    """One ConfigMap per rendered file in path order, the topology file's (operator-maintained,
    topology.conf or topology.yaml) last."""
    files = slurm_files(spec)
    out = [
        obj(
            "v1",
            "ConfigMap",
            metadata(spec, config_map_name(spec, path), "config", annotations={keys.SLURM_FILE: path}),
            data={naming.config_file_key(path): text},
        )
        for path, text in files.items()
        if path not in TOPOLOGY_FILES
    ]
    if (topology := spec.topology_file) is not None:
        meta = metadata(
            spec,
            topology_config_name(spec),
            "config",
            annotations={keys.MAINTAINED_BY: "nodeset-operator", keys.SLURM_FILE: topology},
        )
        out.append(obj("v1", "ConfigMap", meta, data={topology: files[topology]}))
    return out


@dataclass(frozen=True)
class SecretKey:
    """A key in a Secret, as the pods mount it."""

    secret: str
    key: str


def role_files(spec: ClusterSpec, role: Role) -> list[str]:
    """What the role mounts: its own files, and on the controller and login pods the stack's
    extra files (extraConfig.files) beside slurm.conf; on the controller its prolog and epilog
    scripts (scripts.prologSlurmctld, epilogSlurmctld)."""
    files = slurm_files(spec)
    out = [path for path in _ROLE_FILES[role] if path in files]
    if role in ("controller", "login"):
        out += sorted(spec.extra_config.files)
    if role == "controller":
        out += [path for path in files if path.startswith(_CONTROLLER_SCRIPT_DIRS)]
    return out


def nodeset_files(spec: ClusterSpec, ns: NodeSetSpec) -> dict[str, str]:
    """What slurmd pods of `ns` mount: path under /etc/slurm -> rendered file. The NodeSet's own
    `gres-<nodeset>.conf` becomes its `gres.conf`; prolog and epilog scripts keep their folders."""
    out = {path: path for path in rendered_files(spec).node_paths}
    out["gres.conf"] = gres_conf_key(ns.name)  # rendered for every NodeSet, empty without GRES
    return dict(sorted(out.items()))


def nodeset_config_files(spec: ClusterSpec, ns: NodeSetSpec) -> dict[str, str]:
    """The NodeSet resource's configFiles: path under /etc/slurm -> ConfigMap holding it."""
    return {mount: config_map_name(spec, path) for mount, path in nodeset_files(spec, ns).items()}


def nodeset_config_maps(spec: ClusterSpec) -> list[str]:
    """Every ConfigMap some NodeSet mounts (what the operator reads, by name), sorted."""
    return sorted({name for ns in spec.nodesets for name in nodeset_config_files(spec, ns).values()})


def file_source(spec: ClusterSpec, path: str) -> Manifest:
    """A projected-volume source putting rendered file `path` at `path` under the mount."""
    key = naming.config_file_key(path)
    item: Manifest = {"key": key, "path": path}
    if path.startswith(_CONTROLLER_SCRIPT_DIRS):
        item["mode"] = 0o555  # slurmctld (SlurmUser) executes them
    return {"configMap": {"name": config_map_name(spec, path), "items": [item]}}


def slurm_projection(
    spec: ClusterSpec,
    role: Role,
    *,
    auth_key: SecretKey | None = None,
    jwt_key: SecretKey | None = None,
) -> Manifest:
    """Projected volume for /etc/slurm: one source per file the role reads, topology.conf on
    the controller, and the keys Slurm expects beside them (slurm.key for auth/slurm,
    jwt/jwt_hs256.key)."""
    sources = [file_source(spec, path) for path in role_files(spec, role)]
    if role == "controller" and (topology := spec.topology_file) is not None:
        sources.append(
            {
                "configMap": {
                    "name": topology_config_name(spec),
                    "items": [{"key": topology, "path": topology}],
                }
            }
        )
    # 0440: read by the slurm group (the pod's fsGroup); Slurm daemons run as slurm, not root.
    if auth_key is not None and spec.auth.type == "slurm":
        sources.append(_secret_item(auth_key, keys.SLURM_KEY))
    if jwt_key is not None:
        sources.append(_secret_item(jwt_key, f"jwt/{keys.JWT_KEY}"))
    return {"name": "slurm-config", "projected": {"defaultMode": 0o444, "sources": sources}}


def _secret_item(ref: SecretKey, path: str) -> Manifest:
    return {"secret": {"name": ref.secret, "items": [{"key": ref.key, "path": path, "mode": 0o440}]}}


def restart_lines(slurm_conf: str) -> list[str]:
    """The slurm.conf lines a reconfigure cannot apply (sorted, so moving them is no change)."""
    out = []
    for line in slurm_conf.splitlines():
        m = _KEY.match(line)
        if m and m.group(1) in RESTART_KEYS:
            out.append(line)
    return sorted(out)


def controller_hash(spec: ClusterSpec) -> str:
    """slurmctld restarts only for restart-class settings; the watcher reconfigures the rest."""
    return content_hash("controller", list(rendered_files(spec).restart), spec.auth.type)


def accounting_hash(spec: ClusterSpec) -> str:
    """slurmdbd reads its file once at start and has no file-triggered reconfigure: any change rolls it."""
    done = rendered_files(spec)
    return content_hash("accounting", done.files.get("slurmdbd.conf", ""), list(done.restart))


def client_hash(spec: ClusterSpec, *extra: str) -> str:
    """Pods that only run clients (slurmrestd, login) reread slurm.conf on each call."""
    return content_hash("client", list(rendered_files(spec).restart), spec.auth.type, *extra)


def nodeset_hash(spec: ClusterSpec, ns: NodeSetSpec) -> str:
    """What the NodeSet resource carries as configHash: restart-class slurm.conf lines and the
    files slurmd sets devices and cgroups up from. The node line itself (CPUs, GRES) is in the
    resource's spec, so the operator sees those changes without the hash."""
    done = rendered_files(spec)
    files = done.files
    return content_hash(
        "nodeset",
        list(done.restart),
        files[gres_conf_key(ns.name)],
        files["cgroup.conf"],
        files["plugstack.conf"],
        spec.auth.type,
        # slurmd reads most extra files (acct_gather.conf, job_container.conf, mpi.conf) at start.
        *(f"{name}\n{files[name]}" for name in sorted(spec.extra_config.files)),
    )
