"""A release upgrade (slurm.upgradeFrom) in the components: slurmctld waits for slurmdbd, and
everything else that runs Slurm waits for slurmctld (Pulumi waits for a workload's rollout before
updating what depends on it), in sunk.upgrade's order. Without upgradeFrom none of it applies."""

from __future__ import annotations

from pathlib import Path

import pytest
from sunk.components.offline import Evaluation, evaluate
from sunk.components.render import render_config

from tests.support.stacks import ROOT, small_stack


def _evaluate(tmp_path: Path, slurm: str) -> Evaluation:
    config, secret = render_config(small_stack(tmp_path, slurm))
    return evaluate(ROOT / "__main__.py", stack="acme-dev", config=config, secret_keys=secret)


def _children(ev: Evaluation, token: str) -> set[str]:
    parent = next(r.urn for r in ev.components() if r.type == token)
    return {r.urn for r in ev.kubernetes() if r.parent == parent}


def _deps(ev: Evaluation, token: str) -> set[str]:
    return set(next(r for r in ev.components() if r.type == token).dependencies)


@pytest.fixture(scope="module")
def upgrading(tmp_path_factory: pytest.TempPathFactory) -> Evaluation:
    return _evaluate(tmp_path_factory.mktemp("up"), '{version: "26.05", upgradeFrom: "24.11"}')


@pytest.fixture(scope="module")
def steady(tmp_path_factory: pytest.TempPathFactory) -> Evaluation:
    return _evaluate(tmp_path_factory.mktemp("steady"), '{version: "26.05"}')


def test_slurmctld_waits_for_slurmdbd(upgrading: Evaluation) -> None:
    slurmdbd = _children(upgrading, "sunk:index:Accounting")
    assert any("StatefulSet" in u or "Deployment" in u for u in slurmdbd)
    assert slurmdbd <= _deps(upgrading, "sunk:index:Controller")


@pytest.mark.parametrize(
    "token", ["sunk:index:NodeSets", "sunk:index:RestApi", "sunk:index:Login", "sunk:index:Runtime"]
)
def test_the_rest_waits_for_slurmctld(upgrading: Evaluation, token: str) -> None:
    slurmctld = _children(upgrading, "sunk:index:Controller")
    assert any("StatefulSet" in u for u in slurmctld)
    assert slurmctld <= _deps(upgrading, token)


def test_without_upgrade_from_nothing_waits_for_another_workload(steady: Evaluation) -> None:
    slurmdbd = _children(steady, "sunk:index:Accounting")
    slurmctld = _children(steady, "sunk:index:Controller")
    assert not slurmdbd & _deps(steady, "sunk:index:Controller")
    for token in ("sunk:index:NodeSets", "sunk:index:RestApi", "sunk:index:Login", "sunk:index:Runtime"):
        assert not slurmctld & _deps(steady, token), token


def test_the_same_objects_either_way_but_the_backup_volumes(upgrading: Evaluation, steady: Evaluation) -> None:
    """Upgrading adds the two backup claims (the dump's, the state snapshot's), kept in the cluster
    when the stack drops them: they are the only way back."""
    added = {r.urn for r in upgrading.kubernetes()} - {r.urn for r in steady.kubernetes()}
    assert {u.rsplit("::", 1)[1] for u in added} == {
        "research-accounting-backup-24.11",
        "research-controller-backup-24.11",
    }
    assert {r.urn for r in steady.kubernetes()} <= {r.urn for r in upgrading.kubernetes()}
    for resource in upgrading.kubernetes():
        if resource.urn in added:
            assert "PersistentVolumeClaim" in resource.type
