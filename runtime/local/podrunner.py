"""The pod runner: what the kubelet does for one pod bound to one of the local cluster's Nodes,
from its sandbox (sandbox.py) to its final deletion.

- init containers in order, native sidecars (restartPolicy Always) kept running, then the main
  containers, each in its own PID and mount namespaces (so /proc shows only its processes and a
  read-only root is its own), started by enter.py as the user, groups and capabilities that
  container.py decides, logging to a file per container and restart;
- its probes (probes.py) while it runs; restarts by the pod's restart policy with the kubelet's
  back-off (the first at once, then 10 s doubling to 300 s, CrashLoopBackOff while waiting;
  restartCount counts containers started again, not exits);
- graceful termination (preStop exec hooks, SIGTERM, the grace period, SIGKILL), main containers
  first, then sidecars in reverse order, then the sandbox, then the final delete (grace 0);
- the pod's status: phase, podIP, conditions and container statuses with restart counts and
  reasons, written through the store's status subresource when it changes;
- a pod lost with its Node (`lose`: nothing reaches the API) or left running under a stopped agent
  (`detached`: no probe, restart or status until the agent takes it back), and, on a restart of
  the Node, the old containers' counts carried on.

Not modelled: resource limits (no cgroups: offcluster.py), postStart hooks, httpGet hooks,
ephemeral containers, `kubectl attach`, a pod's shared PID namespace, the kubelet's eviction under
pressure, image garbage collection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import shutil
import signal
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..common.timefmt import rfc3339
from . import container as spec_of
from . import events
from .apitypes import ApiError, Obj
from .images import ImageMissing
from .probes import run_probes
from .sandbox import MountFailed, NodeAgent, PodSandbox, Running
from .tokens import Token

log = logging.getLogger("sunk.local.agent")

MOUNT_EVENT_FIRST, MOUNT_EVENT_CAP = 2.0, 122.0
"""Seconds between two FailedMount Events of one message: the kubelet's volume manager retries a
mount with exponential back-off from 500 ms to 2 min 2 s, and the agent retries every 2 s (so a pod
starts soon after its Secret appears) but tells it at the volume manager's pace."""
BACKOFF_START, BACKOFF_CAP = 10.0, 300.0
"""The kubelet's container restart back-off (v1.32): 10 s, doubling, at most 5 minutes."""


def _now() -> str:
    return rfc3339(datetime.now(UTC))


@dataclass(frozen=True)
class Backoff:
    """One container's restart back-off, as the kubelet keeps it (client-go's flowcontrol.Backoff
    entry): the current window and when it last moved (seconds on a monotonic clock)."""

    window: float
    moved: float


def restart_wait(backoff: Backoff | None, finished: float, now: float) -> float:
    """Seconds until a container that exited at `finished` may start again. The kubelet restarts
    at once after the first exit (no back-off yet) and after one that comes more than twice the
    cap (10 min) since the window last moved (the entry expired); otherwise it waits out the window
    from the exit, showing CrashLoopBackOff meanwhile."""
    if backoff is None or finished - backoff.moved > 2 * BACKOFF_CAP:
        return 0.0
    return max(0.0, finished + backoff.window - now)


def backoff_after_restart(backoff: Backoff | None, finished: float, now: float) -> Backoff:
    """The entry once the container restarts at `now` (flowcontrol's Next): a new or expired entry
    starts at 10 s, else the window doubles up to the cap."""
    if backoff is None or finished - backoff.moved > 2 * BACKOFF_CAP:
        return Backoff(BACKOFF_START, now)
    return Backoff(min(backoff.window * 2, BACKOFF_CAP), now)


