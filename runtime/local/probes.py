"""A running container's probes, as the kubelet's prober runs them: startup, then readiness and
liveness side by side, each an exec (in the container's namespaces), tcpSocket or httpGet (to the
pod's address), with initialDelaySeconds, periodSeconds, timeoutSeconds, successThreshold and
failureThreshold. A startup or liveness probe that fails its threshold kills the container (preStop,
SIGTERM, the pod's grace period), and the pod runner's restart policy and back-off take it from
there; a readiness probe turns the container's Ready on and off. Nothing is probed while the Node's
agent is stopped (the kubelet is the prober).

Not modelled: grpc probes, httpGet headers and hosts, terminationGracePeriodSeconds set on a probe,
the kubelet's probe jitter, the probe's output in its Unhealthy Event (each failure is one:
"Liveness probe failed"; the container killed after a failed startup or liveness probe, Killing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any, Protocol

import aiohttp

from .apitypes import Obj
from .events import NORMAL, WARNING
from .sandbox import Running

log = logging.getLogger("sunk.local.agent")


class Pod(Protocol):
    """What probing needs of the pod runner whose container it probes."""

    namespace: str
    name: str
    ip: str
    detached: bool

    @property
    def grace_period(self) -> int: ...

    def exec_argv(self, running: Running, command: Sequence[str]) -> list[str]: ...

    async def kill_container(self, running: Running, grace: float) -> None: ...

    def publish(self) -> None: ...

    def event(self, severity: str, reason: str, message: str, running: Running | None = None) -> None: ...


async def run_probes(pod: Pod, running: Running) -> None:
    """The container's startup, readiness and liveness probes, from its start until it exits."""
    spec = running.spec
    startup, readiness, liveness = spec.get("startupProbe"), spec.get("readinessProbe"), spec.get("livenessProbe")
    if startup:
        if not await _until(pod, running, startup, kind="Startup"):
            pod.event(NORMAL, "Killing", f"Container {running.name} failed startup probe, will be restarted", running)
            await pod.kill_container(running, pod.grace_period)
            return
        running.started = True
        pod.publish()
    tasks = []
    if readiness:
        tasks.append(asyncio.create_task(_readiness(pod, running, readiness)))
    else:
        running.ready = running.kind != "init"
        pod.publish()
    if liveness:
        tasks.append(asyncio.create_task(_liveness(pod, running, liveness)))
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()


async def _until(pod: Pod, running: Running, probe: Obj, *, kind: str) -> bool:
    """Probe until success (True) or failureThreshold failures in a row (False); each failure an
    Unhealthy Event, as the kubelet's prober writes it."""
    await asyncio.sleep(float(probe.get("initialDelaySeconds", 0)))
    failures, threshold = 0, int(probe.get("failureThreshold", 3))
    while True:
        if await check(pod, running, probe):
            return True
        pod.event(WARNING, "Unhealthy", f"{kind} probe failed", running)
        failures += 1
        if failures >= threshold:
            return False
        await asyncio.sleep(float(probe.get("periodSeconds", 10)))


async def _readiness(pod: Pod, running: Running, probe: Obj) -> None:
    await asyncio.sleep(float(probe.get("initialDelaySeconds", 0)))
    failures = successes = 0
    while True:
        if await check(pod, running, probe):
            failures, successes = 0, successes + 1
            if not running.ready and successes >= int(probe.get("successThreshold", 1)):
                running.ready = True
                pod.publish()
        else:
            pod.event(WARNING, "Unhealthy", "Readiness probe failed", running)
            successes, failures = 0, failures + 1
            if running.ready and failures >= int(probe.get("failureThreshold", 3)):
                running.ready = False
                pod.publish()
        await asyncio.sleep(float(probe.get("periodSeconds", 10)))


async def _liveness(pod: Pod, running: Running, probe: Obj) -> None:
    """As the kubelet's: from initialDelaySeconds on, failureThreshold failures in a row kill the
    container, whether or not the probe ever succeeded (a container that hangs at its start is
    restarted too); a success resets the count."""
    await asyncio.sleep(float(probe.get("initialDelaySeconds", 0)))
    failures, threshold = 0, int(probe.get("failureThreshold", 3))
    while True:
        if await check(pod, running, probe):
            failures = 0
        else:
            pod.event(WARNING, "Unhealthy", "Liveness probe failed", running)
            failures += 1
            if failures >= threshold:
                pod.event(
                    NORMAL, "Killing", f"Container {running.name} failed liveness probe, will be restarted", running
                )
                log.info("%s/%s %s: liveness probe failed; restarting", pod.namespace, pod.name, running.name)
                await pod.kill_container(running, pod.grace_period)
                return
        await asyncio.sleep(float(probe.get("periodSeconds", 10)))


async def check(pod: Pod, running: Running, probe: Obj) -> bool:
    """One probe: exec, tcpSocket or httpGet; False on a failure, an error or a timeout."""
    while pod.detached:  # the kubelet is the prober
        await asyncio.sleep(0.5)
    timeout = float(probe.get("timeoutSeconds", 1))
    try:
        if "exec" in probe:
            if running.pid is None:
                return False
            proc = await asyncio.create_subprocess_exec(
                *pod.exec_argv(running, probe["exec"].get("command") or []),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            try:
                return await asyncio.wait_for(proc.wait(), timeout + 2) == 0  # + the launcher's start
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
                return False
        if "tcpSocket" in probe:
            port = _port(running.spec, probe["tcpSocket"]["port"])
            _, writer = await asyncio.wait_for(asyncio.open_connection(pod.ip, port), timeout)
            writer.close()
            return True
        if "httpGet" in probe:
            get = probe["httpGet"]
            url = f"{get.get('scheme', 'HTTP').lower()}://{pod.ip}:{_port(running.spec, get['port'])}{get.get('path', '/')}"
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
                session.get(url, ssl=False) as reply,
            ):
                return 200 <= reply.status < 400
    except (OSError, TimeoutError, aiohttp.ClientError, ValueError):
        return False
    return False


def _port(container: Obj, port: Any) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return int(p["containerPort"])
    raise ValueError(f"no port named {port}")
