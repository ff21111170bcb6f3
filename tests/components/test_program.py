"""The Pulumi program (__main__.py): bad config fails before anything is registered, with the
field-named error; the exports are what a user needs."""

from __future__ import annotations

from pathlib import Path

import pytest
from sunk.components.offline import Evaluation, ProgramFailed, evaluate, stack_config
from sunk.components.render import default_program

from tests.support.stacks import FIXTURE_STACKS


def _with(tmp_path: Path, stack: str, old: str, new: str) -> dict[str, str]:
    text = (FIXTURE_STACKS / f"Pulumi.{stack}.yaml").read_text()
    assert old in text
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(text.replace(old, new))
    return stack_config(path)[0]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("cpus: 4", "cpus: 0", "nodesets[0].cpus"),
        ("tenant: acme", "tenant: Acme", "tenant"),
        ("nodesets: [gpu]", "nodesets: [tpu]", "partitions[1].nodesets[0]"),
        ("name: research", "name: {secure: v1:abc}", "encrypted values are not read here"),
    ],
)
def test_bad_config_fails_before_any_resource(tmp_path: Path, old: str, new: str, message: str) -> None:
    config = _with(tmp_path, "acme-dev", old, new)
    with pytest.raises(ProgramFailed) as failed:
        evaluate(default_program(), stack="acme-dev", config=config)
    assert message in str(failed.value)
    assert failed.value.registrations == []


def test_missing_cluster_config_names_the_key() -> None:
    with pytest.raises(ProgramFailed, match="sunk:cluster: missing"):
        evaluate(default_program(), stack="empty-dev", config={})


def test_exports(evaluations: dict[str, Evaluation]) -> None:
    assert evaluations["acme-dev"].plain_outputs() == {
        "clusterName": "research",
        "controllerHost": "research-controller-0.research-controller.acme-research.svc.cluster.local",
        "loginEndpoint": "research-login.acme-research.svc.cluster.local:22",
        "namespace": "acme-research",
        "slurmrestdUrl": "http://research-restapi.acme-research.svc.cluster.local:6820",
        "slurmRelease": "26.05",
    }
    # A LoadBalancer's address exists only once deployed.
    assert evaluations["acme-prod"].plain_outputs()["loginEndpoint"] == "<pending>:22"
    assert evaluations["globex-prod"].plain_outputs()["namespace"] == "globex-slurm"


def test_operator_only_where_the_stack_asks(evaluations: dict[str, Evaluation]) -> None:
    has = {s: any(r.type == "sunk:index:Operator" for r in evaluations[s].registrations) for s in evaluations}
    assert has == {"acme-dev": True, "acme-prod": True, "globex-dev": False, "globex-prod": False, "library": True}


def _release_config(tmp_path: Path, slurm: str) -> dict[str, str]:
    """acme-dev with its `slurm:` line replaced (the fixture pins 26.05)."""
    return _with(tmp_path, "acme-dev", 'slurm: {version: "26.05"}', f"slurm: {slurm}")


@pytest.mark.parametrize(
    ("previous", "slurm", "runs"),
    [
        (None, '{version: "24.11"}', "24.11"),  # a first deploy
        ({"clusterName": "research"}, '{version: "24.11"}', "24.11"),  # by a sunk that didn't export it
        ({"slurmRelease": "26.05"}, '{version: "26.05"}', "26.05"),  # the same release again
        ({"slurmRelease": "26.05"}, "{}", "26.05"),  # the default, which is the release it ran
        ({"slurmRelease": "24.11"}, '{version: "26.05", upgradeFrom: "24.11"}', "26.05"),  # an announced upgrade
        ({"slurmRelease": "26.05"}, '{version: "26.05", upgradeFrom: "24.11"}', "26.05"),  # that upgrade again
        ({"slurmRelease": "26.05"}, '{version: "24.11", upgradeFrom: "24.11"}', "24.11"),  # an announced set-back
        ({"slurmRelease": "24.11"}, '{version: "24.11", upgradeFrom: "24.11"}', "24.11"),  # that set-back again
    ],
)
def test_a_release_change_the_stack_announces_deploys(
    tmp_path: Path, previous: dict[str, str] | None, slurm: str, runs: str
) -> None:
    config = _release_config(tmp_path, slurm)
    ev = evaluate(default_program(), stack="acme-dev", config=config, previous_outputs=previous)
    assert ev.kubernetes()
    assert ev.plain_outputs()["slurmRelease"] == runs


@pytest.mark.parametrize(
    ("previous", "slurm", "way"),
    [
        # The default moved under a stack that never pinned its release.
        ("24.11", "{}", 'to upgrade, announce it: slurm: {version: "26.05", upgradeFrom: "24.11"}'),
        ("24.11", '{version: "26.05"}', 'to upgrade, announce it: slurm: {version: "26.05", upgradeFrom: "24.11"}'),
        # A plain set-back.
        (
            "26.05",
            '{version: "24.11"}',
            'go back after a failed upgrade, say so: slurm: {version: "24.11", upgradeFrom: "24.11"}',
        ),
        # upgradeFrom naming a release the previous deployment didn't run.
        ("24.11", '{version: "26.05", upgradeFrom: "26.05"}', "to upgrade, announce it"),
    ],
)
def test_a_release_change_nobody_announced_is_refused_before_any_resource(
    tmp_path: Path, previous: str, slurm: str, way: str
) -> None:
    config = _release_config(tmp_path, slurm)
    with pytest.raises(ProgramFailed) as failed:
        evaluate(default_program(), stack="acme-dev", config=config, previous_outputs={"slurmRelease": previous})
    message = str(failed.value)
    assert failed.value.registrations == []
    assert "slurm.version" in message
    assert f"the previous deployment ran ({previous!r}" in message
    assert "slurm.upgradeFrom is" in message
    assert f'To keep running {previous}, set slurm: {{version: "{previous}"}}' in message
    assert way in message
