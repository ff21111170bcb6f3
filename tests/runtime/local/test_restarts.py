"""The kubelet's restart back-off as the node agent keeps it (runtime/local/podrunner.py), on a fake
clock: the first exit restarts at once, then 10 s doubling to 5 minutes, and an entry that has not
moved for more than 10 minutes starts over. restartCount counts the containers started after the
first (podrunner.py raises it when a container starts again, not when one exits)."""

from __future__ import annotations

from sunk.runtime.local.podrunner import BACKOFF_CAP, Backoff, backoff_after_restart, restart_wait


def _crash_loop(exits: int, runs_for: float = 1.0) -> list[float]:
    """The waits before each restart of a container that exits `runs_for` s after each start."""
    backoff: Backoff | None = None
    now, waits = 0.0, []
    for _ in range(exits):
        now += runs_for
        finished = now
        wait = restart_wait(backoff, finished, now)
        waits.append(wait)
        now += wait
        assert restart_wait(backoff, finished, now) == 0
        backoff = backoff_after_restart(backoff, finished, now)
    return waits


def test_the_first_restart_is_at_once_then_the_window_doubles_to_the_cap() -> None:
    assert _crash_loop(8) == [0, 10, 20, 40, 80, 160, 300, 300]


def test_a_container_that_ran_long_enough_restarts_at_once_and_starts_the_window_over() -> None:
    backoff = Backoff(window=160, moved=0)
    assert restart_wait(backoff, finished=2 * BACKOFF_CAP, now=2 * BACKOFF_CAP) == 160  # not yet expired
    late = 2 * BACKOFF_CAP + 1
    assert restart_wait(backoff, finished=late, now=late) == 0
    assert backoff_after_restart(backoff, late, late) == Backoff(window=10, moved=late)


def test_the_wait_counts_from_the_exit_not_from_when_it_is_asked() -> None:
    backoff = Backoff(window=20, moved=100)
    assert restart_wait(backoff, finished=110, now=115) == 15
    assert restart_wait(backoff, finished=110, now=131) == 0