class PodRunner(PodSandbox):
    """One pod on one Node: its containers' lives and its status (the sandbox's state too)."""

    def __init__(self, agent: NodeAgent, pod: Obj, index: int) -> None:
        self.agent = agent
        self.pod = pod
        self.uid: str = pod["metadata"]["uid"]
        self.namespace: str = pod["metadata"]["namespace"]
        self.name: str = pod["metadata"]["name"]
        self.index = index
        self.ip = agent.network.address(index)
        self.folder: Path = agent.workdir / "pods" / self.uid
        spec = pod.get("spec") or {}
        self.node: str = spec.get("nodeName") or ""
        self.containers: dict[str, Running] = {}
        for c in spec.get("initContainers") or []:
            self.containers[c["name"]] = Running(c, "sidecar" if c.get("restartPolicy") == "Always" else "init")
        for c in spec.get("containers") or []:
            self.containers[c["name"]] = Running(c, "main")
        self._carry_restarts(pod)
        self.lost = False
        """The Node's agent stopped under this pod: nothing of it reaches the API any more."""
        self.detached = False
        """The Node's agent stopped, its containers still running (`stop_node(keep_containers=True)`):
        no status is written, no probe runs, no container is restarted, until the agent is back."""
        self.jail = None
        self.task: asyncio.Task[Any] | None = None
        self.stopping: asyncio.Task[Any] | None = None
        self.phase = "Pending"
        self.reason: str | None = None
        self.message: str | None = None
        self.initialized = False
        self.sandbox = False
        self.published: str | None = None
        self.started_at = _now()
        self.volume_sources: dict[str, Obj] = {}
        self.devices: dict[str, list[str]] = {}
        """Container name -> the Node's (fake) GPU device files bound into its /dev."""
        self.supervisors: list[asyncio.Task[Any]] = []
        self.tokens: dict[tuple[str | None, int], Token] = {}
        self.finishing = False
        self._sandboxing: concurrent.futures.Future[None] | None = None
        self._mount_told: tuple[str, float, float] = ("", 0.0, 0.0)
        """The last FailedMount message told, when the next may be, and the delay after it."""

    def event(self, severity: str, reason: str, message: str, running: Running | None = None) -> None:
        """An Event about this pod (or one of its containers), as this Node's kubelet; none once
        the Node's agent stopped under it (nothing of it reaches the API)."""
        if self.lost or self.detached:
            return
        path = events.container_path(self.pod, running.name) if running is not None else ""
        self.agent.recorder.event(self.pod, severity, reason, message, host=self.node, field_path=path)

    def _mount_failed(self, message: str, now: float) -> None:
        told, due, delay = self._mount_told
        if message == told and now < due:
            return
        delay = min(delay * 2, MOUNT_EVENT_CAP) if message == told else MOUNT_EVENT_FIRST
        self._mount_told = (message, now + delay, delay)
        self.event(events.WARNING, "FailedMount", message)

    def _carry_restarts(self, pod: Obj) -> None:
        """A pod that ran on this Node before its agent stopped (a reboot): its containers start
        again as restarts, their counts carried on, the old container's end as lastState (exit 255,
        reason Unknown, as a kubelet reports a container the reboot took)."""
        status = pod.get("status") or {}
        for old in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
            running = self.containers.get(old.get("name", ""))
            state = old.get("state") or {}
            if running is None or not ("running" in state or "terminated" in state or old.get("lastState")):
                continue
            running.restarts = int(old.get("restartCount", 0))
            if "terminated" in state:
                running.last = {"terminated": dict(state["terminated"])}
            elif "running" in state:
                started = state["running"].get("startedAt")
                running.last = {"terminated": {"exitCode": 255, "reason": "Unknown", "startedAt": started}}
            else:
                running.last = dict(old["lastState"])

    async def lose(self) -> None:
        """The Node's agent stops under this pod: its containers are killed, its sandbox goes,
        and nothing is written to the API."""
        self.lost = self.finishing = True
        for task in [*self.supervisors, self.task, self.stopping]:
            if task is not None:
                task.cancel()
        await self.teardown()
        self.agent.release(self, keep_address=True)

    @property
    def grace_period(self) -> int:
        """The pod's terminationGracePeriodSeconds, which a failed startup or liveness probe kills with."""
        return int((self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))

    # -- the lifecycle ----------------------------------------------------------------------
    async def run(self) -> None:
        try:
            await self._prepare()
            if self.stopping is not None:
                return
            for running in self.containers.values():
                if running.kind == "main":
                    continue
                if running.kind == "sidecar":
                    self.supervisors.append(asyncio.create_task(self._supervise(running)))
                    while not running.started:
                        await asyncio.sleep(0.2)
                else:
                    await self._supervise(running)
                    if not running.done:
                        return
            self.initialized = True
            mains = [asyncio.create_task(self._supervise(r)) for r in self.containers.values() if r.kind == "main"]
            self.supervisors += mains
            self.phase = "Running"
            self.publish()
            await asyncio.gather(*mains)
            codes = [
                int((r.state.get("terminated") or {}).get("exitCode", 1))
                for r in self.containers.values()
                if r.kind == "main"
            ]
            if self.stopping is None:
                self.finishing = True  # sidecars stop now and are not restarted
                self.phase = "Succeeded" if all(c == 0 for c in codes) else "Failed"
                for r in reversed([r for r in self.containers.values() if r.kind == "sidecar"]):
                    await self.kill_container(r, 30)
                self.publish()
                await self.teardown()
                self.agent.release(self)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a sandbox that can't be made: the pod fails, as on a node
            log.exception("pod %s/%s", self.namespace, self.name)
            self.phase, self.reason, self.message = "Failed", "SandboxError", str(err)
            self.publish()
            await self.teardown()
            self.agent.release(self)

    async def _prepare(self) -> None:
        for r in self.containers.values():
            r.state = {"waiting": {"reason": "ContainerCreating"}}
        self.publish()
        while True:  # images: wait, as for a pull, until built
            try:
                for r in self.containers.values():
                    r.image = await asyncio.to_thread(self.agent.images.resolve, r.spec.get("image", ""))
                break
            except ImageMissing as err:
                for r in self.containers.values():
                    if r.image is None:
                        r.state = {"waiting": {"reason": "ErrImagePull", "message": str(err)}}
                        self.event(events.WARNING, "Failed", f"Failed to pull image: {err}", r)
                self.publish()
                await asyncio.sleep(10)
                if self.stopping is not None:
                    return
        while True:  # volumes: wait for their ConfigMaps, Secrets and claims
            try:
                self._volumes()
                break
            except MountFailed as err:  # as a kubelet: a FailedMount Event, the pod ContainerCreating
                self._mount_failed(str(err), asyncio.get_running_loop().time())
                for r in self.containers.values():
                    r.state = {"waiting": {"reason": "ContainerCreating"}}
                self.publish()
                await asyncio.sleep(2)
                if self.stopping is not None:
                    return
        if self.finishing:
            return
        for r in self.containers.values():
            image = r.spec.get("image", "")
            self.event(events.NORMAL, "Pulled", f'Container image "{image}" already present on machine', r)
        # In a thread it can't be cancelled half-way; teardown waits for it (see there).
        self._sandboxing = self.agent.threads.submit(self._sandbox)
        await asyncio.shield(asyncio.wrap_future(self._sandboxing))
        self.sandbox = True
        if self.finishing:  # the cluster began stopping while the sandbox was made
            return
        self.publish()

    # -- containers --------------------------------------------------------------------------
    async def _start(self, running: Running) -> None:
        assert self.jail is not None
        launch = self._launch_file(running)
        if running.last:  # a new container where one ran before: what the kubelet's restartCount counts
            running.restarts += 1
        folder = self.folder / "logs" / running.name
        folder.mkdir(parents=True, exist_ok=True)
        logfile = (folder / f"{running.restarts}.log").open("ab")
        holder = self.jail.holder
        proc_dir = str(self.jail.real(running.name) / "proc")
        argv = [
            "nsenter", f"--target={holder}", "--mount", "--net", "--uts", "--ipc", "--",
            "unshare", "--pid", "--fork", "--kill-child", "--mount", "--propagation", "private", f"--mount-proc={proc_dir}",
            *self._enter(), str(launch),
        ]  # fmt: skip
        running.proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=logfile, stderr=logfile, start_new_session=True
        )
        logfile.close()
        running.pid = await self._child(running.proc.pid)
        running.state = {"running": {"startedAt": _now()}}
        self.event(events.NORMAL, "Created", f"Created container: {running.name}", running)
        self.event(events.NORMAL, "Started", f"Started container {running.name}", running)
        running.started = not running.spec.get("startupProbe")
        running.ready = False

    async def _child(self, unshare_pid: int) -> int | None:
        for _ in range(200):
            try:
                children = Path(f"/proc/{unshare_pid}/task/{unshare_pid}/children").read_text().split()
            except OSError:
                return None
            if children:
                return int(children[0])
            await asyncio.sleep(0.01)
        return None

    async def _supervise(self, running: Running) -> None:
        """Start, probe, wait and restart one container until it is done (an init container that
        exited 0, or any container the pod's restart policy does not restart)."""
        policy = (self.pod.get("spec") or {}).get("restartPolicy", "Always")
        if running.kind == "sidecar":
            policy = "Always"
        backoff: Backoff | None = None
        while self.stopping is None and not self.finishing:
            try:
                await self._start(running)
            except spec_of.ConfigError as err:
                running.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(err)}}
                self.event(events.WARNING, "Failed", f"Error: {err}", running)
                self.publish()
                await asyncio.sleep(2)
                continue
            self.publish()
            probing = asyncio.create_task(run_probes(self, running))
            assert running.proc is not None
            code = await running.proc.wait()
            probing.cancel()
            finished = _now()
            started = (running.state.get("running") or {}).get("startedAt", finished)
            code = code if code >= 0 else 128 - code  # killed by a signal: 128 + its number, as runc reports
            reason = "Completed" if code == 0 else "Error"
            running.state = {
                "terminated": {
                    "exitCode": code,
                    "reason": reason,
                    "startedAt": started,
                    "finishedAt": finished,
                }
            }
            running.ready, running.pid = False, None
            while self.detached and self.stopping is None and not self.finishing:
                await asyncio.sleep(0.5)  # no kubelet to see the exit or restart it
            if self.stopping is not None or self.finishing:
                self.publish()
                return
            if running.kind == "init" and code == 0:
                running.done = True
                self.publish()
                return
            restart = policy == "Always" or (policy == "OnFailure" and code != 0)
            if not restart:
                self.publish()
                return
            backoff = await self._back_off(running, backoff)

    async def _back_off(self, running: Running, backoff: Backoff | None) -> Backoff:
        """Between an exit and the restart: CrashLoopBackOff while the kubelet's back-off window
        from the exit lasts (none after the first exit); the entry once it restarts."""
        loop = asyncio.get_running_loop()
        running.last = running.state
        ended = loop.time()
        if backoff is not None and restart_wait(backoff, ended, ended) > 0:
            running.state = {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off {int(backoff.window)}s restarting failed container={running.name} pod={self.name}_{self.namespace}({self.uid})",
                }
            }
            told = (
                f"Back-off restarting failed container {running.name} in pod {self.name}_{self.namespace}({self.uid})"
            )
            self.event(events.WARNING, "BackOff", told, running)
        self.publish()
        while restart_wait(backoff, ended, loop.time()) > 0 and self.stopping is None and not self.finishing:
            await asyncio.sleep(0.5)
        return backoff_after_restart(backoff, ended, loop.time())

    async def kill_container(self, running: Running, grace: float) -> None:
        """preStop, SIGTERM, wait up to `grace`, SIGKILL."""
        proc, pid = running.proc, running.pid
        if proc is None or proc.returncode is not None:
            return
        pre = ((running.spec.get("lifecycle") or {}).get("preStop") or {}).get("exec")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        if pre and pid is not None:
            hook = await asyncio.create_subprocess_exec(
                *self.exec_argv(running, pre.get("command") or []),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(hook.wait(), max(0.1, deadline - loop.time()))
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), max(0.1, deadline - loop.time()))
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)  # unshare --kill-child takes the container with it
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            await proc.wait()

    def kill_all(self) -> None:
        for running in self.containers.values():
            for pid in (running.pid, running.proc.pid if running.proc else None):
                if pid is not None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)

    async def stop(self, grace: int) -> None:
        """Graceful deletion: main containers, then sidecars in reverse order, then the sandbox."""
        if self.task is not None and not self.sandbox:
            self.task.cancel()
        mains = [r for r in self.containers.values() if r.kind in ("main", "init")]
        for r in self.containers.values():
            if r.proc is not None and r.proc.returncode is None:
                self.event(events.NORMAL, "Killing", f"Stopping container {r.name}", r)
        await asyncio.gather(*(self.kill_container(r, grace) for r in mains))
        for r in reversed([r for r in self.containers.values() if r.kind == "sidecar"]):
            await self.kill_container(r, 2)
        for task in self.supervisors:
            task.cancel()
        if self.task is not None:
            self.task.cancel()
        await self.teardown()
        self.agent.release(self)
        with contextlib.suppress(ApiError):  # this pod, not one of the same name made since
            self.agent.store.delete(
                self.agent.store.resource("v1/pods"), self.namespace, self.name, grace=0, uid=self.uid
            )
        shutil.rmtree(self.folder, ignore_errors=True)

    async def teardown(self) -> None:
        self.finishing = True
        if self._sandboxing is not None:  # a sandbox half made would outlive us: let it finish first
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._sandboxing.exception)
        self.kill_all()
        for running in self.containers.values():
            if running.proc is not None and running.proc.returncode is None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(running.proc.wait(), 5)
        if self.jail is not None:
            jail, self.jail = self.jail, None
            await asyncio.to_thread(self._close_jail, jail)
        self.sandbox = False

    # -- status -----------------------------------------------------------------------------
    def status(self) -> Obj:
        def one(r: Running) -> Obj:
            out: Obj = {
                "name": r.name,
                "image": r.spec.get("image", ""),
                "imageID": "",
                "ready": r.ready,
                "restartCount": r.restarts,
                "started": r.started and "running" in r.state,
                "state": r.state,
            }
            if r.last:
                out["lastState"] = r.last
            if r.pid is not None:
                out["containerID"] = f"sunk-local://{self.uid[:8]}-{r.name}-{r.restarts}"
            return out

        inits = [one(r) for r in self.containers.values() if r.kind != "main"]
        mains = [one(r) for r in self.containers.values() if r.kind == "main"]
        all_ready = self.phase == "Running" and all(
            r.ready for r in self.containers.values() if r.kind in ("main", "sidecar")
        )
        now = _now()

        def cond(kind: str, ok: bool) -> Obj:
            return {"type": kind, "status": "True" if ok else "False", "lastProbeTime": None, "lastTransitionTime": now}

        status: Obj = {
            "phase": self.phase,
            "hostIP": self.agent.network.gateway,
            "startTime": self.started_at,
            "conditions": [
                cond("PodReadyToStartContainers", self.sandbox),
                cond("Initialized", self.initialized or self.phase in ("Succeeded", "Failed")),
                cond("ContainersReady", all_ready),
                cond("Ready", all_ready),
                cond("PodScheduled", True),
            ],
            "containerStatuses": mains,
            # The API server sets a pod's QoS class at creation, immutable after (a kubelet only
            # repeats it); Burstable stands in for a pod object that has none.
            "qosClass": (self.pod.get("status") or {}).get("qosClass") or "Burstable",
        }
        if inits:
            status["initContainerStatuses"] = inits
        if self.sandbox or self.phase in ("Running", "Succeeded", "Failed"):
            status["podIP"] = self.ip
            status["podIPs"] = [{"ip": self.ip}]
        if self.reason:
            status["reason"] = self.reason
        if self.message:
            status["message"] = self.message
        return status

    def publish(self) -> None:
        if self.lost or self.detached:
            return
        status = self.status()
        compare = json.dumps(
            {**status, "conditions": [{**c, "lastTransitionTime": None} for c in status["conditions"]]}, sort_keys=True
        )
        if compare == self.published:
            return
        self.published = compare
        current = self.agent.store.find(self.agent.store.resource("v1/pods"), self.namespace, self.name)
        if current is None or current["metadata"]["uid"] != self.uid:
            return
        old = {c["type"]: c for c in (current.get("status") or {}).get("conditions") or []}
        for c in status["conditions"]:
            if old.get(c["type"], {}).get("status") == c["status"]:
                c["lastTransitionTime"] = old[c["type"]].get("lastTransitionTime", c["lastTransitionTime"])
        with contextlib.suppress(ApiError):
            self.agent.store.patch(
                self.agent.store.resource("v1/pods"), self.namespace, self.name, "merge", {"status": status}, "status"
            )
