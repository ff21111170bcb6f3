"""The recorder's correlation (runtime/local/events.py), as client-go's EventCorrelator decides it:
a repeat is one Event counted up, similar messages are combined past ten, a (source, object) is held
to a burst of 25 then one per 5 minutes, and every map stays within its LRU size."""

from __future__ import annotations

from typing import Any

from sunk.runtime.local import events
from sunk.runtime.local.events import COMBINED, Correlator, Occurrence, Recorder

from tests.support.fakestore import FakeStore

NS = "team"


def occurrence(message: str = "m", reason: str = "BackOff", name: str = "p", path: str = "") -> Occurrence:
    return Occurrence(("kubelet", "n1"), ("v1", "Pod", NS, name, f"uid-{name}", path), "Warning", reason, message)


def test_a_repeat_is_the_same_event_counted_up_and_a_new_one_is_named_after_its_object() -> None:
    c = Correlator()
    first = c.correlate(occurrence(), 100.0)
    again = c.correlate(occurrence(), 130.0)
    assert first is not None and again is not None
    assert (first.patch, first.count, again.patch, again.count) == (False, 1, True, 2)
    assert again.name == first.name and first.name == f"p.{int(100.0 * 1e9):x}"
    assert again.first == 100.0
    other = c.correlate(occurrence(path="spec.containers{c}"), 131.0)  # another container: another Event
    assert other is not None and other.name != first.name and other.count == 1


def test_past_ten_messages_alike_they_are_combined_into_one_event() -> None:
    c = Correlator()
    postings = [c.correlate(occurrence(f"volume {i} failed", "FailedMount"), float(i)) for i in range(13)]
    assert all(p is not None for p in postings)
    assert [p.message.startswith(COMBINED) for p in postings if p] == [False] * 9 + [True] * 4
    combined = [p for p in postings[9:] if p]
    assert len({p.name for p in combined}) == 1 and [p.count for p in combined] == [1, 2, 3, 4]
    # Ten minutes later the group starts afresh.
    later = c.correlate(occurrence("volume 0 failed", "FailedMount"), 12.0 + events.SIMILAR_SECONDS + 1)
    assert later is not None and not later.message.startswith(COMBINED)


def test_the_spam_filter_holds_an_object_to_its_burst_then_one_per_refill() -> None:
    c = Correlator()
    written = [c.correlate(occurrence(f"m{i % 5}"), 1000.0 + i * 0.01) for i in range(40)]
    assert sum(p is not None for p in written) == events.SPAM_BURST
    assert c.correlate(occurrence("m0"), 1001.0) is None
    # Another object has its own bucket; after one refill period the first may post once more, its count kept.
    assert c.correlate(occurrence(name="q"), 1001.0) is not None
    back = c.correlate(occurrence("m0"), 1001.0 + events.SPAM_REFILL_SECONDS)
    assert back is not None and back.patch and back.count == 10


def test_memory_is_bounded_whatever_the_agent_sees() -> None:
    c = Correlator(size=64)
    for i in range(5000):
        c.correlate(occurrence(f"m{i}", name=f"pod-{i}"), float(i))
    assert (len(c.seen), len(c.similar), len(c.buckets)) == (64, 64, 64)
    # A pod that fell out of the cache starts a new Event (as in client-go), not a count from nothing.
    again = c.correlate(occurrence("m0", name="pod-0"), 6000.0)
    assert again is not None and again.count == 1 and not again.patch


def test_a_component_that_retries_fast_is_counted_at_its_repeat_interval() -> None:
    c = Correlator(repeat_seconds=20)
    assert c.correlate(occurrence(), 0.0) is not None
    assert c.correlate(occurrence(), 5.0) is None
    again = c.correlate(occurrence(), 21.0)
    assert again is not None and again.count == 2


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_recorder_writes_core_v1_events_and_patches_their_count() -> None:
    store = FakeStore()
    store.create(store.resource("v1/namespaces"), None, {"metadata": {"name": NS}})
    clock = Clock()
    recorder = Recorder(store, "kubelet", clock=clock)
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS, "uid": "u"}}
    path = "spec.containers{c}"
    recorder.event(pod, events.NORMAL, "Started", "Started container c", host="n1", field_path=path)
    clock.now += 30
    recorder.event(pod, events.NORMAL, "Started", "Started container c", host="n1", field_path=path)
    [event] = list(store.items(store.resource("v1/events"), NS))
    assert event["count"] == 2 and event["type"] == "Normal" and event["reason"] == "Started"
    assert event["involvedObject"]["fieldPath"] == path and event["source"] == {"component": "kubelet", "host": "n1"}
    assert (event["firstTimestamp"], event["lastTimestamp"]) == ("1970-01-12T13:46:40Z", "1970-01-12T13:47:10Z")
    # The Event expired from the API meanwhile: the next count creates it again.
    store.delete(store.resource("v1/events"), NS, event["metadata"]["name"])
    clock.now += 30
    recorder.event(pod, events.NORMAL, "Started", "Started container c", host="n1", field_path=path)
    [event] = list(store.items(store.resource("v1/events"), NS))
    assert event["count"] == 3
