"""One vocabulary: every label, annotation and key name is spelled once, in sunk/keys.py,
under one prefix; readers still accept what older releases wrote."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from sunk.runtime.slurmrest.podref import PodRef, read_pod_ref, write_pod_ref

from sunk import keys
from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.operator import operator_manifests
from sunk.policy import namespace_problem
from sunk.spec.operator import OperatorSpec, TenantPolicy
from sunk.stackfile import list_stacks, load_stack
from tests.support.stacks import FIXTURE_STACKS

ROOT = Path(__file__).resolve().parents[1]
KEY_LITERAL = re.compile(r"""["'](?:[a-z0-9-]+\.)*sunk\.dev/(?!v1alpha1)[a-z]""")
"""A quoted `...sunk.dev/<name>` (the API group's version path, `slurm.sunk.dev/v1alpha1`, aside)."""


def test_no_key_is_spelled_outside_the_vocabulary() -> None:
    found = []
    for folder in ("sunk", "runtime", "components"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "keys.py" and path.parent.name == "sunk":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if KEY_LITERAL.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "\n".join(found)


def key_aliases(source: str) -> list[str]:
    """Module-level names that rename a sunk.keys constant: `X = keys.Y`, `X = Y` after
    `from sunk.keys import Y`, and `from sunk.keys import Y as X`. Each key has one name, used as
    `keys.Y` everywhere, so a reader never has to learn that LABEL_CLUSTER and CLUSTER_LABEL are
    the same key."""
    tree = ast.parse(source)
    modules: set[str] = set()  # names bound to the sunk.keys module
    names: set[str] = set()  # names imported from it
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                if node.module == "sunk" and alias.name == "keys":
                    modules.add(alias.asname or alias.name)
                elif node.module == "sunk.keys":
                    names.add(alias.asname or alias.name)
                    if alias.asname and alias.asname != alias.name:
                        found.append(f"{node.lineno}: from sunk.keys import {alias.name} as {alias.asname}")
        elif isinstance(node, ast.Import):
            modules |= {alias.asname for alias in node.names if alias.name == "sunk.keys" and alias.asname}
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        value = node.value
        is_key = (
            isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.value.id in modules
        ) or (isinstance(value, ast.Name) and value.id in names)
        if is_key:
            found.append(f"{node.lineno}: {ast.unparse(node).splitlines()[0]}")
    return found


def _sources() -> list[Path]:
    core = [p for p in (ROOT / "sunk").rglob("*.py") if p.relative_to(ROOT / "sunk").parts[0] not in LINKS]
    return sorted([*core, *(ROOT / "components").rglob("*.py"), *(ROOT / "runtime").rglob("*.py")])


LINKS = ("components", "runtime")
"""sunk/components and sunk/runtime are links to the top-level folders, scanned once as those."""


def test_no_module_renames_a_key() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{hit}"
        for path in _sources()
        if path.name != "keys.py" or path.parent != ROOT / "sunk"
        for hit in key_aliases(path.read_text())
    ]
    assert not found, "use keys.<NAME> where the key is used instead of a second name:\n" + "\n".join(found)


def test_the_alias_scan_sees_every_way_to_rename_a_key() -> None:
    source = (
        "from sunk import keys, naming\n"
        "from sunk.keys import CLUSTER, NODE as NODE_LABEL, TENANT\n"
        "import sunk.keys as k\n"
        "LABEL_CLUSTER = keys.CLUSTER\n"
        "CLUSTER_LABEL: str = CLUSTER\n"
        "OTHER = k.NODESET\n"
        "DERIVED = keys.PREFIX + 'x'\n"  # a new key built from the prefix is not a second name
        "NAME = naming.nodeset\n"
        "def f():\n"
        "    local = keys.TENANT\n"  # function-local names are not module API
        "    return local\n"
    )
    assert [hit.partition(":")[0] for hit in key_aliases(source)] == ["2", "4", "5", "6"]


def _keys_of(obj: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            out |= set(meta.get("labels") or {}) | set(meta.get("annotations") or {})
        for value in obj.values():
            out |= _keys_of(value)
    elif isinstance(obj, list):
        for value in obj:
            out |= _keys_of(value)
    return out


@pytest.mark.parametrize("stack", list_stacks(FIXTURE_STACKS))
def test_every_key_sunk_writes_has_the_one_prefix(stack: str) -> None:
    spec = load_stack(stack, FIXTURE_STACKS).spec
    user_given = set(spec.labels) | set(spec.monitoring.labels) | set(spec.monitoring.dashboard_labels)
    for role in (spec.controller, spec.accounting, spec.accounting.mariadb, spec.restapi, spec.login, spec.runtime):
        user_given |= {*role.labels, *role.annotations, *role.pod_labels, *role.pod_annotations}
    for service in (spec.restapi.service, spec.login.service, spec.controller.service):
        user_given |= {*service.labels, *service.annotations}
    for ns in spec.nodesets:
        user_given |= {*ns.labels, *ns.annotations, *ns.pod_labels, *ns.pod_annotations}
    written = _keys_of([*cluster_manifests(spec), *operator_manifests(OperatorSpec())]) - user_given
    foreign = {k for k in written if not k.startswith(("app.kubernetes.io/", "pod-security.kubernetes.io/"))}
    assert foreign, "expected sunk's own keys"
    assert all(k.partition("/")[0].endswith(keys.DOMAIN) for k in foreign), sorted(foreign)
    assert not any(k in keys.LEGACY.values() for k in written)


def test_pod_references_written_by_older_releases_are_still_read_and_rewritten() -> None:
    old = '{"sunk.dev/pod":"ml/research-cpu-0","sunk.dev/pod-uid":"u-1","owner":"x"}'
    assert read_pod_ref(old) == PodRef("ml", "research-cpu-0", "u-1")
    new = write_pod_ref(old, PodRef("ml", "research-cpu-0", "u-2"))
    assert 'sunk.dev/pod"' not in new.replace(keys.POD_REF, "") and '"owner":"x"' in new
    assert read_pod_ref(new) == PodRef("ml", "research-cpu-0", "u-2")


def test_a_namespace_labelled_by_an_older_release_is_still_a_tenant() -> None:
    policy = TenantPolicy()
    assert namespace_problem(policy, "acme", {keys.TENANT: "acme"}) is None
    assert namespace_problem(policy, "acme", {keys.LEGACY[keys.TENANT]: "acme"}) is None
    assert namespace_problem(policy, "acme", {"team": "acme"}) is not None
