"""checkov, a scanner users run and we did not write, over every stack's render: no failure
outside tests/checkov-allowlist.yaml, whose every entry is one decision with its reason, that
still fails, and whose security excuses the role table (sunk.roles) grants to the very container
(or, for the pod-level token, the pod) they excuse. The count is asserted, so the list cannot grow
silently.

Per container: checkov's container checks (the ones its BaseK8sContainerCheck and
BaseK8sRootContainerCheck walk a pod's containers with) stop at an object's first failing
container, so a second failing container hides behind the first, and an excuse granted to one
would cover the other. The scan therefore also holds each pod-bearing object once per container
(`<name>@<container>`: the other containers removed, the pod's own settings kept); a container
check is read from those copies and keyed (check, object, container), every other check from the
objects as rendered and keyed (check, object). Which checks are container checks is asked of
checkov's own registry, not listed here.

checkov runs from .venv-checkov (.ci/bootstrap makes it from .ci/checkov.lock): its own pins
clash with requirements.lock."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from sunk.components.render import Rendered, file_name, to_yaml, write

from sunk import roles
from tests.support.tools import bootstrap_tool

from .conftest import ROOT, STACKS

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
CHECKOV_PYTHON = ROOT / ".venv-checkov" / "bin" / "python"
ALLOWLIST = ROOT / "tests" / "checkov-allowlist.yaml"
ALLOWED = 248
"""The allowlist's size: a new entry is a decision, made here as well."""

ROLE_GRANTS: dict[str, str] = {
    "CKV_K8S_16": "privileged",
    "CKV_K8S_20": "escalation",
    "CKV_K8S_22": "writable_root",
    "CKV_K8S_23": "root",
    "CKV_K8S_25": "capabilities",
    "CKV_K8S_38": "token",
}
"""Checks that only the role table may excuse: the container's grant in its pod's row (the token,
pod-level: the row's own)."""

POD_GRANTS = frozenset({"token"})
"""The grants a role holds for its whole pod, not per container."""

SEP = "@"
"""Between an object's name and a container's in the name of the object's per-container copy:
neither a Kubernetes object name nor a container name may hold it, so a copy maps back to one
(object, container)."""

PLANTED = "planted"
"""The scan's folder for the objects test_a_user_sidecar_gets_no_excuse_from_its_neighbour plants."""

_CONTAINER_CHECKS = """
import json
from checkov.kubernetes.checks.resource.registry import registry
from checkov.kubernetes.checks.resource.base_container_check import BaseK8sContainerCheck
from checkov.kubernetes.checks.resource.base_root_container_check import BaseK8sRootContainerCheck

out = {}
for checks in registry.checks.values():
    for c in checks:
        if isinstance(c, BaseK8sContainerCheck):
            out[c.id] = sorted(c.supported_container_types)
        elif isinstance(c, BaseK8sRootContainerCheck):
            out[c.id] = ["containers"]  # its scan_spec_conf reads spec.containers, never initContainers
print(json.dumps(out))
"""
"""checkov's container checks, each with the pod fields whose containers it reads: every check
built on one of the two base classes that go through a pod's containers one by one (the rest read
the pod, or nothing of a pod)."""

Key = tuple[str, str, str | None]
"""(check, object, container): the container is None for a check that is not a container check."""


