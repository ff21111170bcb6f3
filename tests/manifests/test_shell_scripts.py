"""Every shell script sunk ships passes shellcheck (scripts inside Python strings
would otherwise be linted by nothing): the `sh -c` commands and probes of every container of every shipped stack,
slurmd pods included, and the rendered shell files (accounting-setup.sh, prolog/epilog)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.config import config_maps
from sunk.manifests.nodeset_pod import nodeset_pod
from sunk.render import render_slurm_files
from sunk.stackfile import list_stacks, load_stack
from tests.support.nodeset_objects import resource_spec
from tests.support.stacks import FIXTURE_STACKS
from tests.support.tools import bootstrap_tool


def _sh_c(node: Any) -> Iterator[str]:
    """The script of every ["/bin/sh", "-c", script] anywhere in a manifest."""
    if isinstance(node, dict):
        for value in node.values():
            yield from _sh_c(value)
    elif isinstance(node, list):
        if len(node) >= 3 and node[0] in ("/bin/sh", "sh") and node[1] == "-c" and isinstance(node[2], str):
            yield node[2]
        for value in node:
            yield from _sh_c(value)


def _scripts(stack: str) -> dict[str, str]:
    spec = load_stack(stack, FIXTURE_STACKS).spec
    found: dict[str, str] = {}
    manifests = cluster_manifests(spec)
    keys = {cm["metadata"]["name"]: list(cm["data"]) for cm in config_maps(spec)}
    for ns in spec.nodesets:
        rs = resource_spec(spec, ns.name)
        where: dict[str, Any] = {"ordinal": 0} if rs.mode == "replicas" else {"kube_node": "node-a"}
        pod = nodeset_pod(rs, namespace=spec.ns, config_keys=keys, **where)
        manifests.append(pod)
    for manifest in manifests:
        for i, script in enumerate(_sh_c(manifest)):
            found[f"{manifest['kind']}/{manifest['metadata']['name']}#{i}"] = script
    for path, body in render_slurm_files(spec).items():
        if path.endswith(".sh") or body.startswith("#!/bin/sh"):
            found[path] = body
    return found


@pytest.mark.parametrize("stack", list_stacks(FIXTURE_STACKS))
def test_every_shipped_script_passes_shellcheck(stack: str) -> None:
    shellcheck = bootstrap_tool("shellcheck")
    scripts = _scripts(stack)
    assert (
        any("accounting-setup" in name for name in scripts)
        or not load_stack(stack, FIXTURE_STACKS).spec.accounting.enabled
    )
    problems = []
    for name, script in sorted(scripts.items()):
        done = subprocess.run(
            [shellcheck, "--shell=sh", "--severity=warning", "--format=gcc", "-"],
            input=script, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            problems.append(f"{name}:\n{done.stdout}")
    assert not problems, "\n".join(problems)
