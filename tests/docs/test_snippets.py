"""Every stack snippet in docs/ and the README validates with the loader `sunk validate` and
`pulumi up` use (sunk.stackfile), so an example a reader copies is a stack sunk accepts.

A snippet is a ```yaml block whose fence carries a title:
- `title="Pulumi.<stack>.yaml"`: a whole stack file, validated as it is;
- `title="sunk:cluster fragment"`: part of the `sunk:cluster` mapping, merged into a minimal
  cluster (BASE: its top-level keys replace BASE's; NodeSets without partitions get one partition
  over all of them) and validated with it. It may also be written as in a stack's `config:`,
  under `sunk:cluster:` (and `sunk:operator:`, taken as it is).
Other yaml blocks (manifests, Pulumi.yaml, outputs) are not stacks and carry no such title; a
block that holds `sunk:cluster:` must carry one."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sunk import strictyaml
from sunk.spec.errors import SpecError
from sunk.stackfile import CLUSTER_KEY, OPERATOR_KEY, load_stack, parse_config

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)$")
STACK_TITLE = re.compile(r'title="(?P<file>Pulumi\.[a-z0-9][-a-z0-9]*\.yaml)"')
FRAGMENT_TITLE = 'title="sunk:cluster fragment"'

BASE: dict[str, Any] = {
    "name": "example",
    "tenant": "docs",
    "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 2, "memoryMib": 2048}],
    "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
}
"""The smallest valid cluster a fragment completes."""


@dataclass(frozen=True)
class Snippet:
    source: str
    """`docs/how-to/gpu-nodesets.md:3`: the file and the fence's line."""
    info: str
    text: str

    @property
    def stack_file(self) -> str | None:
        match = STACK_TITLE.search(self.info)
        return match.group("file") if match else None

    @property
    def fragment(self) -> bool:
        return FRAGMENT_TITLE in self.info


def snippets(markdown: str, name: str) -> list[Snippet]:
    """The yaml blocks of a Markdown text (fenced with ``` or ~~~, indented or not)."""
    found: list[Snippet] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        fence, indent, info = match.group("fence"), len(match.group("indent")), match.group("info").strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        if info.split(" ", 1)[0] in ("yaml", "yml"):
            found.append(Snippet(f"{name}:{i + 1}", info, "\n".join(body) + "\n"))
        i = j + 1
    return found


def config(fragment: Any) -> dict[str, Any]:
    """The stack config a fragment stands for: `sunk:cluster` merged into BASE, and
    `sunk:operator` when the fragment is written under config keys."""
    if not isinstance(fragment, dict):
        raise AssertionError(f"a sunk:cluster fragment is a mapping, not {type(fragment).__name__}")
    if fragment and set(fragment) <= {CLUSTER_KEY, OPERATOR_KEY}:
        return {**fragment, CLUSTER_KEY: merged(fragment.get(CLUSTER_KEY) or {})}
    return {CLUSTER_KEY: merged(fragment)}


def merged(fragment: Any) -> dict[str, Any]:
    """BASE with the fragment's top-level keys in place of its own."""
    if not isinstance(fragment, dict):
        raise AssertionError(f"a sunk:cluster fragment is a mapping, not {type(fragment).__name__}")
    cluster = {**BASE, **fragment}
    if "nodesets" in fragment and "partitions" not in fragment:
        names = [n.get("name") for n in fragment["nodesets"] if isinstance(n, dict)]
        cluster["partitions"] = [{"name": "batch", "nodesets": names, "default": True}]
    return cluster


def _sources() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _all() -> list[Snippet]:
    return [s for path in _sources() for s in snippets(path.read_text(), path.relative_to(ROOT).as_posix())]


MARKED = [s for s in _all() if s.stack_file or s.fragment]


def validate(snippet: Snippet, tmp_path: Path) -> None:
    """Raises SpecError (or AssertionError) naming what the loader refused."""
    if snippet.stack_file:
        path = tmp_path / snippet.stack_file
        path.write_text(snippet.text)
        load_stack(str(path))
        return
    try:
        fragment = strictyaml.load(snippet.text)
    except strictyaml.StrictYamlError as err:
        raise SpecError(err.items, snippet.source) from None
    parse_config(config(fragment), snippet.source)


@pytest.mark.parametrize("snippet", MARKED, ids=[s.source for s in MARKED])
def test_the_snippet_validates(snippet: Snippet, tmp_path: Path) -> None:
    try:
        validate(snippet, tmp_path)
    except SpecError as err:
        pytest.fail(f"{snippet.source}: the stack does not validate:\n{err}")


def test_the_docs_hold_stack_snippets() -> None:
    """The parametrized test above has something to check (an empty set would skip it)."""
    assert any(s.fragment for s in MARKED)


def test_every_block_holding_a_stack_is_marked() -> None:
    """A stack written without the title would go unchecked."""
    unmarked = [
        s.source for s in _all() if not (s.stack_file or s.fragment) and re.search(r"^\s*sunk:cluster:", s.text, re.M)
    ]
    assert not unmarked, f'mark these ```yaml blocks title="Pulumi.<stack>.yaml" or "sunk:cluster fragment": {unmarked}'


SAMPLE = """\
Some text.

```yaml title="Pulumi.docs-dev.yaml"
config:
  sunk:cluster:
    name: example
    tenant: docs
    nodesets: [{name: cpu, replicas: 1, cpus: 2, memoryMib: 2048}]
    partitions: [{name: batch, nodesets: [cpu]}]
```

1. A list item with a fragment:

    ```yaml title="sunk:cluster fragment"
    nodesets:
      - {name: gpu, replicas: 1, cpus: 4, memoryMib: 4096, gpus: {type: h100, count: 17}}
    ```

```yaml
kind: ConfigMap
```
"""


def test_the_scanner_finds_both_kinds_and_the_loader_refuses_a_bad_one(tmp_path: Path) -> None:
    found = snippets(SAMPLE, "sample.md")
    assert [(s.source, s.stack_file, s.fragment) for s in found] == [
        ("sample.md:3", "Pulumi.docs-dev.yaml", False),
        ("sample.md:14", None, True),
        ("sample.md:19", None, False),
    ]
    validate(found[0], tmp_path)
    with pytest.raises(SpecError, match=r"nodesets\[0\]\.gpus\.count"):
        validate(found[1], tmp_path)
    assert merged({"nodesets": [{"name": "gpu"}]})["partitions"] == [
        {"name": "batch", "nodesets": ["gpu"], "default": True}
    ]
    under_config = config({CLUSTER_KEY: {"slurm": {"version": "24.11"}}, OPERATOR_KEY: True})
    assert under_config[OPERATOR_KEY] is True and under_config[CLUSTER_KEY]["slurm"] == {"version": "24.11"}
