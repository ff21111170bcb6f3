"""Hostile YAML (the defect classes "hostile YAML" and "duplicate keys and loose types"): every case is
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
    "self-referencing alias": (
        "config: &c\n  sunk:cluster: *c\n",
        "line 2, config.sunk:cluster: aliases (*c) are not accepted",
    ),
    "billion laughs": (LAUGHS, "line 2, b[0]: aliases (*a) are not accepted"),
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
    "merge key": ("base: &b {cpus: 4}\nconfig:\n  <<: *b\n", "line 3, config: merge keys (<<) are not accepted"),
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
    doc = strictyaml.load("t: 12:00:00\nmode: 0o755\nhex: 0x1f\noct: 0o17\nquoted: 'yes'\nflag: false\nnothing: ~\n")
    # 12:00:00 is a time limit, not 43200 (YAML 1.1's base 60).
    assert doc == {"t": "12:00:00", "mode": 493, "hex": 31, "oct": 15, "quoted": "yes", "flag": False, "nothing": None}


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


READ_UNFAITHFULLY = {
    # An explicit tag makes a scalar mean what the tag's constructor decides, not what a reader sees.
    "bool tag on text": ('a: 1\nb: !!bool "yes"\n', "line 2, b: explicit tag 'tag:yaml.org,2002:bool' is not accepted"),
    "null tag on a type": ('type: !!null "ClusterIP"\n', "line 1, type: explicit tag 'tag:yaml.org,2002:null'"),
    "int tag on a non-ASCII digit": ('n: !!int "\u0664"\n', "line 1, n: explicit tag 'tag:yaml.org,2002:int'"),
    "int tag on letters": ('n: !!int "abc"\n', "explicit tag 'tag:yaml.org,2002:int'"),
    "float tag": ("n: !!float 1\n", "explicit tag 'tag:yaml.org,2002:float'"),
    "timestamp tag": ("n: !!timestamp 2001-12-14\n", "explicit tag 'tag:yaml.org,2002:timestamp'"),
    "binary tag": ("n: !!binary aGk=\n", "explicit tag 'tag:yaml.org,2002:binary'"),
    "local tag on a mapping": ("a:\n  b: !custom {c: 1}\n", "line 2, a.b: explicit tag '!custom'"),
    "non-specific tag": ("a: ! text\n", "line 1, a: explicit tag '!'"),
    "verbatim tag": ("a: !<tag:yaml.org,2002:str> x\n", "explicit tag 'tag:yaml.org,2002:str'"),
    "document tag": ("--- !!map\na: 1\n", "line 1, (top): explicit tag 'tag:yaml.org,2002:map'"),
    "leading zero (octal to a reader)": ("a: 1\nmode: 0440\n", "line 2, mode: '0440' has a leading zero"),
    "negative leading zero": ("n: -07\n", "'-07' has a leading zero"),
    "bad octal under a tag": ('mode: !!int "0o9"\n', "line 1, mode: explicit tag"),
    "5000-digit integer": ("n: " + "9" * 5000 + "\n", "is beyond a 64-bit integer"),
    "2**63": ("n: 9223372036854775808\n", "is beyond a 64-bit integer"),
    "raw NUL": ("a: 1\nb: x\x00y\n", "line 2: raw control character U+0000"),
    "raw C1 byte": ("a: x\x85y\n", "line 1: raw control character U+0085"),
    "raw line separator": ("a: 1\n\nb: x\u2028y\n", "line 3: raw control character U+2028"),
    "raw escape": ("a: '\x1b[31m'\n", "raw control character U+001B"),
}


@pytest.mark.parametrize("case", sorted(READ_UNFAITHFULLY))
def test_what_the_loader_cannot_read_faithfully_is_refused_with_its_line(case: str) -> None:
    text, expected = READ_UNFAITHFULLY[case]
    with pytest.raises(strictyaml.StrictYamlError) as info:
        strictyaml.load(text)
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_every_tag_in_a_file_is_reported_in_one_round() -> None:
    with pytest.raises(strictyaml.StrictYamlError) as info:
        strictyaml.load('a: !!bool "yes"\nb: !!int "4"\nc: !x z\n')
    assert [p.split(":")[0] for p in info.value.problems] == ["line 1, a", "line 2, b", "line 3, c"]


def test_the_largest_int64_still_reads() -> None:
    assert strictyaml.load("n: 9223372036854775807\nm: -9223372036854775808\nz: 0\n") == {
        "n": 2**63 - 1,
        "m": -(2**63),
        "z": 0,
    }


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"config:\n  a: \xff\xfe\n", "line 2: byte 0xff is not UTF-8"),
        (b"config:\n  a: 1\n  b: caf\xe9\n", "line 3: byte 0xe9 is not UTF-8"),
        (b"config:\n  a: \x00\n", "line 2: raw control character U+0000"),
        (b"config:\n  a: \xc2\x85\n", "line 2: raw control character U+0085"),
    ],
)
def test_bytes_that_are_not_text_give_a_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes, expected: str
) -> None:
    from sunk.cli import main

    path = tmp_path / "Pulumi.acme-bytes.yaml"
    path.write_bytes(data)
    with pytest.raises(SpecError) as info:
        load_stack(str(path))
    assert any(expected in p for p in info.value.problems), info.value.problems
    assert main(["validate", str(path)]) == 1
    _, err = capsys.readouterr()
    assert expected in err and "Traceback" not in err


def test_a_utf8_bom_and_crlf_lines_still_read(tmp_path: Path) -> None:
    path = tmp_path / "Pulumi.acme-bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + GOOD.replace("\n", "\r\n").encode())
    assert load_stack(str(path)).spec.name == "research"
