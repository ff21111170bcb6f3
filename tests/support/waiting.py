"""One way for tests to wait: poll until a check holds, on the harness's own poller
(sunk.runtime.harness.ports.wait_until), and fail the test naming what never happened."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sunk.runtime.harness.ports import wait_until

T = TypeVar("T")


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 60.0, interval: float = 0.1) -> T:
    """Call `check` every `interval` seconds until it returns something true, and return that;
    after `timeout` seconds, fail with an AssertionError naming `what` (and the last answer)."""
    last: list[T | None] = []

    def ready() -> bool:
        last[:] = [check()]
        return bool(last[0])

    try:
        wait_until(what, ready, timeout=timeout, interval=interval)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last[0]!r})") from None
    found = last[0]
    assert found is not None  # ready() saw it true
    return found
