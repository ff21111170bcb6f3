"""Every problem in one round: field errors do not hide the cross-field rules that can still run;
a rule that needs an invalid field says so and is counted; no pydantic wording reaches a user;
each problem from a stack file names its YAML line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sunk.spec.errors import SpecError, load_spec
from sunk.stackfile import load_stack

from .test_invalid import CASES, patched

CLUSTER: dict[str, Any] = {
    "name": "research",
    "tenant": "acme",
    "nodesets": [{"name": "cpu", "cpus": 4, "memoryMib": 8192}],
    "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
}
LDAP = {"uris": ["ldaps://ldap.example.com:636"], "baseDn": "dc=example,dc=com"}


def _error(data: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec(data)
    return info.value


def test_a_too_long_name_does_not_hide_the_reserved_namespace() -> None:
    err = _error({**CLUSTER, "name": "x" * 31, "namespace": "kube-system"})
    assert [p.split(":")[0] for p in err.problems] == ["name", "namespace"]
    assert "is reserved" in err.problems[1]
    # The rules that need the name (pod names, the namespace default) are counted, not guessed.
    (note,) = err.notes
    assert note.endswith("could not run until name is fixed; validate again after fixing it")


def test_a_bad_ldap_uri_does_not_hide_the_missing_bind_password() -> None:
    ldap = {**LDAP, "uris": ["http://ldap.example.com"], "bindDn": "cn=reader,dc=example,dc=com"}
    err = _error({**CLUSTER, "auth": {"ldap": ldap}})
    paths = [p.split(":")[0] for p in err.problems]
    assert paths == ["auth.ldap.uris[0]", "auth.ldap.bindPasswordSecret"]
    assert err.problems[1] == "auth.ldap.bindPasswordSecret: required when bindDn is set"


def test_an_invalid_default_does_not_hide_the_partitions_other_problems() -> None:
    data = {
        **CLUSTER,
        "qos": [{"name": "high", "preempt": ["nope"]}],
        "partitions": [
            {"name": "batch", "nodesets": ["cpu", "gpu"], "default": "yes", "allowQos": ["gold"]},
            {"name": "batch", "nodesets": ["cpu"]},
        ],
    }
    err = _error(data)
    assert err.problems == [
        "partitions[0].default: true or false is required, not text ('yes')",
        "partitions[1].name: 'batch' repeats partitions[0]",
        "partitions[0].nodesets[1]: 'gpu' is not a nodeset; known: cpu",
        "partitions[0].allowQos[0]: 'gold' is not a QOS; known: high, normal",
        "qos[0].preempt[0]: 'nope' is not a QOS; known: high, normal",
    ]
    (note,) = err.notes  # the one-default rule reads every partition's default
    assert note.startswith("1 more check could not run until partitions[0].default is fixed")


def test_a_valid_spec_has_no_notes_and_a_rule_error_alone_runs_every_rule() -> None:
    err = _error({**CLUSTER, "partitions": [{"name": "batch", "nodesets": ["gpu"], "default": True}]})
    assert err.notes == []
    assert "partitions[0].nodesets[0]: 'gpu' is not a nodeset; known: cpu" in err.problems


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"nodesets[0].gpus": 8},
            "nodesets[0].gpus: a mapping of settings is required, not a whole number (8); required: type, count;",
        ),
        (
            {"nodesets[0].features": "gpu"},
            "nodesets[0].features: a list is required, not text ('gpu'); for one item write [gpu]",
        ),
        (
            {"login": {"serviceType": "Loadbalancer"}},
            "login.serviceType: 'Loadbalancer' is not valid; give 'LoadBalancer', 'NodePort' or 'ClusterIP'; "
            "did you mean LoadBalancer?",
        ),
        ({"nodesets[0].cpus": 0}, "nodesets[0].cpus: 0 is too small; must be greater than 0"),
        ({"nodesets": []}, "nodesets: needs at least 1 item(s), not 0"),
    ],
)
def test_messages_say_what_was_given_and_what_is_valid(change: dict[str, Any], expected: str) -> None:
    err = _error(patched(change) if "[" in next(iter(change)) else {**CLUSTER, **change})
    assert any(p.startswith(expected) for p in err.problems), err.problems


def test_no_pydantic_wording_in_any_refusal() -> None:
    """Every invalid case of the spec's table: none says "Input should be" or "valid dictionary"."""
    for case in CASES:
        with pytest.raises(SpecError) as info:
            load_spec(patched(case.changes))
        for text in [*info.value.problems, *info.value.notes]:
            assert "Input should" not in text and "valid dictionary" not in text, (case.id, text)


