"""The checks that compare NodeSets with each other and walk account chains are linear in practice
(bench/validate_bench.py times `sunk validate` at 1,000 NodeSets and 30,000 accounts, the caps);
here they give the answers the quadratic ones gave."""

from __future__ import annotations

import random
from typing import Any

import pytest

from sunk.render.sacctmgr import parents_first
from sunk.spec import SpecError, load_spec
from sunk.spec.cluster import Selector, _disjoint, overlapping_selectors
from sunk.spec.scheduling import _on_cycles


def _brute(items: list[tuple[int, Selector]]) -> list[tuple[int, int]]:
    found = []
    for b, (j, y) in enumerate(items):
        hit = next((i for i, x in items[:b] if not _disjoint(x, y)), None)
        if hit is not None:
            found.append((j, hit))
    return sorted(found)


@pytest.mark.parametrize("seed", range(200))
def test_overlapping_selectors_finds_what_comparing_every_pair_finds(seed: int) -> None:
    rnd = random.Random(seed)
    keys, values = ["a", "b", "c", "d"][: rnd.randint(1, 4)], ["1", "2", "3"][: rnd.randint(1, 3)]
    items = [(i, {k: rnd.choice(values) for k in keys if rnd.random() < 0.7}) for i in range(rnd.randint(0, 12))]
    found = sorted(overlapping_selectors(items))
    # Each selector that overlaps an earlier one is reported once, against an earlier one it overlaps.
    assert [j for j, _ in found] == [j for j, _ in _brute(items)]
    by_index = dict(items)
    assert all(i < j and not _disjoint(by_index[i], by_index[j]) for j, i in found)


def test_a_cycle_anywhere_in_a_long_chain_is_found_once_per_member() -> None:
    parents = {f"a{i}": f"a{i - 1}" for i in range(1, 5000)} | {"a0": "root", "x": "y", "y": "z", "z": "x", "w": "x"}
    assert _on_cycles(parents) == {"x", "y", "z"}


def test_a_spec_with_two_cycles_names_every_account_on_them() -> None:
    accounts: list[dict[str, Any]] = [
        {"name": "a", "parent": "b"},
        {"name": "b", "parent": "a"},
        {"name": "c", "parent": "c"},
        {"name": "d", "parent": "a"},
    ]
    base = {"name": "r", "tenant": "t", "nodesets": [{"name": "cpu", "cpus": 1, "memoryMib": 1024}]}
    with pytest.raises(SpecError) as info:
        load_spec({**base, "partitions": [{"name": "p", "nodesets": ["cpu"]}], "accounts": accounts})
    cycles = [p for p in info.value.problems if "own ancestor" in p]
    assert [p.split(":")[0] for p in cycles] == ["accounts[0].parent", "accounts[1].parent", "accounts[2].parent"]


def test_parents_come_first_in_a_long_chain_given_backwards() -> None:
    base = {"name": "r", "tenant": "t", "nodesets": [{"name": "cpu", "cpus": 1, "memoryMib": 1024}]}
    accounts = [{"name": f"a{i}", "parent": f"a{i - 1}" if i else "root"} for i in range(300)][::-1]
    spec = load_spec({**base, "partitions": [{"name": "p", "nodesets": ["cpu"]}], "accounts": accounts})
    assert [a.name for a in parents_first(list(spec.accounts))] == [f"a{i}" for i in range(300)]
