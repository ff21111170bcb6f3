"""checkov, a scanner users run and we did not write, over every stack's render: no failure
outside tests/checkov-allowlist.yaml, whose every entry is one (check, object) pair with its
reason, that still fails, and whose security excuses the role table (sunk.roles) grants. The
count is asserted, so the list cannot grow silently.

checkov runs from .venv-checkov (.ci/bootstrap makes it from .ci/checkov.lock): its own pins
clash with requirements.lock."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from sunk.components.render import Rendered, write

from sunk import roles
from tests.support.tools import bootstrap_tool

from .conftest import ROOT, STACKS

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
ALLOWLIST = ROOT / "tests" / "checkov-allowlist.yaml"
ALLOWED = 150
"""The allowlist's size: a new entry is a decision, made here as well."""

ROLE_GRANTS: dict[str, str] = {
    "CKV_K8S_16": "privileged",
    "CKV_K8S_20": "escalation",
    "CKV_K8S_22": "writable_root",
    "CKV_K8S_23": "root",
    "CKV_K8S_25": "capabilities",
    "CKV_K8S_38": "token",
}
"""Checks that only the role table may excuse: the object's pods must be granted that by their row."""


def _scan(rendered: dict[str, Rendered], out: Path) -> dict[str, Any]:
    for stack in STACKS:
        write(rendered[stack], out / stack)
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


JOB_HASH = re.compile(r"^(Job\..*)-[0-9a-f]{8}$")
"""A Job's name ends in a hash of its pod (a new pod, a new Job): written `-<hash>` in the list."""


def _object(stack: str, resource: str) -> str:
    named = JOB_HASH.sub(r"\1-<hash>", resource)
    return f"{stack}/{named}"


def _failures(report: dict[str, Any]) -> set[tuple[str, str]]:
    out = set()
    for f in report["results"]["failed_checks"]:
        stack = f["file_path"].lstrip("/").split("/")[0]
        out.add((f["check_id"], _object(stack, f["resource"])))
    return out


def _allowlist() -> list[dict[str, str]]:
    entries = yaml.safe_load(ALLOWLIST.read_text()) or []
    assert isinstance(entries, list)
    return entries


def _pod_role(rendered: dict[str, Rendered], obj: str) -> roles.Role:
    stack = obj.split("/", 1)[0]
    for o in rendered[stack].objects:
        meta = o["metadata"]
        if _object(stack, f"{o['kind']}.{meta.get('namespace')}.{meta['name']}") == obj:
            return roles.role(o["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"])
    raise AssertionError(f"{obj}: no such object in the render")


def _granted(row: roles.Role, grant: str) -> bool:
    if grant == "capabilities":
        return any(row.containers.values())
    if grant == "token":
        return row.token
    return bool(getattr(row, grant))


@pytest.fixture(scope="module")
def report(rendered: dict[str, Rendered], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _scan(rendered, tmp_path_factory.mktemp("checkov"))


def test_checkov_finds_nothing_outside_the_allowlist(report: dict[str, Any]) -> None:
    allowed = {(e["check"], e["object"]) for e in _allowlist()}
    failed = _failures(report)
    summary = report["summary"]
    print(f"checkov {summary['checkov_version']}: {summary['passed']} passed, {summary['failed']} failed")
    assert sorted(failed - allowed) == [], "checkov failures outside tests/checkov-allowlist.yaml"
    assert sorted(allowed - failed) == [], "allowlist entries checkov no longer reports: remove them"


def test_the_allowlist_is_pairs_with_reasons_of_a_known_size() -> None:
    entries = _allowlist()
    pairs = [(e["check"], e["object"]) for e in entries]
    assert len(pairs) == len(set(pairs)), "an entry is listed twice"
    for e in entries:
        assert set(e) == {"check", "object", "reason"}, e
        assert e["reason"].strip() and "*" not in e["check"] + e["object"], e
        assert e["object"].split("/", 1)[0] in STACKS, e
    assert len(entries) == ALLOWED


def test_security_excuses_are_the_role_tables(rendered: dict[str, Rendered]) -> None:
    for e in _allowlist():
        grant = ROLE_GRANTS.get(e["check"])
        if grant is not None:
            row = _pod_role(rendered, e["object"])
            assert _granted(row, grant), f"{e['object']}: role {row.name} is not granted {grant} ({e['check']})"
