"""A spec copied with `model_copy(update=...)` answers from its new fields, not from values its
original cached (pydantic copies the instance __dict__, functools.cached_property values included)."""

from __future__ import annotations

import pytest

from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS


def test_a_copy_with_other_nodesets_forgets_the_cached_lookups() -> None:
    spec = load_stack("acme-dev", FIXTURE_STACKS).spec
    assert spec.has_gpus and spec.nodeset("gpu").gpus  # computed, so cached on `spec`
    cpu = spec.nodeset("cpu")
    changed = cpu.model_copy(update={"s6_scripts": {"heartbeat": "#!/bin/sh\nexec sleep 1000\n"}})
    copy = spec.model_copy(update={"nodesets": [changed]})
    assert copy.nodeset("cpu").s6_scripts == {"heartbeat": "#!/bin/sh\nexec sleep 1000\n"}
    assert not copy.has_gpus
    with pytest.raises(KeyError):
        copy.nodeset("gpu")
    # The original keeps its own answers.
    assert spec.has_gpus and spec.nodeset("cpu").s6_scripts == {}
