"""The stack's size caps (sunk.spec.limits, sunk.strictyaml.MAX_BYTES): the largest allowed stack
validates; one more NodeSet, account or byte is refused with the field and the limit, before any
Slurm file is rendered or any object built (the caps are where bench/validate_bench.py measures
`sunk validate` in seconds)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import sunk.manifests.config as config
from sunk import strictyaml
from sunk.render import render_slurm_files
from sunk.spec import SpecError, load_spec
from sunk.spec.limits import MAX_ACCOUNTS, MAX_NODESETS
from sunk.stackfile import load_stack, parse_config
from tests.support.specs import spec_document


def _nodesets(count: int) -> dict[str, Any]:
    names = [f"n{i}" for i in range(count)]
    return spec_document(
        nodesets=[{"name": n, "cpus": 1, "memoryMib": 1024} for n in names],
        partitions=[{"name": "all", "nodesets": names, "default": True}],
    )


def _accounts(count: int) -> dict[str, Any]:
    return spec_document(accounts=[{"name": f"a{i}"} for i in range(count)])


def _refused(document: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(document)
    return info.value.problems


def test_the_caps_are_the_documented_ones() -> None:
    assert (MAX_NODESETS, MAX_ACCOUNTS, strictyaml.MAX_BYTES) == (1_000, 30_000, 1024 * 1024)
    assert strictyaml.MAX_JSON_BYTES == 2 * strictyaml.MAX_BYTES


def test_the_most_nodesets_validate() -> None:
    assert len(load_spec(_nodesets(MAX_NODESETS)).nodesets) == MAX_NODESETS


def test_one_nodeset_past_the_cap_is_refused_naming_the_field_and_the_limit() -> None:
    assert _refused(_nodesets(MAX_NODESETS + 1)) == ["nodesets: takes at most 1000 item(s), not 1001"]


def test_the_most_accounts_validate() -> None:
    assert len(load_spec(_accounts(MAX_ACCOUNTS)).accounts) == MAX_ACCOUNTS


def test_one_account_past_the_cap_is_refused_naming_the_field_and_the_limit() -> None:
    assert _refused(_accounts(MAX_ACCOUNTS + 1)) == ["accounts: takes at most 30000 item(s), not 30001"]


def test_a_stack_past_a_cap_is_refused_before_any_file_is_rendered(monkeypatch: pytest.MonkeyPatch) -> None:
    renders: Counter[str] = Counter()
    original = render_slurm_files

    def counted(*args: Any, **kwargs: Any) -> dict[str, str]:
        renders["render"] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(config, "render_slurm_files", counted)
    with pytest.raises(SpecError, match=r"nodesets: takes at most 1000 item\(s\), not 1001"):
        parse_config({"sunk:cluster": _nodesets(MAX_NODESETS + 1), "sunk:operator": True}, "stack")
    assert renders == {}


def _stack_file(tmp_path: Path, size: int) -> Path:
    """acme's smallest stack, padded with a comment to exactly `size` bytes."""
    head = "config:\n  sunk:cluster:\n    name: research\n    tenant: acme\n"
    head += "    nodesets: [{name: cpu, cpus: 4, memoryMib: 4096}]\n"
    head += "    partitions: [{name: batch, nodesets: [cpu], default: true}]\n"
    text = head + "#" + "x" * (size - len(head) - 2) + "\n"
    path = tmp_path / "Pulumi.acme-dev.yaml"
    path.write_text(text)
    assert path.stat().st_size == size
    return path


def test_a_stack_file_of_the_most_bytes_validates(tmp_path: Path) -> None:
    assert load_stack(str(_stack_file(tmp_path, strictyaml.MAX_BYTES))).spec.name == "research"


def test_a_stack_file_one_byte_past_the_cap_is_refused_naming_the_limit(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"\(file\): over 1048576 bytes"):
        load_stack(str(_stack_file(tmp_path, strictyaml.MAX_BYTES + 1)))


def test_the_largest_stack_file_reaches_the_program_as_pulumis_longer_json(tmp_path: Path) -> None:
    """30,000 accounts in a flow sequence fit the file's 1 MiB; the JSON text Pulumi hands the
    program for them is longer (every key and string quoted) and must be read there too."""
    chain = ", ".join(["{name: a0}", *(f"{{name: a{i}, parent: a{i - 1}}}" for i in range(1, MAX_ACCOUNTS))])
    head = "config:\n  sunk:cluster:\n    name: research\n    tenant: acme\n"
    head += "    nodesets: [{name: cpu, cpus: 4, memoryMib: 4096}]\n"
    head += "    partitions: [{name: batch, nodesets: [cpu], default: true}]\n"
    path = tmp_path / "Pulumi.acme-dev.yaml"
    path.write_text(f"{head}    accounts: [{chain}]\n")
    assert path.stat().st_size <= strictyaml.MAX_BYTES
    text = json.dumps(strictyaml.load(path.read_text())["config"]["sunk:cluster"], sort_keys=True)
    assert strictyaml.MAX_BYTES < len(text) <= strictyaml.MAX_JSON_BYTES
    spec, _ = parse_config({"sunk:cluster": text}, "stack")
    assert len(spec.accounts) == MAX_ACCOUNTS


def test_pulumis_text_past_the_cap_is_refused_naming_the_limit() -> None:
    text = '{"name": "research"' + " " * strictyaml.MAX_JSON_BYTES + "}"
    with pytest.raises(
        SpecError, match=r"\(file\): 2097\d+ bytes; Pulumi's JSON text of a setting may hold at most 2097152"
    ):
        parse_config({"sunk:cluster": text}, "stack")
