"""Pure renderers: the same spec (and Node list) gives the same bytes."""

from __future__ import annotations

from collections.abc import Iterable

from sunk.render.files import (
    finalize_slurmdbd_conf,
    gres_conf_key,
    render_cgroup_conf,
    render_gres_conf,
    render_oci_conf,
    render_plugstack_conf,
    render_slurmdbd_conf,
)
from sunk.render.health import render_health_files
from sunk.render.sacctmgr import render_account_commands, render_sacctmgr, render_sacctmgr_script
from sunk.render.slurm_conf import node_conf, render_primary_marks, render_slurm_conf
from sunk.render.topology import TopologyNode, render_topology_conf, render_topology_yaml, unique_names
from sunk.spec.cluster import ClusterSpec

ACCOUNTING_SETUP = "accounting-setup.sh"


def render_slurm_files(spec: ClusterSpec, nodes: Iterable[TopologyNode] = ()) -> dict[str, str]:
    """Every file under /etc/slurm, keyed by path relative to it, sorted by path.

    `nodes` feeds topology.conf; at deploy time it is empty and the operator re-renders the
    file from the live Nodes (dynamic nodes join switches on `scontrol reconfigure`)."""
    files = {
        "slurm.conf": render_slurm_conf(spec),
        "cgroup.conf": render_cgroup_conf(spec),
        "gres.conf": render_gres_conf(spec, None),
        "plugstack.conf": render_plugstack_conf(spec),
    }
    for ns in spec.nodesets:
        files[gres_conf_key(ns.name)] = render_gres_conf(spec, ns)
    if spec.accounting.enabled:
        files["slurmdbd.conf"] = render_slurmdbd_conf(spec)
        files[ACCOUNTING_SETUP] = render_sacctmgr_script(spec)
    if spec.topology.plugin != "none":
        files["topology.conf"] = render_topology_conf(spec, nodes)
    if spec.topologies:
        files["topology.yaml"] = render_topology_yaml(spec.topologies, nodes, release=spec.slurm.version)
    if spec.containers.enabled:
        files["oci.conf"] = render_oci_conf(spec)
    if spec.scripts.job_submit_lua is not None:
        files["job_submit.lua"] = spec.scripts.job_submit_lua.rstrip("\n") + "\n"
    for name, body in spec.scripts.prolog.items():
        files[f"prolog.d/{name}"] = body.rstrip("\n") + "\n"
    for name, body in spec.scripts.epilog.items():
        files[f"epilog.d/{name}"] = body.rstrip("\n") + "\n"
    for name, body in spec.scripts.prolog_slurmctld.items():
        files[f"prolog-slurmctld.d/{name}"] = body.rstrip("\n") + "\n"
    for name, body in spec.scripts.epilog_slurmctld.items():
        files[f"epilog-slurmctld.d/{name}"] = body.rstrip("\n") + "\n"
    for name, body in spec.extra_config.files.items():
        files[name] = body if body.endswith("\n") or not body else body + "\n"
    files.update(render_health_files(spec))
    files.update(render_primary_marks(spec))
    return dict(sorted(files.items()))


__all__ = [
    "ACCOUNTING_SETUP",
    "TopologyNode",
    "finalize_slurmdbd_conf",
    "gres_conf_key",
    "node_conf",
    "render_account_commands",
    "render_cgroup_conf",
    "render_gres_conf",
    "render_oci_conf",
    "render_plugstack_conf",
    "render_sacctmgr",
    "render_slurm_conf",
    "render_slurm_files",
    "render_slurmdbd_conf",
    "render_topology_conf",
    "render_topology_yaml",
    "unique_names",
]
