"""One spec builder for the tests: a small valid cluster (or a fixture stack's) with the changes a
test makes, written as dotted paths into the stack file's camelCase document:

    build_spec()                                             # MINIMAL as it is
    build_spec(**{"nodesets.0.replicas": 3})                 # one field
    build_spec(**{"nodesets.cpu.gpus": {"count": 8, ...}})   # a list item by its `name`
    build_spec(scheduling={"preemptType": "off"})            # a whole top-level section
    build_spec("acme-dev", {"login.replicas": 2})  # a fixture stack as the base

A path segment that is a number indexes a list (`nodesets[0]` works too; one past the end
appends); another segment on a list picks the item whose `name` is that segment. A value replaces
what the path held (`DELETE` removes it); mappings and lists on the way are created. The document is loaded by the product's own `load_spec`, so every check of a
real stack applies (SpecError on a bad change)."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from typing import Any

from sunk.spec import ClusterSpec, load_spec
from sunk.stackfile import CLUSTER_KEY, read_stack_file, stack_path
from tests.support.stacks import FIXTURE_STACKS

MINIMAL: dict[str, Any] = {
    "name": "research",
    "tenant": "acme",
    "nodesets": [{"name": "cpu", "cpus": 4, "memoryMib": 4096}],
    "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
}
"""The smallest cluster most tests start from: one CPU NodeSet in one default partition."""

DELETE: Any = object()
"""An override value that removes the key (or list item) at its path."""


def stack_document(stack: str) -> dict[str, Any]:
    """A fixture stack's `sunk:cluster` document, as the stack file writes it (camelCase)."""
    doc = read_stack_file(stack_path(stack, FIXTURE_STACKS))
    return copy.deepcopy(dict(doc["config"][CLUSTER_KEY]))


def _step(container: Any, segment: str) -> int | str:
    """The key or index `segment` names in `container` (a list: a number, or an item's name)."""
    if not isinstance(container, list):
        return segment
    if segment.lstrip("-").isdigit():
        return int(segment)
    for i, item in enumerate(container):
        if isinstance(item, Mapping) and item.get("name") == segment:
            return i
    names = [item.get("name") for item in container if isinstance(item, Mapping)]
    raise KeyError(f"no item named {segment!r} in this list (names: {names})")


def set_path(doc: dict[str, Any], path: str, value: Any) -> None:
    """Put `value` at the dotted `path` of `doc` (see the module's docstring). `nodesets[1].cpus`
    is read as `nodesets.1.cpus`; an index one past a list's end appends."""
    segments = path.replace("[", ".").replace("]", "").split(".")
    here: Any = doc
    for segment, following in itertools.pairwise(segments):
        key = _step(here, segment)
        if isinstance(here, list) and key == len(here):
            here.append({})
        elif isinstance(here, dict) and key not in here:
            here[key] = [] if following.isdigit() else {}
        here = here[key]
    key = _step(here, segments[-1])
    if value is DELETE:
        del here[key]
    elif isinstance(here, list) and key == len(here):
        here.append(copy.deepcopy(value))
    else:
        here[key] = copy.deepcopy(value)


def spec_document(
    base: str | Mapping[str, Any] = "minimal", overrides: Mapping[str, Any] | None = None, /, **dotted: Any
) -> dict[str, Any]:
    """The camelCase document `build_spec` loads: `base` ("minimal", a fixture stack's name, or a
    document) with `overrides` and then `dotted` applied in order."""
    if base == "minimal":
        doc = copy.deepcopy(MINIMAL)
    elif isinstance(base, str):
        doc = stack_document(base)
    else:
        doc = copy.deepcopy(dict(base))
    for path, value in {**(overrides or {}), **dotted}.items():
        set_path(doc, path, value)
    return doc


def build_spec(
    base: str | Mapping[str, Any] = "minimal", overrides: Mapping[str, Any] | None = None, /, **dotted: Any
) -> ClusterSpec:
    """A ClusterSpec from `base` with the changes applied (see the module's docstring)."""
    return load_spec(spec_document(base, overrides, **dotted))
