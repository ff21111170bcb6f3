"""The submitter on its own: what runs, in which order, once, and what a slow action holds back."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sunk.runtime.scheduler.submitter import Submitter


def until(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within 10 s"
        time.sleep(0.005)


class Recorder:
    """Runs actions (strings, their own marker); those in `hold` wait for `release`."""

    def __init__(self, *hold: str) -> None:
        self.ran: list[str] = []
        self.hold = set(hold)
        self.release = threading.Event()
        self.started = threading.Event()
        self.lock = threading.Lock()

    def __call__(self, action: str) -> None:
        if action in self.hold:
            self.started.set()
            self.release.wait(timeout=30)
        with self.lock:
            self.ran.append(action)


@pytest.fixture
def made() -> Iterator[list[tuple[Recorder, Submitter[str]]]]:
    out: list[tuple[Recorder, Submitter[str]]] = []
    yield out
    for recorder, submitter in out:
        recorder.release.set()
        submitter.close()


def make(made: list[tuple[Recorder, Submitter[str]]], *hold: str, **options: float) -> tuple[Recorder, Submitter[str]]:
    recorder = Recorder(*hold)
    submitter = Submitter(recorder, lambda a: a, **options)  # type: ignore[arg-type]
    made.append((recorder, submitter))
    return recorder, submitter


def test_actions_run_in_the_order_offered_and_each_once(made: list[tuple[Recorder, Submitter[str]]]) -> None:
    recorder, submitter = make(made, workers=1)
    submitter.offer([f"a{i}" for i in range(20)], since=time.monotonic())
    assert submitter.wait(10) == 0
    assert recorder.ran == [f"a{i}" for i in range(20)]


def test_a_new_plan_replaces_what_is_not_started_and_skips_what_started_since_its_read(
    made: list[tuple[Recorder, Submitter[str]]],
) -> None:
    recorder, submitter = make(made, "slow", workers=1, stragglers=0)
    read = time.monotonic()
    submitter.offer(["slow", "old-1", "old-2"], since=read)
    recorder.started.wait(10)
    # The plan made from a job list read before "slow" started still has it (it sees no job for
    # it); "old-2" is gone from it (its pod was deleted): neither runs again, or at all.
    submitter.offer(["slow", "old-1", "new"], since=read)
    assert submitter.busy(since=read) == {"slow"}
    recorder.release.set()
    assert submitter.wait(10) == 0
    assert recorder.ran == ["slow", "old-1", "new"]
    # A plan from a read after they returned sees their jobs; one from a read before does not.
    assert submitter.busy(since=read) == {"slow", "old-1", "new"}
    assert submitter.busy(since=time.monotonic()) == set()


def test_a_slow_action_holds_back_only_itself(made: list[tuple[Recorder, Submitter[str]]]) -> None:
    recorder, submitter = make(made, "gang", workers=1, stragglers=1, straggle_after=0.05)
    submitter.offer(["gang", "web", "api"], since=time.monotonic())
    until(lambda: recorder.ran == ["web", "api"])  # no new offer needed: they run on their own
    assert submitter.busy(since=0.0) >= {"gang"}
    recorder.release.set()
    until(lambda: len(recorder.ran) == 3)


def test_past_its_stragglers_the_queue_waits(made: list[tuple[Recorder, Submitter[str]]]) -> None:
    recorder, submitter = make(made, "a", "b", workers=1, stragglers=1, straggle_after=0.01)
    submitter.offer(["a", "b", "c"], since=time.monotonic())
    until(lambda: submitter.busy(since=0.0) == {"a", "b"})
    assert submitter.wait(0.1) == 1 and recorder.ran == []  # both threads stuck: "c" waits
    recorder.release.set()
    until(lambda: sorted(recorder.ran) == ["a", "b", "c"])


def test_close_drops_what_is_not_started(made: list[tuple[Recorder, Submitter[str]]]) -> None:
    recorder, submitter = make(made, "a", workers=1, stragglers=0)
    submitter.offer(["a", "b"], since=time.monotonic())
    recorder.started.wait(10)
    closing = threading.Thread(target=submitter.close)
    closing.start()
    recorder.release.set()
    closing.join(10)
    assert recorder.ran == ["a"] and submitter.queued == 0
