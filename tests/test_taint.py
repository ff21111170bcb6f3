"""The taint test: a canary in every string field of the richest stacks that takes one is found,
in what the real program renders (the Pulumi program under the mock engine, as `sunk render`),
only where a choke point put it: in objects the pod gate checked, exactly as it checked them
(Slurm files sit in those objects' ConfigMaps, written by the one writer), or in an object listed
below with the writer that fills it. A canary anywhere else is a path around the choke points."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from sunk.components.offline import evaluate, stack_config
from sunk.components.render import render_evaluation

from sunk.podgate import stack_objects
from sunk.spec import SpecError
from sunk.stackfile import parse_config
from tests.support.stacks import FIXTURE_STACKS

ROOT = Path(__file__).resolve().parents[1]
STACKS = ("acme-prod", "globex-prod")
"""The richest shipped stacks (LDAP, external DB, policy, sidecars, block topology, pod settings)."""
OUTSIDE_THE_GATE = {
    # (kind, name suffix) -> the writer that puts spec text into an object the gate does not build.
    ("ConfigMap", "-sssd-conf"): "sssd.conf from auth.ldap (sunk.manifests.sssd.render_sssd_conf)",
    ("CustomResourceDefinition", "nodesets.slurm.sunk.dev"): "none: the CRD schema holds no spec value",
}
CANARY = re.compile(r"zq[0-9]+q")


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], str]]:
    if isinstance(node, dict):
        return [leaf for key, value in node.items() for leaf in _leaves(value, (*path, key))]
    if isinstance(node, list):
        return [leaf for i, value in enumerate(node) for leaf in _leaves(value, (*path, i))]
    return [(path, node)] if isinstance(node, str) else []


def _put(doc: Any, path: tuple[Any, ...], value: str) -> None:
    for step in path[:-1]:
        doc = doc[step]
    doc[path[-1]] = value


def _dotted(path: tuple[Any, ...]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out


def tainted(stack: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The stack's config with a canary `zq<n>q` appended to every string field of the cluster
    that still validates with it (fields no canary fits keep their value: enums, times, label
    keys); the refused ones are put back round by round. Returns the config and canary -> field."""
    config = yaml.safe_load((FIXTURE_STACKS / f"Pulumi.{stack}.yaml").read_text())["config"]
    cluster = config["sunk:cluster"]
    leaves = {_dotted(path): (path, value) for path, value in _leaves(cluster)}
    canaries = {f"zq{n}q": dotted for n, dotted in enumerate(leaves)}
    for canary, dotted in canaries.items():
        path, value = leaves[dotted]
        _put(cluster, path, f"{value}{canary}")
    for _ in range(20):
        try:
            parse_config(config, stack)
            return config, canaries
        except SpecError as err:
            problems = err.problems
        refused = {c for c, dotted in canaries.items() if any(p.startswith(dotted) or c in p for p in problems)}
        if not refused:  # a problem no field names (the pod gate's): take back one canary at a time
            refused = {next(iter(canaries))}
        for canary in refused:
            path, value = leaves[canaries.pop(canary)]
            _put(cluster, path, value)
    raise AssertionError(f"{stack}: no tainted variant validates")


def _objects(stack: str, config: dict[str, Any], tmp: Path) -> list[dict[str, Any]]:
    path = tmp / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump({"config": config}))
    settings, secret = stack_config(path)
    return render_evaluation(evaluate(ROOT / "__main__.py", stack=stack, config=settings, secret_keys=secret)).objects


def _found(obj: Any) -> set[str]:
    return set(CANARY.findall(json.dumps(obj)))


def around(
    checked: dict[tuple[str, str, str], dict[str, Any]], rendered: list[dict[str, Any]], canaries: dict[str, str]
) -> tuple[list[str], set[str]]:
    """Canaries in `rendered` outside what the gate `checked` (or the writers OUTSIDE_THE_GATE
    names), and every canary found."""
    found_all: set[str] = set()
    wrong = []
    for obj in rendered:
        meta = obj["metadata"]
        found = _found(obj)
        found_all |= found
        if not found:
            continue
        key = (obj["kind"], meta.get("namespace", ""), meta["name"])
        if key in checked:
            extra = found - _found(checked[key])
            if extra:
                wrong.append(f"{key}: {sorted(canaries[c] for c in extra)} reached it past the gate")
            continue
        # Its name, namespace and labels are identity fields the gate checks on every object it
        # builds (validated names and label values); its content and annotations are what count.
        content = _found({k: v for k, v in obj.items() if k != "metadata"}) | _found(meta.get("annotations"))
        known = any(kind == obj["kind"] and meta["name"].endswith(suffix) for kind, suffix in OUTSIDE_THE_GATE)
        if content and not known:
            wrong.append(f"{key}: {sorted(canaries[c] for c in content)} in an object the gate never saw")
    return wrong, found_all


@pytest.mark.parametrize("stack", STACKS)
def test_canaries_reach_only_what_the_choke_points_checked(stack: str, tmp_path: Path) -> None:
    config, canaries = tainted(stack)
    spec, operator = parse_config(config, stack)
    gate = stack_objects(spec, operator)[0]
    checked = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in gate}
    rendered = _objects(stack, config, tmp_path)
    wrong, reached = around(checked, rendered, canaries)
    assert wrong == []
    # The test means something: many fields took a canary, most reached an object, and a gate that
    # had not seen one object's content would be caught.
    print(f"{stack}: {len(canaries)} fields took a canary, {len(reached & set(canaries))} reached a rendered object")
    assert len(canaries) >= 10 and len(reached) >= len(canaries) // 2, (len(canaries), len(reached))
    busiest = max(checked, key=lambda k: len(_found(checked[k])))
    blind = {**checked, busiest: {"metadata": checked[busiest]["metadata"]}}
    assert around(blind, rendered, canaries)[0], busiest
