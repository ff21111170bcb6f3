"""The Slurm files inside the rendered ConfigMaps are the files the core renders and the
real-Slurm tests boot (sunk.render.render_slurm_files); none holds a secret."""

from __future__ import annotations

import pytest
import yaml
from sunk.components.render import Rendered

from sunk import naming
from sunk.render import render_slurm_files
from sunk.spec.cluster import ClusterSpec

from .conftest import STACKS


def _config_map_files(rendered: Rendered, spec: ClusterSpec) -> dict[str, str]:
    files: dict[str, str] = {}
    for text in rendered.files.values():
        obj = yaml.safe_load(text)
        if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] in {
            f"{spec.name}-slurm-config",
            naming.topology_config_map(spec.name),
        }:
            files.update(obj["data"])
    return files


@pytest.mark.parametrize("stack", STACKS)
def test_config_maps_hold_exactly_the_rendered_files(
    rendered: dict[str, Rendered], specs: dict[str, ClusterSpec], stack: str
) -> None:
    spec = specs[stack]
    expected = {naming.config_key(path): text for path, text in render_slurm_files(spec).items()}
    assert _config_map_files(rendered[stack], spec) == expected


@pytest.mark.parametrize("stack", STACKS)
def test_no_password_in_any_config_map(rendered: dict[str, Rendered], stack: str) -> None:
    for text in rendered[stack].files.values():
        obj = yaml.safe_load(text)
        if obj["kind"] != "ConfigMap":
            continue
        for key, body in obj["data"].items():
            lines = body.splitlines()
            assert not [line for line in lines if line.startswith("StoragePass")], key
            assert not [line for line in lines if line.startswith("ldap_default_authtok")], key
            assert "PRIVATE KEY" not in body, key


def test_topology_lives_in_its_own_config_map(rendered: dict[str, Rendered], specs: dict[str, ClusterSpec]) -> None:
    spec = specs["acme-prod"]
    main = yaml.safe_load(rendered["acme-prod"].files["04-configmap-acme-research-research-slurm-config.yaml"])
    topo = yaml.safe_load(rendered["acme-prod"].files["04-configmap-acme-research-research-topology.yaml"])
    assert "topology.conf" not in main["data"]
    assert topo["data"] == {"topology.conf": render_slurm_files(spec)["topology.conf"]}
