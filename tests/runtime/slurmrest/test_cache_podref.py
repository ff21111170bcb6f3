from __future__ import annotations

from sunk.runtime.slurmrest import Node, NodeCache, PodRef, read_pod_ref, write_pod_ref


def test_cache_reports_added_changed_removed() -> None:
    cache = NodeCache()
    first = cache.update([Node(name="a", state=("IDLE",)), Node(name="b", state=("IDLE",))])
    assert [n.name for n in first.added] == ["a", "b"] and not first.changed
    assert not cache.update([Node(name="a", state=("IDLE",)), Node(name="b", state=("IDLE",))])
    diff = cache.update([Node(name="a", state=("IDLE", "DRAIN"), reason="x"), Node(name="c")])
    assert [n.name for n in diff.changed] == ["a"]
    assert [n.name for n in diff.added] == ["c"]
    assert diff.removed == ["b"]


def test_cache_ignores_volatile_fields() -> None:
    cache = NodeCache()
    cache.update([Node.model_validate({"name": "a", "cpu_load": 1, "free_mem": {"set": True, "number": 5}})])
    assert not cache.update([Node.model_validate({"name": "a", "cpu_load": 9, "free_mem": {"set": True, "number": 1}})])


def test_pod_ref_round_trip_keeps_foreign_keys() -> None:
    ref = PodRef("slurm", "cpu-0", "u-1")
    extra = write_pod_ref('{"rack":"r1"}', ref)
    assert read_pod_ref(extra) == ref
    assert '"rack":"r1"' in extra
    assert write_pod_ref(extra, None) == '{"rack":"r1"}'


def test_pod_ref_from_free_text_or_empty() -> None:
    assert read_pod_ref("") is None
    assert read_pod_ref("hello") is None
    extra = write_pod_ref("hello", PodRef("ns", "p", "u"))
    assert read_pod_ref(extra) == PodRef("ns", "p", "u")
    assert '"text":"hello"' in extra
    assert write_pod_ref("", None) == ""