def _pod(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The pod spec of a pod-bearing object (as checkov finds it), None for any other object."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return None
    if obj["kind"] == "Pod":
        return spec
    if obj["kind"] == "CronJob":
        spec = spec.get("jobTemplate", {}).get("spec", {})
    pod = spec.get("template", {}).get("spec")
    return pod if isinstance(pod, dict) else None


def _per_container(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """One copy of a pod-bearing object per container (init containers and native sidecars
    included), each holding that container alone, named `<name>@<container>`."""
    pod = _pod(obj)
    if pod is None:
        return []
    out = []
    for field in ("initContainers", "containers"):
        for container in pod.get(field) or []:
            one = copy.deepcopy(obj)
            one["metadata"]["name"] = f"{obj['metadata']['name']}{SEP}{container['name']}"
            one_pod = _pod(one)
            assert one_pod is not None
            one_pod.pop("initContainers", None)
            one_pod.pop("containers", None)
            one_pod[field] = [container]
            out.append(one)
    return out


def _write_copies(objects: list[dict[str, Any]], out: Path) -> None:
    """Each object's copies beside the render, in a folder of their own."""
    (out / "per-container").mkdir(parents=True, exist_ok=True)
    for obj in objects:
        for one in _per_container(obj):
            (out / "per-container" / file_name(one)).write_text(to_yaml(one))


def _planted_login(rendered: dict[str, Rendered]) -> dict[str, Any]:
    """acme-dev's login Deployment with a user's sidecar after sshd: root, able to escalate, with a
    writable root and an added capability, as sshd is (the login row grants sshd, not it).
    checkov's own first-failure answer names sshd's failures only."""
    login = next(
        o
        for o in rendered["acme-dev"].objects
        if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("-login")
    )
    obj = copy.deepcopy(login)
    pod = _pod(obj)
    assert pod is not None and [c["name"] for c in pod["containers"]] == ["sshd"]
    sidecar = copy.deepcopy(pod["containers"][0])
    sidecar["name"] = "user-tools"
    sidecar["command"] = ["sleep", "infinity"]
    sidecar["securityContext"] = {
        "runAsUser": 0,
        "runAsNonRoot": False,
        "allowPrivilegeEscalation": True,
        "readOnlyRootFilesystem": False,
        "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]},
    }
    pod["containers"].append(sidecar)
    return obj


@dataclass(frozen=True)
class Scan:
    summary: dict[str, Any]
    failed: dict[str, set[Key]]
    """Top folder (a stack, or PLANTED) -> its failures, per container for container checks."""
    whole: dict[str, set[tuple[str, str]]]
    """Top folder -> the container checks' failures on the objects as rendered: (check, object)."""
    objects: dict[str, dict[str, Any]]
    """Object (`<folder>/<Kind>.<namespace>.<name>`, as keyed) -> the object."""


Checks = dict[str, frozenset[str]]
"""Container check -> the pod fields (containers, initContainers) whose containers it reads."""


def _container_checks() -> Checks:
    bootstrap_tool("checkov", at=CHECKOV, package=".ci/checkov.lock")
    done = subprocess.run(
        [str(CHECKOV_PYTHON), "-c", _CONTAINER_CHECKS], capture_output=True, text=True, timeout=300, check=True
    )
    return {check: frozenset(fields) for check, fields in json.loads(done.stdout).items()}


def _field(obj: dict[str, Any], container: str) -> str:
    pod = _pod(obj)
    assert pod is not None
    return next(f for f in ("initContainers", "containers") if container in {c["name"] for c in pod.get(f) or []})


JOB_HASH = re.compile(r"^(Job\..*)-[0-9a-f]{8}$")
"""A Job's name ends in a hash of its pod (a new pod, a new Job): written `-<hash>` in the list."""


def _object(folder: str, resource: str) -> str:
    named = JOB_HASH.sub(r"\1-<hash>", resource)
    return f"{folder}/{named}"


def _id(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{obj['kind']}.{meta.get('namespace', 'default')}.{meta['name']}"


def _scan(folders: dict[str, list[dict[str, Any]]], checks: Checks, report: dict[str, Any]) -> Scan:
    """The report's failures: a container check's from the copies whose container it reads, any
    other check's from the objects as rendered."""
    objects = {_object(folder, _id(o)): o for folder, objs in folders.items() for o in objs}
    failed: dict[str, set[Key]] = {folder: set() for folder in folders}
    whole: dict[str, set[tuple[str, str]]] = {folder: set() for folder in folders}
    for f in report["results"]["failed_checks"]:
        folder = f["file_path"].lstrip("/").split("/")[0]
        name, copied, container = f["resource"].partition(SEP)
        obj = _object(folder, name)
        check = f["check_id"]
        if check not in checks and not copied:
            failed[folder].add((check, obj, None))
        elif check in checks and not copied:
            whole[folder].add((check, obj))
        elif check in checks and _field(objects[obj], container) in checks[check]:
            # A copy of an init container alone has no containers: a check that reads only
            # `containers` judges that empty list (checkov's root checks fail it), not the container.
            failed[folder].add((check, obj, container))
    return Scan(summary=report["summary"], failed=failed, whole=whole, objects=objects)


def _checkov(out: Path) -> dict[str, Any]:
    bootstrap_tool("checkov", at=CHECKOV, package=".ci/checkov.lock")
    done = subprocess.run(
        [str(CHECKOV), "-d", str(out), "--framework", "kubernetes", "-o", "json", "--compact"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    report = json.loads(done.stdout)
    return report if isinstance(report, dict) else report[0]


@pytest.fixture(scope="module")
def checks() -> Checks:
    return _container_checks()


@pytest.fixture(scope="module")
def scan(rendered: dict[str, Rendered], checks: Checks, tmp_path_factory: pytest.TempPathFactory) -> Scan:
    """One checkov run over every stack's render, each stack's per-container copies and the
    planted object (one run: checkov's start takes most of its time)."""
    assert PLANTED not in STACKS
    out = tmp_path_factory.mktemp("checkov")
    folders = {stack: rendered[stack].objects for stack in STACKS}
    folders[PLANTED] = [_planted_login(rendered)]
    for stack in STACKS:
        write(rendered[stack], out / stack)
    (out / PLANTED).mkdir()
    for obj in folders[PLANTED]:
        (out / PLANTED / file_name(obj)).write_text(to_yaml(obj))
    for folder, objs in folders.items():
        _write_copies(objs, out / folder)
    return _scan(folders, checks, _checkov(out))


def _allowlist() -> list[dict[str, str]]:
    entries = yaml.safe_load(ALLOWLIST.read_text()) or []
    assert isinstance(entries, list)
    return entries


def _key(entry: dict[str, str]) -> Key:
    return (entry["check"], entry["object"], entry.get("container"))


def _row(scan: Scan, obj: str) -> roles.Role:
    try:
        found = scan.objects[obj]
    except KeyError:
        raise AssertionError(f"{obj}: no such object in the render") from None
    spec = found["spec"]["jobTemplate"]["spec"] if found["kind"] == "CronJob" else found["spec"]
    return roles.role(spec["template"]["metadata"]["labels"]["app.kubernetes.io/component"])


def _granted(row: roles.Role, grant: str, container: str | None) -> bool:
    """Whether the row grants `grant` to `container` (the token: to the pod)."""
    if grant in POD_GRANTS:
        return row.token
    if container is None:
        return False
    if grant == "capabilities":
        return bool(row.containers.get(container))
    return container in getattr(row, grant)


def _granted_to_role(row: roles.Role, grant: str) -> bool:
    """The earlier, per-role answer (any container of the row holds the grant), kept only for the
    test that shows what it let through."""
    if grant == "capabilities":
        return any(row.containers.values())
    if grant in POD_GRANTS:
        return row.token
    return bool(getattr(row, grant))


def _refused(scan: Scan, keys: set[Key]) -> list[str]:
    """The security excuses among `keys` that the role table does not grant, as messages."""
    out = []
    for check, obj, container in sorted(keys, key=str):
        grant = ROLE_GRANTS.get(check)
        if grant is not None:
            row = _row(scan, obj)
            if not _granted(row, grant, container):
                out.append(f"{obj} {container or '(pod)'}: role {row.name} does not grant it {grant} ({check})")
    return out


def test_checkov_finds_nothing_outside_the_allowlist(scan: Scan) -> None:
    allowed = {_key(e) for e in _allowlist()}
    failed = set().union(*(scan.failed[stack] for stack in STACKS))
    summary = scan.summary
    print(f"checkov {summary['checkov_version']}: {summary['passed']} passed, {summary['failed']} failed")
    assert sorted(failed - allowed, key=str) == [], "checkov failures outside tests/checkov-allowlist.yaml"
    assert sorted(allowed - failed, key=str) == [], "allowlist entries checkov no longer reports: remove them"


def test_the_copies_fail_a_container_check_where_their_object_does(scan: Scan, checks: Checks) -> None:
    """The per-container copies are faithful: an object as rendered fails a container check exactly
    when one of its containers' copies fails it (checkov names the first), so splitting neither
    loses a failure nor invents one."""
    for folder in scan.failed:
        from_copies = {(check, obj) for check, obj, container in scan.failed[folder] if container is not None}
        assert from_copies == scan.whole[folder], folder
    assert scan.whole["acme-dev"], "no container check failed: the scan read nothing"


def test_the_allowlist_is_decisions_with_reasons_of_a_known_size(checks: Checks) -> None:
    entries = _allowlist()
    keys = [_key(e) for e in entries]
    assert len(keys) == len(set(keys)), "an entry is listed twice"
    for e in entries:
        per_container = e["check"] in checks
        assert set(e) == {"check", "object", "reason"} | ({"container"} if per_container else set()), e
        assert e["reason"].strip() and "*" not in "".join(e.values()), e
        assert e["object"].split("/", 1)[0] in STACKS, e
    assert len(entries) == ALLOWED


def test_security_excuses_are_the_role_tables_per_container(scan: Scan, checks: Checks) -> None:
    grants = {check for check, grant in ROLE_GRANTS.items() if grant not in POD_GRANTS}
    assert grants <= checks.keys(), "a per-container grant whose check checkov does not answer per container"
    assert _refused(scan, {_key(e) for e in _allowlist()}) == []


def test_a_user_sidecar_gets_no_excuse_from_its_neighbour(scan: Scan) -> None:
    """A root, escalating sidecar beside sshd in a login pod: checkov as it comes names sshd's
    failures only, and the per-role answer excused the object's; per container both are
    reported and the sidecar's are refused."""
    failed = scan.failed[PLANTED]
    login = next(obj for _, obj, _ in failed)
    row = _row(scan, login)
    for check in ("CKV_K8S_20", "CKV_K8S_22", "CKV_K8S_23", "CKV_K8S_25"):
        assert {(check, login, "sshd"), (check, login, "user-tools")} <= failed, check
        assert (check, login) in scan.whole[PLANTED], check
        assert _granted_to_role(row, ROLE_GRANTS[check]), check
    excuses = {key for key in failed if key[0] in ROLE_GRANTS}
    assert sorted(_refused(scan, excuses)) == sorted(
        f"{login} user-tools: role login does not grant it {ROLE_GRANTS[check]} ({check})"
        for check in ("CKV_K8S_20", "CKV_K8S_22", "CKV_K8S_23", "CKV_K8S_25")
    )