def _stack(tmp_path: Path, body: str) -> str:
    path = tmp_path / "Pulumi.acme-dev.yaml"
    path.write_text(body)
    return str(path)


STACK = """config:
  sunk:cluster:
    name: research
    tenant: acme
    extraConfig:
      files:
        oci.conf: "x"
    nodesets:
      - name: cpu
        cpus: 4
        memoryMib: 8192
        gpus: 8
    partitions:
      - name: batch
        nodesets: [cpu, gpu]
        default: true
    containers: {enabled: true}
"""


def test_problems_name_the_stack_files_line(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        load_stack(_stack(tmp_path, STACK))
    lines = info.value.lines
    assert lines[0].startswith("line 7, extraConfig.files.oci.conf: containers.enabled renders oci.conf")
    assert lines[1].startswith("line 12, nodesets[0].gpus: a mapping of settings is required")
    assert lines[2] == "line 15, partitions[0].nodesets[1]: 'gpu' is not a nodeset; known: cpu"
    assert info.value.problems[2] == "partitions[0].nodesets[1]: 'gpu' is not a nodeset; known: cpu"  # no line
    assert "line 12, nodesets[0].gpus" in str(info.value)  # what the Pulumi program raises


def test_a_misspelt_config_key_gets_a_did_you_mean(tmp_path: Path) -> None:
    body = STACK.replace("sunk:cluster:", "sunk:clusters:")
    with pytest.raises(SpecError) as info:
        load_stack(_stack(tmp_path, body))
    assert info.value.lines == [
        "line 2, sunk:clusters: unknown setting; did you mean sunk:cluster? known: sunk:cluster, sunk:operator, "
        "sunk:allowStateReplacement, sunk:keys"
    ]


def test_a_refused_yaml_scalar_does_not_hide_the_rest(tmp_path: Path) -> None:
    """`default: yes` (a YAML 1.1 boolean, refused) is reported with the spec's own problems; the
    rule that reads it waits and is counted, and nothing reports it a second time."""
    body = STACK.replace("default: true", "default: yes")
    with pytest.raises(SpecError) as info:
        load_stack(_stack(tmp_path, body))
    lines = info.value.lines
    assert lines[0].startswith("line 16, config.sunk:cluster.partitions[0].default: 'yes' is a boolean in YAML 1.1")
    assert [line.split(":")[0] for line in lines[1:]] == [
        "line 7, extraConfig.files.oci.conf",
        "line 12, nodesets[0].gpus",
        "line 15, partitions[0].nodesets[1]",
    ]
    assert info.value.notes[0].endswith(
        "until nodesets[0].gpus, partitions[0].default are fixed; validate again after fixing them"
    )


def test_a_refused_scalar_alone_is_still_an_error(tmp_path: Path) -> None:
    good = (
        STACK.replace("        gpus: 8\n", "").replace("[cpu, gpu]", "[cpu]").replace("containers: {enabled: true}", "")
    )
    with pytest.raises(SpecError) as info:
        load_stack(_stack(tmp_path, good.replace("oci.conf", "mpi.conf").replace("default: true", "default: no")))
    assert [line.split(",")[0] for line in info.value.lines] == ["line 15"]  # the one problem


def test_where_keys_are_made_is_pulumi_or_cluster(tmp_path: Path) -> None:
    body = STACK.replace("sunk:cluster:", "sunk:keys: vault\n  sunk:cluster:", 1)
    with pytest.raises(SpecError) as info:
        load_stack(_stack(tmp_path, body))
    assert any("sunk:keys: 'vault' is not one of pulumi, cluster" in line for line in info.value.lines), (
        info.value.lines
    )
