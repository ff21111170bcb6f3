"""Slurm's submits, run continuously beside the cycles instead of inside them.

A burst's pods wait mostly for their submits: slurmctld takes them one at a time (4 ms each on an
idle 2-core machine, 20+ ms under load), and a cycle that submits only for a budget of its own
time leaves slurmctld idle while it observes, plans and binds (issue 35's 1,000-pod burst: 35-50
submits a second with 0.25 s of each ~0.37 s cycle spent submitting). Here the cycle hands its
planned submits to a queue and the workers drain it between cycles too.

Guarantees, whatever the timing:
- the queue holds one plan at most: each cycle's `offer` replaces what is not started yet with
  its own list (oldest pods first), so a workload's queued submit is never older than the last
  plan, and the queue never grows beyond the pending workloads;
- a workload is submitted once: a marker whose action runs, or returned after the cycle's job list
  was read (that list can't show what it did), is `busy`; the cycle leaves it out of its plan, and
  `offer` drops it too (it may have been started between the cycle's `busy` and its `offer`);
- a slow action holds back only itself: past `straggle_after` seconds it no longer counts against
  `workers`, so the next queued action starts; at most `stragglers` such run at once.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

A = TypeVar("A")


class Submitter(Generic[A]):
    def __init__(
        self,
        apply: Callable[[A], None],
        key: Callable[[A], str],
        *,
        workers: int = 1,
        stragglers: int = 8,
        straggle_after: float = 0.25,
        name: str = "sunk-scheduler-submit",
    ) -> None:
        self._apply = apply
        """Runs one action; must not raise (the caller counts and logs its failures)."""
        self._key = key
        self._workers = workers
        self._straggle_after = straggle_after
        lock = threading.Lock()
        self._cond = threading.Condition(lock)
        """The cycle's wait (`wait`): told of every change."""
        self._slot = threading.Condition(lock)
        """The idle workers' wait: one is woken per action that returns, not all of them (waking
        the ten a burst keeps, for every submit, was 5 % of the scheduler's time in a 1,000-pod
        burst sampled with py-spy --gil)."""
        self._queue: deque[A] = deque()
        self._running: dict[str, float] = {}
        """Markers whose action runs now -> when it started (monotonic)."""
        self._landed: dict[str, float] = {}
        """Markers -> when (monotonic) their last action returned."""
        self._closed = False
        self._name = name
        self._size = workers + stragglers
        self._threads: list[threading.Thread] = []
        """Started on the first offer with something in it (a scheduler that never submits has none)."""

    # --- the cycle's side ---------------------------------------------------------------------

    def busy(self, since: float) -> set[str]:
        """Markers whose action runs, or returned at or after `since` (when the job list the cycle
        plans from was asked for)."""
        with self._cond:
            self._landed = {k: at for k, at in self._landed.items() if at >= since}
            return set(self._running) | set(self._landed)

    def offer(self, actions: Sequence[A], since: float) -> None:
        """The newest plan's actions, in the order to run them, replace those not started yet;
        any whose marker is busy as of `since` is left out (started since the plan was made)."""
        with self._cond:
            taken = set(self._running) | {k for k, at in self._landed.items() if at >= since}
            self._queue = deque(a for a in actions if self._key(a) not in taken)
            if self._queue and not self._threads and not self._closed:
                # One name for all (a thread's name is for logs and debuggers, not an object's).
                self._threads = [
                    threading.Thread(target=self._work, name=self._name, daemon=True) for _ in range(self._size)
                ]
                for thread in self._threads:
                    thread.start()
            self._slot.notify(len(self._queue))
            self._cond.notify_all()

    def wait(self, timeout: float) -> int:
        """Until nothing is queued and every action running has started within straggle_after
        (stragglers aside), or `timeout` seconds; returns the actions still queued."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._queue or self._fresh(time.monotonic()):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(min(left, self._straggle_after))
            return len(self._queue)

    @property
    def queued(self) -> int:
        with self._cond:
            return len(self._queue)

    def close(self) -> None:
        """Drops what is not started, lets what runs finish."""
        with self._cond:
            self._closed = True
            self._queue.clear()
            self._slot.notify_all()
            self._cond.notify_all()
            threads = list(self._threads)
        for thread in threads:
            thread.join()

    # --- the workers --------------------------------------------------------------------------

    def _fresh(self, now: float) -> int:
        return sum(1 for at in self._running.values() if now - at < self._straggle_after)

    def _next(self) -> A | None:
        """The next action to run, marked running; None once closed."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                now = time.monotonic()
                if self._queue and self._fresh(now) < self._workers:
                    action = self._queue.popleft()
                    self._running[self._key(action)] = now
                    return action
                # With the workers all taken, look again when the oldest may turn straggler.
                self._slot.wait(self._straggle_after / 2 if self._queue else None)

    def _work(self) -> None:
        while (action := self._next()) is not None:
            key = self._key(action)
            try:
                self._apply(action)
            finally:
                with self._cond:
                    self._running.pop(key, None)
                    self._landed[key] = time.monotonic()
                    self._slot.notify()
                    self._cond.notify_all()
