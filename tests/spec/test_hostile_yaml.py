"""Hostile YAML (issue 12, class "hostile YAML" and "duplicate keys and loose types"): every case is
refused by the stack loader with a line and a field path, before any spec or file exists; none
crashes, hangs or grows memory, through the library and through `sunk validate`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sunk import strictyaml
from sunk.spec import SpecError
from sunk.stackfile import load_stack, parse_config

GOOD = """config:
  sunk:cluster:
    name: research
    tenant: acme
    nodesets:
      - name: cpu
        cpus: 4
        memoryMib: 4096
    partitions:
      - {name: batch, nodesets: [cpu], default: true, maxTime: 12:00:00}
"""

LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(20)
)
"""A "billion laughs" file of under 1 KB: 9 * 4**20 (about 10**13) strings if expanded."""

CASES = {
    "self-referencing alias": ("config: &c\n  sunk:cluster: *c\n", "line 2: aliases (*c) are not accepted"),
    "billion laughs": (LAUGHS, "line 2: aliases (*a) are not accepted"),
    "deep nesting": ("config:\n  sunk:cluster: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 32 levels"),
    "duplicate key": (
        GOOD.replace("        cpus: 4\n", "        cpus: 4\n        cpus: 64\n"),
        "line 8, config.sunk:cluster.nodesets[0]: duplicate key 'cpus' (first at line 7)",
    ),
    "yaml 1.1 boolean as a number": (
        GOOD.replace("cpus: 4", "cpus: yes"),
        "line 7, config.sunk:cluster.nodesets[0].cpus: 'yes' is a boolean in YAML 1.1 but a string in YAML 1.2",
    ),
    "yaml 1.1 boolean as a boolean": (
        GOOD.replace("default: true", "default: on"),
        "config.sunk:cluster.partitions[0].default: 'on' is a boolean in YAML 1.1",
    ),
    "merge key": ("base: &b {cpus: 4}\nconfig:\n  <<: *b\n", "aliases (*b) are not accepted"),
    "non-string key": ("config:\n  1: x\n", "line 2, config: keys must be strings, not '1'"),
}


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "Pulumi.acme-hostile.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_yaml_is_refused_with_the_line_and_field(tmp_path: Path, case: str) -> None:
    text, expected = CASES[case]
    with pytest.raises(SpecError) as info:
        load_stack(str(_write(tmp_path, text)))
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_yaml_12_scalars_where_yaml_11_surprises() -> None:
    doc = strictyaml.load("t: 12:00:00\nmode: 0755\nhex: 0x1f\noct: 0o17\nquoted: 'yes'\nflag: false\nnothing: ~\n")
    # 12:00:00 is a time limit, not 43200 (YAML 1.1's base 60); 0755 is decimal in YAML 1.2.
    assert doc == {"t": "12:00:00", "mode": 755, "hex": 31, "oct": 15, "quoted": "yes", "flag": False, "nothing": None}


def test_the_partition_time_limit_reads_as_slurm_time(tmp_path: Path) -> None:
    stack = load_stack(str(_write(tmp_path, GOOD)))
    assert stack.spec.partitions[0].max_time == "12:00:00"


def test_files_over_the_size_bound_are_refused_unread(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD + "# " + "x" * strictyaml.MAX_BYTES + "\n")
    with pytest.raises(SpecError, match=r"over 1048576 bytes; a stack file is configuration"):
        load_stack(str(path))


@pytest.mark.parametrize("value", ["yes", "True ", "1", [False], 1])
def test_sunk_operator_must_be_a_boolean_or_settings(value: object) -> None:
    config = {"sunk:cluster": '{"name": "x"}', "sunk:operator": value}
    with pytest.raises(SpecError, match=r"sunk:operator: .* is neither a boolean \(true, false\) nor the operator's"):
        parse_config(config, "test")


def test_sunk_operator_settings_are_validated_with_their_field_names() -> None:
    config = {
        "sunk:cluster": '{"name": "x"}',
        "sunk:operator": '{"policy": {"hostPaths": ["/data/"], "imagePrefix": ["x/"]}}',
    }
    with pytest.raises(SpecError) as err:
        parse_config(config, "test")
    text = str(err.value)
    assert "sunk:operator.policy.hostPaths[0]: '/data/' is not valid: a normalized absolute path" in text
    assert "sunk:operator.policy.imagePrefix: unknown field; did you mean imagePrefixes?" in text
    assert "tenant: required field is missing" in text  # the cluster's problems in the same report


def test_structured_config_text_is_read_strictly() -> None:
    # What Pulumi hands the program is JSON text; duplicate keys in it are refused too.
    with pytest.raises(SpecError, match=r"sunk:cluster: line 1, \(top\): duplicate key 'name'"):
        parse_config({"sunk:cluster": '{"name": "a", "name": "b"}'}, "test")


@pytest.mark.parametrize("case", ["self-referencing alias", "billion laughs", "deep nesting", "duplicate key"])
def test_validate_prints_no_traceback_and_ends(tmp_path: Path, case: str) -> None:
    path = _write(tmp_path, CASES[case][0])
    # The timeout only catches a hang (the refusal takes well under a second): no speed is asserted.
    done = subprocess.run(
        [sys.executable, "-m", "sunk", "validate", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and CASES[case][1] in done.stderr, done.stderr
