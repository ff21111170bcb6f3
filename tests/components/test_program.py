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
    }
    # A LoadBalancer's address exists only once deployed.
    assert evaluations["acme-prod"].plain_outputs()["loginEndpoint"] == "<pending>:22"
    assert evaluations["globex-prod"].plain_outputs()["namespace"] == "globex-slurm"


def test_operator_only_where_the_stack_asks(evaluations: dict[str, Evaluation]) -> None:
    has = {s: any(r.type == "sunk:index:Operator" for r in evaluations[s].registrations) for s in evaluations}
    assert has == {"acme-dev": True, "acme-prod": True, "globex-dev": False, "globex-prod": False, "library": True}
