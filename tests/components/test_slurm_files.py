"""The Slurm files inside the rendered ConfigMaps, one ConfigMap per file, are the files the core
renders and the real-Slurm tests boot (sunk.render.render_slurm_files); every pod and NodeSet
names only ConfigMaps that exist, with their one key; none holds a secret."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from sunk.components.render import Rendered

from sunk import keys, naming
from sunk.render import gres_conf_key, render_slurm_files
from sunk.spec.cluster import ClusterSpec

from .conftest import STACKS


def _objects(rendered: Rendered) -> list[dict[str, Any]]:
    return [yaml.safe_load(text) for text in rendered.files.values()]


def _file_config_maps(rendered: Rendered) -> dict[str, dict[str, Any]]:
    """The ConfigMaps holding a Slurm file, by the file's path under /etc/slurm."""
    out: dict[str, dict[str, Any]] = {}
    for obj in _objects(rendered):
        path = (obj["metadata"].get("annotations") or {}).get(keys.SLURM_FILE)
        if obj["kind"] == "ConfigMap" and path is not None:
            assert path not in out, f"two ConfigMaps hold {path}"
            out[path] = obj
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_config_maps_hold_exactly_the_rendered_files(
    rendered: dict[str, Rendered], specs: dict[str, ClusterSpec], stack: str
) -> None:
    """Reassembled from the per-file ConfigMaps: exactly render_slurm_files(spec), each file
    the one key (its name) of the ConfigMap sunk.naming names for it."""
    spec = specs[stack]
    files: dict[str, str] = {}
    for path, cm in _file_config_maps(rendered[stack]).items():
        ((key, text),) = cm["data"].items()
        assert key == path.rsplit("/", 1)[-1]
        expected_name = (
            naming.topology_config_map(spec.name)
            if path == "topology.conf"
            else naming.config_file_map(spec.name, path)
        )
        assert cm["metadata"]["name"] == expected_name
        files[path] = text
    assert files == render_slurm_files(spec)


@pytest.mark.parametrize("stack", STACKS)
def test_pods_and_nodesets_name_existing_config_maps_and_keys(
    rendered: dict[str, Rendered], specs: dict[str, ClusterSpec], stack: str
) -> None:
    """Every projected source and every NodeSet configFiles entry points at a per-file ConfigMap
    of the render, with its one key, at the file's own path (a NodeSet's gres-<nodeset>.conf at
    gres.conf)."""
    spec = specs[stack]
    by_name = {cm["metadata"]["name"]: (path, cm) for path, cm in _file_config_maps(rendered[stack]).items()}
    mounted: set[str] = set()
    for obj in _objects(rendered[stack]):
        if obj["kind"] == "NodeSet":
            ns = obj["spec"]["name"]
            for mount, name in obj["spec"]["configFiles"].items():
                path, _ = by_name[name]
                assert path == (gres_conf_key(ns) if mount == "gres.conf" else mount), (ns, mount)
                mounted.add(path)
        pod = obj.get("spec", {}).get("template", {}).get("spec", {})
        for volume in pod.get("volumes", []):
            for source in volume.get("projected", {}).get("sources", []):
                if "configMap" not in source:
                    continue
                path, cm = by_name[source["configMap"]["name"]]
                # Controller hooks are executed by slurmctld: they alone carry an executable mode.
                mode = {"mode": 0o555} if path.startswith(("prolog-slurmctld.d/", "epilog-slurmctld.d/")) else {}
                assert source["configMap"]["items"] == [{"key": next(iter(cm["data"])), "path": path, **mode}]
                mounted.add(path)
    # Nothing is rendered that no pod reads.
    assert mounted == set(render_slurm_files(spec))


@pytest.mark.parametrize("stack", STACKS)
def test_no_password_in_any_config_map(rendered: dict[str, Rendered], stack: str) -> None:
    """slurmdbd.conf's StoragePass and sssd.conf's bind password (ldap_default_authtok; its
    `_type` names no secret) are appended at start from Secrets, never rendered; sssd.conf itself
    is a ConfigMap now, so it is scanned here too."""
    scanned = set()
    for obj in _objects(rendered[stack]):
        if obj["kind"] != "ConfigMap":
            continue
        for key, body in obj["data"].items():
            scanned.add(key)
            settings = {line.split("=", 1)[0].strip() for line in body.splitlines() if "=" in line}
            assert not settings & {"StoragePass", "ldap_default_authtok"}, key
            assert "PRIVATE KEY" not in body, key
    assert ("sssd.conf" in scanned) == (stack == "acme-prod"), sorted(scanned)


def test_topology_lives_in_its_own_config_map(rendered: dict[str, Rendered], specs: dict[str, ClusterSpec]) -> None:
    spec = specs["acme-prod"]
    files = _file_config_maps(rendered["acme-prod"])
    topo = yaml.safe_load(rendered["acme-prod"].files["04-configmap-acme-research-research-topology.yaml"])
    assert files["topology.conf"] == topo
    assert topo["data"] == {"topology.conf": render_slurm_files(spec)["topology.conf"]}
    assert topo["metadata"]["annotations"]["slurm.sunk.dev/maintained-by"] == "nodeset-operator"
    assert "research-topology-conf" not in {cm["metadata"]["name"] for cm in files.values()}
