"""A small valid spec and a way to vary it, for the renderer tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sunk.spec import ClusterSpec
from tests.support.specs import build_spec

MakeSpec = Callable[..., ClusterSpec]


@pytest.fixture
def make_spec() -> MakeSpec:
    """`make_spec(scheduling={...}, nodesets=[...])`: MINIMAL with top-level sections replaced."""

    def make(**sections: Any) -> ClusterSpec:
        if (sections.get("topology") or {}).get("plugin") == "block":
            sections.setdefault("slurm", {"version": "24.11"})  # the release block topology runs on
        return build_spec(**sections)

    return make
