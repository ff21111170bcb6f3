"""The node agent's prober against a fake pod whose exec probes run on the host (`true`/`false`
and a counter file): the kubelet's rules for liveness, in fractions of a second. What the fake
can't model: the container's namespaces, the restart that follows a kill (the pod runner's), and
Events as the API stores them (here a list of (reason, message))."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from sunk.runtime.local import probes
from sunk.runtime.local.sandbox import Running


class FakePod:
    namespace, name, ip, detached = "default", "p", "127.0.0.1", False
    grace_period = 1

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.killed: list[str] = []

    def exec_argv(self, running: Running, command: Sequence[str]) -> list[str]:
        return list(command)  # on the host: the probes below are plain commands

    async def kill_container(self, running: Running, grace: float) -> None:
        self.killed.append(running.name)

    def publish(self) -> None:
        pass

    def event(self, severity: str, reason: str, message: str, running: Running | None = None) -> None:
        self.events.append((reason, message))


def _run(probe: dict[str, object], seconds: float) -> FakePod:
    pod = FakePod()
    running = Running(spec={"name": "c", "livenessProbe": probe}, kind="main", pid=1)

    async def main() -> None:
        task = asyncio.create_task(probes.run_probes(pod, running))
        await asyncio.wait([task], timeout=seconds)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)  # ended before the loop closes

    # A loop of its own, never the thread's current one: asyncio.run() leaves the main thread
    # without a current loop, and later tests (Pulumi's mocks) call asyncio.get_event_loop().
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return pod


def test_a_liveness_probe_failing_from_the_start_kills_the_container() -> None:
    """A container that hangs at its start never passes its probe: the kubelet restarts it after
    failureThreshold failures (it once waited for a first success that never came)."""
    pod = _run({"exec": {"command": ["false"]}, "periodSeconds": 0.05, "failureThreshold": 3}, 5)
    assert pod.killed == ["c"]
    assert pod.events == [("Unhealthy", "Liveness probe failed")] * 3 + [
        ("Killing", "Container c failed liveness probe, will be restarted")
    ]


def test_a_success_resets_the_count(tmp_path: Path) -> None:
    """Fail, fail, pass, fail, fail, pass...: never three in a row, never killed."""
    counter = tmp_path / "n"
    counter.write_text("0")
    script = f"n=$(cat {counter}); echo $((n + 1)) > {counter}; [ $((n % 3)) -eq 2 ]"
    pod = _run({"exec": {"command": ["sh", "-c", script]}, "periodSeconds": 0.05, "failureThreshold": 3}, 2)
    assert int(counter.read_text()) >= 9  # probed often enough to have killed it otherwise
    assert pod.killed == [] and ("Unhealthy", "Liveness probe failed") in pod.events


def test_a_passing_probe_leaves_it_alone() -> None:
    pod = _run({"exec": {"command": ["true"]}, "periodSeconds": 0.05, "failureThreshold": 2}, 0.5)
    assert pod.killed == [] and pod.events == []
