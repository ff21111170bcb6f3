"""Issue 11, one vocabulary: every label, annotation and key name is spelled once, in sunk/keys.py,
under one prefix; readers still accept what older releases wrote."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from sunk.runtime.slurmrest.podref import PodRef, read_pod_ref, write_pod_ref

from sunk import keys
from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.operator import OperatorSpec, operator_manifests
from sunk.policy import TenantPolicy, namespace_problem
from sunk.stackfile import list_stacks, load_stack

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


@pytest.mark.parametrize("stack", list_stacks())
def test_every_key_sunk_writes_has_the_one_prefix(stack: str) -> None:
    spec = load_stack(stack).spec
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
