"""Spec problems are data from the check that finds them to the printer: each a Problem with the
field path, the message and (read from a stack file) the line, never a sentence a path is parsed
back out of. Every assertion here reads the objects' fields; none splits a string."""

from __future__ import annotations

from pathlib import Path

import pytest

from sunk import strictyaml
from sunk.problem import Problem
from sunk.spec.errors import SpecError, load_spec
from sunk.stackfile import load_stack, parse_config

CLUSTER = """\
config:
  sunk:cluster:
    name: research
    tenant: acme
    nodesets:
      - name: cpu
        replicas: 2
        cpus: 0
    partitions:
      - name: batch
        nodesets: [cpu]
"""


def _stack(tmp_path: Path, text: str) -> SpecError:
    path = tmp_path / "Pulumi.acme-test.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_stack(str(path))
    return info.value


def test_a_field_problem_carries_its_path_message_and_stack_file_line(tmp_path: Path) -> None:
    err = _stack(tmp_path, CLUSTER)
    (problem,) = [p for p in err.items if p.path == "nodesets[0].cpus"]
    assert problem.line == 8  # `cpus: 0`, counted from the file's first line
    assert problem.message.startswith("0 is too small")
    assert not problem.by_reader


def test_a_model_rule_problem_is_under_its_models_path() -> None:
    spec = {"name": "research", "tenant": "acme", "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 4}]}
    spec["partitions"] = [{"name": "batch", "nodesets": ["gpu"]}]
    with pytest.raises(SpecError) as info:
        load_spec(spec)
    paths = {p.path for p in info.value.items}
    assert "partitions[0].nodesets[0]" in paths
    assert all(isinstance(p, Problem) and p.line is None for p in info.value.items)  # no file: no line


def test_the_yaml_readers_refusals_are_objects_with_line_and_path() -> None:
    with pytest.raises(strictyaml.StrictYamlError) as info:
        strictyaml.load("a:\n  b: yes\n  b: 1\n")
    by_line = {(p.line, p.path): p for p in info.value.items}
    assert set(by_line) == {(2, "a.b"), (3, "a")}
    assert "duplicate key 'b'" in by_line[3, "a"].message
    assert all(p.by_reader for p in info.value.items)


def test_a_refusal_of_no_field_has_a_line_and_no_path() -> None:
    with pytest.raises(strictyaml.StrictYamlError) as info:
        strictyaml.load("a: [1\n")
    (problem,) = info.value.items
    assert problem.path is None and problem.line is not None
    assert problem.message.startswith("not valid YAML")


def test_a_stack_files_refusals_and_spec_problems_reach_the_error_as_objects(tmp_path: Path) -> None:
    err = _stack(tmp_path, CLUSTER.replace("replicas: 2", "replicas: 02"))
    refused = [p for p in err.items if p.by_reader]
    assert [(p.line, p.path) for p in refused] == [(7, "config.sunk:cluster.nodesets[0].replicas")]
    assert any(p.path == "nodesets[0].cpus" and p.line == 8 for p in err.items)  # the same round


def test_secure_values_are_problems_of_their_field_with_its_line(tmp_path: Path) -> None:
    text = CLUSTER.replace("cpus: 0", "cpus: 4").replace("tenant: acme", "tenant: acme\n    labels: {a: {secure: x}}")
    err = _stack(tmp_path, text)
    (problem,) = err.items
    assert (problem.path, problem.line) == ("labels.a", 5)
    assert problem.message.startswith("encrypted values are not read here")


def test_text_pulumi_hands_a_program_is_refused_under_its_key() -> None:
    with pytest.raises(SpecError) as info:
        parse_config({"sunk:cluster": '{"name": "a", "name": "b"}'}, "test")
    (problem,) = info.value.items
    assert problem.path == "sunk:cluster" and problem.by_reader and problem.line is None


def test_printing_is_the_only_place_a_problem_becomes_text() -> None:
    assert str(Problem("nodesets[0].cpus", "too small", 8)) == "line 8, nodesets[0].cpus: too small"
    assert str(Problem("", "not a mapping")) == "(root): not a mapping"
    assert str(Problem(None, "not valid YAML: x", 3)) == "line 3: not valid YAML: x"
    assert str(Problem(None, "stack 'x': no file")) == "stack 'x': no file"
    assert Problem("cpus", "m", 4).under("nodesets[0]") == Problem("nodesets[0].cpus", "m", 4)
