"""The rendered Slurm files as ConfigMaps, what each role mounts of them, and the hashes that
decide between a pod replacement and `scontrol reconfigure`.

Two ConfigMaps per cluster: `<cluster>-slurm-config` (every rendered file, keys from
sunk.naming.config_key) and `<cluster>-topology` (topology.conf alone, rendered with no nodes at
deploy time; the NodeSet operator rewrites it from the Node labels, so the components create it
once and never overwrite its data).

Pods mount a projected volume at /etc/slurm (never subPath: subPath mounts never see updates), so
a changed ConfigMap reaches running pods and the reconfigure watcher beside slurmctld applies it.
Only changes Slurm cannot take through a reconfigure change a pod template's hash."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sunk import naming
from sunk.manifests.meta import Manifest, content_hash, metadata, obj
from sunk.render import gres_conf_key, render_slurm_files
from sunk.spec.cluster import ClusterSpec
from sunk.spec.nodeset import NodeSetSpec

TOPOLOGY_FILE = "topology.conf"
MUNGE_KEY = "munge.key"
SLURM_KEY = "slurm.key"
JWT_KEY = "jwt_hs256.key"
DB_PASSWORD_KEY = "password"
DB_ROOT_PASSWORD_KEY = "root-password"

Role = Literal["controller", "accounting", "accounting-setup", "restapi", "login"]

# What each role reads from /etc/slurm. Clients (login, sacctmgr) read slurm.conf on every call;
# srun on login also loads plugstack.conf (Pyxis). gres-<nodeset>.conf and prolog/epilog scripts
# belong to compute pods, which the operator builds from the NodeSet resource.
_ROLE_FILES: dict[Role, tuple[str, ...]] = {
    "controller": ("slurm.conf", "cgroup.conf", "gres.conf", "plugstack.conf", "job_submit.lua"),
    "accounting": ("slurm.conf", "slurmdbd.conf"),
    "accounting-setup": ("slurm.conf", "accounting-setup.sh"),
    "restapi": ("slurm.conf",),
    "login": ("slurm.conf", "plugstack.conf"),
}

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


def slurm_config_name(spec: ClusterSpec) -> str:
    return f"{spec.name}-slurm-config"


def topology_config_name(spec: ClusterSpec) -> str:
    return naming.topology_config_map(spec.name)


def slurm_files(spec: ClusterSpec) -> dict[str, str]:
    """The deploy-time files: exactly render_slurm_files(spec), the set the real-Slurm tests boot."""
    return render_slurm_files(spec)


def config_maps(spec: ClusterSpec) -> list[Manifest]:
    """The main ConfigMap and, with a topology plugin, the operator-maintained topology ConfigMap."""
    files = slurm_files(spec)
    data = {naming.config_key(path): text for path, text in files.items() if path != TOPOLOGY_FILE}
    out = [obj("v1", "ConfigMap", metadata(spec, slurm_config_name(spec), "config"), data=data)]
    if TOPOLOGY_FILE in files:
        meta = metadata(
            spec,
            topology_config_name(spec),
            "config",
            annotations={"sunk.dev/maintained-by": "nodeset-operator"},
        )
        out.append(obj("v1", "ConfigMap", meta, data={TOPOLOGY_FILE: files[TOPOLOGY_FILE]}))
    return out


@dataclass(frozen=True)
class SecretKey:
    """A key in a Secret, as the pods mount it."""

    secret: str
    key: str


def role_files(spec: ClusterSpec, role: Role) -> list[str]:
    files = slurm_files(spec)
    return [path for path in _ROLE_FILES[role] if path in files]


def slurm_projection(
    spec: ClusterSpec,
    role: Role,
    *,
    auth_key: SecretKey | None = None,
    jwt_key: SecretKey | None = None,
) -> Manifest:
    """Projected volume for /etc/slurm: the role's files, topology.conf on the controller, and
    the keys Slurm expects beside them (slurm.key for auth/slurm, jwt/jwt_hs256.key)."""
    sources: list[Manifest] = [
        {
            "configMap": {
                "name": slurm_config_name(spec),
                "items": [{"key": naming.config_key(p), "path": p} for p in role_files(spec, role)],
            }
        }
    ]
    if role == "controller" and TOPOLOGY_FILE in slurm_files(spec):
        sources.append(
            {
                "configMap": {
                    "name": topology_config_name(spec),
                    "items": [{"key": TOPOLOGY_FILE, "path": TOPOLOGY_FILE}],
                }
            }
        )
    # 0440: read by the slurm group (the pod's fsGroup); Slurm daemons run as slurm, not root.
    if auth_key is not None and spec.auth.type == "slurm":
        sources.append(_secret_item(auth_key, SLURM_KEY))
    if jwt_key is not None:
        sources.append(_secret_item(jwt_key, f"jwt/{JWT_KEY}"))
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
    return content_hash("controller", restart_lines(slurm_files(spec)["slurm.conf"]), spec.auth.type)


def accounting_hash(spec: ClusterSpec) -> str:
    """slurmdbd reads its file once at start and has no file-triggered reconfigure: any change rolls it."""
    files = slurm_files(spec)
    return content_hash("accounting", files.get("slurmdbd.conf", ""), restart_lines(files["slurm.conf"]))


def client_hash(spec: ClusterSpec, *extra: str) -> str:
    """Pods that only run clients (slurmrestd, login) reread slurm.conf on each call."""
    return content_hash("client", restart_lines(slurm_files(spec)["slurm.conf"]), spec.auth.type, *extra)


def nodeset_hash(spec: ClusterSpec, ns: NodeSetSpec) -> str:
    """What the NodeSet resource carries as configHash: restart-class slurm.conf lines and the
    files slurmd sets devices and cgroups up from. The node line itself (CPUs, GRES) is in the
    resource's spec, so the operator sees those changes without the hash."""
    files = slurm_files(spec)
    return content_hash(
        "nodeset",
        restart_lines(files["slurm.conf"]),
        files[gres_conf_key(ns.name)],
        files["cgroup.conf"],
        files["plugstack.conf"],
        spec.auth.type,
    )
