"""Stack files: what sunk reads of stacks/Pulumi.<stack>.yaml, and what it refuses there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from sunk.spec import SpecError
from sunk.stackfile import load_stack, parse_config, stack_path
from tests.support.stacks import FIXTURE_STACKS

CLUSTER = {
    "name": "research",
    "tenant": "acme",
    "nodesets": [{"name": "cpu", "cpus": 4, "memoryMib": 4096}],
    "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
}


def write(tmp_path: Path, text: str, name: str = "acme-test") -> Path:
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(text)
    return path


def problems_of(path: Path) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_stack(str(path))
    return info.value.problems


def test_a_valid_stack_file(tmp_path: Path) -> None:
    path = write(tmp_path, yaml.safe_dump({"config": {"sunk:cluster": CLUSTER, "sunk:operator": "true"}}))
    stack = load_stack(str(path))
    assert stack.name == "acme-test" and stack.deploy_operator and stack.spec.name == "research"


def test_structured_config_as_json_text() -> None:
    # Pulumi hands structured config to the program as JSON text.
    spec, operator = parse_config({"sunk:cluster": json.dumps(CLUSTER)}, "pulumi")
    assert spec.tenant == "acme" and operator is None


@pytest.mark.parametrize(
    ("config", "path", "valid"),
    [
        (
            {"sunk:cluster": {**CLUSTER, "accounting": {"external": {"host": "db", "password": {"secure": "v1:abc"}}}}},
            "accounting.external.password",
            "reference a Kubernetes Secret (passwordSecret, bindPasswordSecret, existingSecret) instead",
        ),
        (
            {"sunk:cluster": {**CLUSTER, "auth": {"ldap": {"bindPassword": {"secure": "v1:x"}}}}},
            "auth.ldap.bindPassword",
            "encrypted values are not read here",
        ),
        ({"sunk:cluster": CLUSTER, "sunk:clustr": {}}, "sunk:clustr", "known: sunk:cluster, sunk:operator"),
        ({"sunk:operator": True}, "sunk:cluster", "the stack must define the cluster"),
    ],
    ids=["secure-db-password", "secure-ldap-password", "unknown-setting", "no-cluster"],
)
def test_stack_config_refused(tmp_path: Path, config: dict[str, object], path: str, valid: str) -> None:
    problems = problems_of(write(tmp_path, yaml.safe_dump({"config": config})))
    assert len(problems) == 1
    assert problems[0].partition(": ")[0] == path and valid in problems[0]


def test_secure_values_all_reported_and_never_echoed(tmp_path: Path) -> None:
    cluster = {**CLUSTER, "labels": {"a": {"secure": "v1:SECRETTEXT"}}, "login": {"x": [{"secure": "v1:OTHER"}]}}
    problems = problems_of(write(tmp_path, yaml.safe_dump({"config": {"sunk:cluster": cluster}})))
    assert [p.partition(":")[0] for p in problems] == ["labels.a", "login.x[0]"]
    assert not any("SECRETTEXT" in p or "OTHER" in p for p in problems)


def test_spec_problems_carry_the_file_name(tmp_path: Path) -> None:
    path = write(tmp_path, yaml.safe_dump({"config": {"sunk:cluster": {**CLUSTER, "name": "Bad"}}}))
    with pytest.raises(SpecError) as info:
        load_stack(str(path))
    assert info.value.source == str(path)
    assert info.value.problems[0].startswith("name: 'Bad' is not valid")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("config: [1, 2]\n", "config: the stack file needs a `config:` mapping"),
        ("encryptionsalt: x\n", "config: the stack file needs a `config:` mapping"),
        ("config: {sunk:cluster: [unclosed\n", "line 2: not valid YAML"),
        ("config:\n  sunk:cluster: 42\n", "(root): expected a mapping of cluster settings, got int"),
    ],
    ids=["config-not-mapping", "no-config", "bad-yaml", "cluster-not-mapping"],
)
def test_malformed_stack_file(tmp_path: Path, text: str, expected: str) -> None:
    problems = problems_of(write(tmp_path, text))
    assert problems[0].startswith(expected), problems


def test_unknown_stack_lists_the_known_ones(tmp_path: Path) -> None:
    write(tmp_path, "config: {}\n", "globex-dev")
    with pytest.raises(SpecError) as info:
        load_stack("nope-dev", tmp_path)
    assert "stacks: globex-dev" in info.value.problems[0]


def test_stack_path_accepts_names_and_files(tmp_path: Path) -> None:
    assert stack_path("acme-dev", tmp_path) == tmp_path / "Pulumi.acme-dev.yaml"
    assert stack_path("x/Pulumi.y.yaml", FIXTURE_STACKS) == Path("x/Pulumi.y.yaml")
