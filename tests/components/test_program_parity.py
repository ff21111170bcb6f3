"""One program: the project `sunk init` writes and sunk's own project deploy the same objects for
the same stack, with every stack setting (sunk.stackfile.KEYS) set.

The two programs once were copies, and the scaffold's drifted: it validated `sunk:keys: cluster`
and then ignored it. Exports could not show that; the registrations (type, name, inputs, the
options that protect state, what each waits for) do."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from sunk.components.offline import Evaluation, Registration, evaluate, stack_config

from sunk.scaffold import scaffold
from sunk.stackfile import (
    ALLOW_STATE_REPLACEMENT_KEY,
    CLUSTER_KEY,
    KEYS,
    KEYS_FROM_KEY,
    OPERATOR_KEY,
    read_stack_file,
)
from tests.support.stacks import FIXTURE_STACKS

from .conftest import ROOT

STACK = "acme-prod"
"""Its operator comes with settings (a policy, pod settings), its cluster with LDAP, monitoring
and state volumes: the settings below each change what is registered."""
SETTINGS: dict[str, Any] = {ALLOW_STATE_REPLACEMENT_KEY: True, KEYS_FROM_KEY: "cluster"}
"""Every setting the stack file does not set already, at a value other than its default."""


def _state_claims(ev: Evaluation) -> list[Registration]:
    return [r for r in ev.registrations if r.type == "kubernetes:core/v1:PersistentVolumeClaim"]


EFFECT: dict[str, Callable[[Evaluation], bool]] = {
    CLUSTER_KEY: lambda ev: any(r.type == "sunk:index:SlurmCluster" for r in ev.registrations),
    OPERATOR_KEY: lambda ev: any(
        r.type == "kubernetes:apps/v1:Deployment" and r.name == "sunk-operator-deployment" for r in ev.registrations
    ),
    ALLOW_STATE_REPLACEMENT_KEY: lambda ev: bool(_state_claims(ev)) and not any(r.protect for r in _state_claims(ev)),
    KEYS_FROM_KEY: lambda ev: (
        any(r.type == "sunk:index:KeyGenerator" for r in ev.registrations)
        and not any(r.type.startswith("random:") for r in ev.registrations)
    ),
}
"""How each setting shows in what the program registers: proof that the stack below sets it and
the programs read it (a program that ignored one would fail here, not only in the comparison)."""


def _where(urn: str) -> str:
    """A URN without its stack and project (`urn:pulumi:<stack>::<project>::`): the two projects'
    names differ, their resources must not. The root Stack is named after both."""
    where = urn.split("::", 2)[2] if urn else ""
    return "(the stack)" if where.startswith("pulumi:pulumi:Stack::") else where


def _registered(ev: Evaluation) -> list[dict[str, Any]]:
    """Every registered resource as the engine would plan it, minus the project's name."""
    return sorted(
        (
            {
                "type": r.type,
                "name": r.name,
                "parent": _where(r.parent),
                "inputs": r.inputs,
                "dependencies": sorted(_where(d) for d in r.dependencies),
                "ignore_changes": sorted(r.ignore_changes),
                "protect": r.protect,
                "retain_on_delete": r.retain_on_delete,
                "aliases": sorted(repr(a) for a in r.aliases),
            }
            for r in ev.registrations
        ),
        key=lambda d: (d["parent"], d["type"], d["name"]),
    )


@pytest.fixture(scope="module")
def scaffolded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`sunk init` into a fresh folder, with the fixture stack and every setting added."""
    project = tmp_path_factory.mktemp("init") / "hpc"
    scaffold(project, "hpc", "demo-dev")
    doc = read_stack_file(FIXTURE_STACKS / f"Pulumi.{STACK}.yaml")
    doc["config"].update(SETTINGS)
    (project / "stacks" / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(doc))
    return project


def _evaluate(program: Path, project: str, stack_file: Path) -> Evaluation:
    config, secret = stack_config(stack_file, project)
    return evaluate(program, stack=STACK, project=project, config=config, secret_keys=secret)


def test_a_scaffolded_project_deploys_what_sunks_own_program_does(scaffolded: Path) -> None:
    stack_file = scaffolded / "stacks" / f"Pulumi.{STACK}.yaml"
    config, _ = stack_config(stack_file, "hpc")
    assert set(EFFECT) == set(KEYS), "a new stack setting needs its EFFECT here"
    assert set(KEYS) <= set(config), "the stack must set every setting"

    theirs = _evaluate(scaffolded / "__main__.py", "hpc", stack_file)
    ours = _evaluate(ROOT / "__main__.py", "sunk", stack_file)
    for key, shows in EFFECT.items():
        assert shows(ours), f"{key}: sunk's own program ignored it"
        assert shows(theirs), f"{key}: the scaffolded program ignored it"
    mine, yours = _registered(ours), _registered(theirs)
    assert [(r["type"], r["name"]) for r in yours] == [(r["type"], r["name"]) for r in mine]
    for a, b in zip(yours, mine, strict=True):
        assert a == b, f"{a['type']} {a['name']} differs"
    assert theirs.plain_outputs() == ours.plain_outputs()
