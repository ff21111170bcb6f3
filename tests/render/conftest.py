"""A small valid spec and a way to vary it, for the renderer tests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from sunk.spec import ClusterSpec, load_spec

BASE: dict[str, Any] = {
    "name": "research",
    "tenant": "acme",
    "nodesets": [{"name": "cpu", "cpus": 4, "memoryMib": 4096}],
    "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
}

MakeSpec = Callable[..., ClusterSpec]


@pytest.fixture
def make_spec() -> MakeSpec:
    """`make_spec(scheduling={...}, nodesets=[...])`: BASE with top-level sections replaced."""

    def make(**sections: Any) -> ClusterSpec:
        if (sections.get("topology") or {}).get("plugin") == "block":
            sections.setdefault("slurm", {"version": "24.11"})  # the release block topology runs on
        return load_spec({**copy.deepcopy(BASE), **sections})

    return make
