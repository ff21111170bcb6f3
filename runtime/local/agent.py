"""The node agent: what a kubelet and a container runtime do for the local cluster's pods.

Every pod bound to one of the cluster's Nodes runs here:
- a sandbox: a holder process owning the pod's mount, network, UTS (hostname) and IPC namespaces
  (runtime/harness/jail.py), an eth0 on the cluster's bridge (net.py), and one overlay per
  container over its image's unpacked root filesystem (images.py), with the pod's volumes
  (volumes.py), /etc/hosts, /etc/hostname, /etc/resolv.conf and a minimal /dev bound in;
- each container in its own PID and mount namespaces (so /proc shows only its processes and a
  read-only root is its own), started by enter.py as the user, groups and capabilities that
  container.py decides, logging to a file per container and restart;
- init containers in order, native sidecars (restartPolicy Always) kept running, then the main
  containers; startup, readiness and liveness probes (exec, tcpSocket, httpGet); restarts with the
  kubelet's back-off (the first at once, then 10 s doubling to 300 s, CrashLoopBackOff while
  waiting; restartCount counts containers started again, not exits); graceful
  termination (preStop exec hooks, SIGTERM, the grace period, SIGKILL);
- the pod's status: phase, podIP, conditions and container statuses with restart counts and
  reasons, written through the store's status subresource.

Names resolve through /etc/hosts, rewritten when pods or Services change: pod FQDNs under headless
Services, and each Service's names (short, namespaced and cluster.local) to its first ready
endpoint, which stands in for a ClusterIP (offcluster.py lists it).

A Node's agent can stop two ways (`stop_node`): as a Node losing power (its containers and sandboxes
go, nothing reaches the API), or as a kubelet that crashed (`keep_containers`: the containers run
on, unwatched, and API deletions don't reach them; when the agent starts again it kills the
containers of pods the API no longer has, stops the Terminating ones, and takes the rest back
without restarting them). While it is stopped, logs and exec of its pods fail, as they go through
the kubelet.

Not modelled: resource limits (no cgroups: offcluster.py), image pulls, postStart hooks, httpGet
hooks, ephemeral containers, `kubectl attach`, a pod's shared PID namespace, the kubelet's
eviction under pressure, static pods.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import shutil
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from ..common.timefmt import rfc3339, rfc3339_micro
from ..harness.jail import Jail
from . import container as spec_of
from . import inventory, lifecycle, net, volumes
from .images import ImageMissing, Images, Unpacked
from .store import ApiError, Event, Obj, Store

log = logging.getLogger("sunk.local.agent")

BACKOFF_START, BACKOFF_CAP = 10.0, 300.0
"""The kubelet's container restart back-off (v1.32): 10 s, doubling, at most 5 minutes."""
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
LEASE_SECONDS = 40
"""The kubelet's nodeLeaseDurationSeconds; it renews the Lease every quarter of it (10 s)."""
KILL_GRACE = 2
"""Seconds the kubelet gives a container of a pod removed from the API (force-deleted): its minimum."""
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")


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


@dataclass
class Running:
    """One container of a pod: its spec and what happened to it so far."""

    spec: Obj
    kind: str
    """"init", "sidecar" or "main"."""
    restarts: int = 0
    state: Obj = field(default_factory=lambda: {"waiting": {"reason": "PodInitializing"}})
    last: Obj = field(default_factory=dict)
    started: bool = False
    ready: bool = False
    pid: int | None = None
    """The container's first process, as the host sees it."""
    proc: asyncio.subprocess.Process | None = None
    done: bool = False
    """An init container that exited 0."""
    image: Unpacked | None = None

    @property
    def name(self) -> str:
        return str(self.spec["name"])


class TokenIssuer:
    """Service account tokens the API server accepts (token -> user)."""

    def __init__(self, tokens: dict[str, str]) -> None:
        self.tokens = tokens

    def issue(self, namespace: str, account: str) -> str:
        from .pki import token

        value = token()
        self.tokens[value] = f"system:serviceaccount:{namespace}:{account}"
        return value


class Agent:
    def __init__(
        self,
        store: Store,
        workdir: Path,
        network: net.Network,
        images: Images,
        cluster_env: Mapping[str, str],
        ca: Path,
        issuer: TokenIssuer,
    ) -> None:
        self.store = store
        self.workdir = workdir
        self.network = network
        self.images = images
        self.cluster_env = dict(cluster_env)
        self.ca = ca
        self.issuer = issuer
        self.pods: dict[str, PodRunner] = {}
        self.devices: dict[str, dict[str, list[str]]] = {}
        """Node name -> pod uid -> the device files (keys.LOCAL_DEVICES) given to that pod."""
        self._free = list(range(250))
        self._pods = store.resource("v1/pods")
        self.stopped: set[str] = set()
        self.kept: dict[str, int] = {}
        """Pod uid -> its address, for pods lost with their Node: the address stays theirs (their
        status still shows it) until they start again there or are deleted."""
        """Nodes whose agent is stopped (`sunk local node stop`): no heartbeat, no pod of theirs
        runs or is looked after, as on a Node that lost power."""
        self._dirty = asyncio.Event()
        self.closing = False
        self.threads = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="sandbox")
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        self.store.listen(self._on_event)
        for pod in list(self.store.items(self._pods)):
            self._consider(pod)
        self._spawn(self._refresh_loop())
        self._spawn(self._heartbeat_loop())

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _on_event(self, event: Event) -> None:
        if event.resource == "v1/pods":
            if event.type != "DELETED":
                self._consider(event.obj)
            else:
                self._removed(event.obj)
            self._dirty.set()
        elif event.resource in ("v1/services", "v1/configmaps", "v1/secrets"):
            self._dirty.set()

    def _consider(self, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or node in self.stopped:
            return
        runner = self.pods.get(uid)
        if runner is None:
            if self.closing:
                return
            if pod["metadata"].get("deletionTimestamp"):
                self._spawn(self._forget(pod))
                return
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                return
            index = self.kept.pop(uid) if uid in self.kept else self._free.pop(0)
            runner = self.pods[uid] = PodRunner(self, pod, index)
            runner.task = self._spawn(runner.run())
        elif pod["metadata"].get("deletionTimestamp") and runner.stopping is None:
            grace = int(pod["metadata"].get("deletionGracePeriodSeconds", 30))
            runner.stopping = self._spawn(runner.stop(grace))

    def _removed(self, pod: Obj) -> None:
        """A pod gone from the API while it runs (force-deleted): the kubelet kills its containers."""
        uid = pod["metadata"]["uid"]
        if uid in self.kept:
            self._free.append(self.kept.pop(uid))
        runner = self.pods.get(uid)
        if runner is not None and runner.stopping is None and not runner.lost and not runner.detached:
            runner.stopping = self._spawn(runner.stop(KILL_GRACE))

    async def _forget(self, pod: Obj) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(ApiError):
            self.store.delete(self._pods, meta["namespace"], meta["name"], grace=0, uid=meta["uid"])

    # -- the Nodes' kubelets ----------------------------------------------------------------
    async def _heartbeat_loop(self) -> None:
        while True:
            for node in list(self.store.items(self.store.resource("v1/nodes"))):
                if node["metadata"]["name"] not in self.stopped:
                    with contextlib.suppress(ApiError):
                        self.heartbeat(node)
            await asyncio.sleep(LEASE_SECONDS / 4)

    def heartbeat(self, node: Obj) -> None:
        """What a kubelet does every 10 s: renew its Node's Lease in kube-node-lease, and post
        Ready=True when the Node does not say so (after the control plane marked it Unknown)."""
        name, now = node["metadata"]["name"], datetime.now(UTC)
        leases = self.store.resource("coordination.k8s.io/v1/leases")
        renew = {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": rfc3339_micro(now)}
        if self.store.find(leases, lifecycle.LEASE_NAMESPACE, name) is None:
            owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
            self.store.create(
                leases,
                lifecycle.LEASE_NAMESPACE,
                {"metadata": {"name": name, "ownerReferences": [owner]}, "spec": renew},
            )
        else:
            self.store.patch(leases, lifecycle.LEASE_NAMESPACE, name, "merge", {"spec": renew})
        if lifecycle.ready_status(node) != "True":
            conditions = [c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") != "Ready"]
            stamp = rfc3339(now)
            conditions.insert(
                0,
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "sunk local node agent is posting ready status",
                    "lastHeartbeatTime": stamp,
                    "lastTransitionTime": stamp,
                },
            )
            log.info("node %s: the agent posts Ready", name)
            self.store.patch(
                self.store.resource("v1/nodes"), None, name, "merge", {"status": {"conditions": conditions}}, "status"
            )

    async def stop_node(self, name: str, keep_containers: bool = False) -> str:
        """The Node's agent stops, as on a Node that lost power: no more heartbeats, its pods'
        containers and sandboxes go without a word to the API (their pods keep the status they had).
        With `keep_containers`, only the kubelet stops (it crashed, or `systemctl stop kubelet`): the
        containers run on, unwatched: no probe, no restart, no status, and a deletion in the API
        reaches none of them until the agent starts again. Returns what happened, in words."""
        self._node(name)
        self.stopped.add(name)
        on_node = [r for r in self.pods.values() if r.node == name]
        if keep_containers:
            for runner in on_node:
                runner.detached = True
            said = f"node {name}: agent stopped ({len(on_node)} pods' containers left running)"
        else:
            await asyncio.gather(*(r.lose() for r in on_node), return_exceptions=True)
            said = f"node {name}: agent stopped ({len(on_node)} pods lost)"
        log.info("%s", said)
        return said

    async def start_node(self, name: str) -> None:
        """The Node's agent starts again, as a kubelet after a reboot or a restart: it posts Ready,
        kills the containers of pods that left the API meanwhile, confirms the deletion of its pods
        that were deleted meanwhile, takes back the running ones as they are (no restart) and starts
        the others again."""
        node = self._node(name)
        self.stopped.discard(name)
        self.heartbeat(node)
        for runner in [r for r in self.pods.values() if r.node == name and r.detached]:
            self._take_back(runner)
        for pod in list(self.store.items(self._pods)):
            if (pod.get("spec") or {}).get("nodeName") == name:
                self._consider(pod)
        log.info("node %s: agent started", name)

    def _take_back(self, runner: PodRunner) -> None:
        """A pod whose containers ran on while the agent was stopped: if the API no longer has it
        (force-deleted, collected), its containers are orphans and are killed; otherwise the agent
        reports it again (a deletion meanwhile is then acted on by `_consider`)."""
        runner.detached = False
        current = self.store.find(self._pods, runner.namespace, runner.name)
        if current is None or current["metadata"]["uid"] != runner.uid:
            log.info("pod %s/%s: gone from the API while the agent was stopped; killing its containers",
                     runner.namespace, runner.name)  # fmt: skip
            if runner.stopping is None:
                runner.stopping = self._spawn(runner.stop(KILL_GRACE))
            return
        runner.pod = current
        runner.published = None
        runner.publish()

    def _node(self, name: str) -> Obj:
        node = self.store.find(self.store.resource("v1/nodes"), None, name)
        if node is None:
            raise ApiError(404, "NotFound", f'nodes "{name}" not found')
        return node

    def release(self, runner: PodRunner, keep_address: bool = False) -> None:
        self.pods.pop(runner.uid, None)
        for held in self.devices.values():
            held.pop(runner.uid, None)
        if keep_address and self.store.find(self._pods, runner.namespace, runner.name) is not None:
            self.kept[runner.uid] = runner.index
        elif runner.index not in self._free:
            self._free.append(runner.index)

    def give_devices(self, pod: Obj) -> dict[str, list[str]]:
        """Container name -> the Node's device files it gets, as a device plugin allocates them: a
        privileged container sees all of them; one that requests the Node's GPU resource gets that
        many of those no other pod on the Node holds. The pod keeps them until it is released."""
        spec = pod.get("spec") or {}
        node = self.store.find(self.store.resource("v1/nodes"), None, spec.get("nodeName") or "")
        if node is None:
            return {}
        held = self.devices.setdefault(node["metadata"]["name"], {})
        taken = {f for uid, mine in held.items() if uid != pod["metadata"]["uid"] for f in mine}
        out = inventory.allocate_devices(pod, node, taken)
        privileged = {
            c["name"]
            for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
            if (c.get("securityContext") or {}).get("privileged")
        }
        mine = [f for name, files in out.items() if name not in privileged for f in files]
        held[pod["metadata"]["uid"]] = mine
        return out

    async def _refresh_loop(self) -> None:
        """Rewrites /etc/hosts and the ConfigMap/Secret volumes of running pods after changes."""
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            await asyncio.sleep(0.5)  # a burst of writes (an apply) is one refresh
            for runner in list(self.pods.values()):
                with contextlib.suppress(Exception):
                    runner.refresh()

    # -- what the API server asks -------------------------------------------------------------
    def _reachable(self, runner: PodRunner | None) -> None:
        """Logs and exec go through the Node's kubelet: none while its agent is stopped."""
        node = runner.node if runner else ""
        if runner is not None and (runner.detached or node in self.stopped):
            raise ApiError(502, "InternalError", f"error dialing backend: the node agent of {node} is stopped")

    def log_path(self, pod: Obj, container: str, previous: bool) -> Path | None:
        self._reachable(self.pods.get(pod["metadata"]["uid"]))
        folder = self.workdir / "pods" / pod["metadata"]["uid"] / "logs" / container
        found = sorted(int(p.stem) for p in folder.glob("*.log")) if folder.is_dir() else []
        if not found:
            return None
        # The newest log is the running container's, or while it waits to restart the one that
        # ended last; --previous is the one before it, as the kubelet keeps them.
        number = found[-1] - (1 if previous else 0)
        return folder / f"{number}.log" if number >= 0 else None

    def exec_argv(self, pod: Obj, container: str, command: Sequence[str]) -> list[str]:
        runner = self.pods.get(pod["metadata"]["uid"])
        self._reachable(runner)
        running = runner.containers.get(container) if runner else None
        if runner is None or running is None or running.pid is None:
            raise ApiError(400, "BadRequest", f"container {container} is not running")
        return runner.exec_argv(running, command)

    async def close(self) -> None:
        self.closing = True
        for runner in list(self.pods.values()):
            runner.finishing = True
            runner.kill_all()
        await asyncio.gather(*(r.teardown() for r in list(self.pods.values())), return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()

    # -- names ------------------------------------------------------------------------------
    def dns_table(self) -> dict[str, list[str]]:
        """Every cluster.local name the cluster's DNS server answers (dns.py), from `hosts`."""
        table: dict[str, list[str]] = {}
        namespaces = {p["metadata"]["namespace"] for p in self.store.items(self._pods)}
        for namespace in namespaces:
            for address, names in self.hosts(namespace):
                for name in names:
                    if name.endswith(".svc.cluster.local"):
                        found = table.setdefault(name.lower(), [])
                        if address not in found:
                            found.append(address)
        return table

    def hosts(self, namespace: str) -> list[tuple[str, list[str]]]:
        """(address, names) lines every pod of `namespace` gets besides its own."""
        pods = [p for p in self.store.items(self._pods) if (p.get("status") or {}).get("podIP")]
        out: list[tuple[str, list[str]]] = []
        for svc in self.store.items(self.store.resource("v1/services")):
            meta, spec = svc["metadata"], svc.get("spec") or {}
            selector = spec.get("selector") or {}
            if not selector:
                continue
            ns = meta["namespace"]
            members = [
                p
                for p in pods
                if p["metadata"]["namespace"] == ns
                and all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
                and not p["metadata"].get("deletionTimestamp")
            ]
            ready = [p for p in members if _ready(p)] or (members if spec.get("publishNotReadyAddresses") else [])
            names = [f"{meta['name']}.{ns}.svc.cluster.local", f"{meta['name']}.{ns}.svc", f"{meta['name']}.{ns}"]
            if ns == namespace:
                names.append(meta["name"])
            if ready:
                out.append((ready[0]["status"]["podIP"], names))
            if spec.get("clusterIP") == "None":
                for p in members:
                    pspec = p.get("spec") or {}
                    if pspec.get("subdomain") == meta["name"] and pspec.get("hostname"):
                        fqdn = f"{pspec['hostname']}.{meta['name']}.{ns}.svc.cluster.local"
                        out.append((p["status"]["podIP"], [fqdn, f"{pspec['hostname']}.{meta['name']}"]))
        return out


def in_root(root: Path, target: str, limit: int = 40) -> str:
    """`target` inside a container's root with every symlink on the way resolved inside that root
    (an absolute link starts again from the root, `..` stops at it), as a container runtime
    resolves a mount point: Debian's /var/run is a link to /run, and the host's /run must never be
    what a volume is mounted on."""
    parts = [p for p in target.split("/") if p and p != "."]
    done: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = root.joinpath(*done, part)
        if candidate.is_symlink():
            hops += 1
            if hops > limit:
                raise spec_of.ConfigError(f"mount point {target}: too many levels of symbolic links")
            link = os.readlink(candidate)
            if link.startswith("/"):
                done = []
            parts = [p for p in link.split("/") if p and p != "."] + parts
            continue
        done.append(part)
    return "/" + "/".join(done)


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _port(container: Obj, port: Any) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for p in container.get("ports") or []:
        if p.get("name") == port:
            return int(p["containerPort"])
    raise ValueError(f"no port named {port}")


class PodRunner:
    def __init__(self, agent: Agent, pod: Obj, index: int) -> None:
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
        self.jail: Jail | None = None
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
        self.token: str | None = None
        self.finishing = False
        self._sandboxing: concurrent.futures.Future[None] | None = None

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
                    await self._kill(r, 30)
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
                self.publish()
                await asyncio.sleep(10)
                if self.stopping is not None:
                    return
        while True:  # volumes: wait for their ConfigMaps, Secrets and claims
            try:
                self._volumes()
                break
            except (spec_of.ConfigError, ApiError) as err:
                self.message = f"MountVolume.SetUp failed: {err}"
                for r in self.containers.values():
                    r.state = {"waiting": {"reason": "ContainerCreating"}}
                self.publish()
                await asyncio.sleep(2)
                if self.stopping is not None:
                    return
        self.message = None
        if self.finishing:
            return
        # In a thread it can't be cancelled half-way; teardown waits for it (see there).
        self._sandboxing = self.agent.threads.submit(self._sandbox)
        await asyncio.shield(asyncio.wrap_future(self._sandboxing))
        self.sandbox = True
        if self.finishing:  # the cluster began stopping while the sandbox was made
            return
        self.publish()

    def _lookup(self, kind: str) -> Callable[[str, str], Mapping[str, bytes] | None]:
        res = self.agent.store.resource(f"v1/{kind}")

        def find(namespace: str, name: str) -> Mapping[str, bytes] | None:
            obj = self.agent.store.find(res, namespace, name)
            if obj is None:
                return None
            return spec_of.decoded(obj) if kind == "secrets" else spec_of.configmap_bytes(obj)

        return find

    def _text_lookup(self, kind: str) -> spec_of.Lookup:
        find = self._lookup(kind)

        def text(namespace: str, name: str) -> Mapping[str, str] | None:
            data = find(namespace, name)
            return None if data is None else {k: v.decode(errors="replace") for k, v in data.items()}

        return text

    @property
    def fs_group(self) -> int | None:
        group = ((self.pod.get("spec") or {}).get("securityContext") or {}).get("fsGroup")
        return None if group is None else int(group)

    def _volumes(self) -> None:
        """Host folders for every volume (files written, claims bound)."""
        spec = self.pod.get("spec") or {}
        base = self.folder / "volumes"
        for volume in spec.get("volumes") or []:
            folder = base / volume["name"]
            files = spec_of.volume_files(self.pod, volume, self._lookup("configmaps"), self._lookup("secrets"))
            if files is not None:
                files = self._with_token(volume, files)
                volumes.write_atomic(folder, files, self.fs_group)
                self.volume_sources[volume["name"]] = volume
            elif "emptyDir" in volume:
                volumes.empty_dir(folder, self.fs_group)
            elif "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"]["claimName"]
                pvc = self.agent.store.find(
                    self.agent.store.resource("v1/persistentvolumeclaims"), self.namespace, claim
                )
                if pvc is None:
                    raise ApiError(404, "NotFound", f'persistentvolumeclaim "{claim}" not found')
                volumes.claim_ownership(volumes.pvc_dir(self.agent.workdir, self.namespace, claim), self.fs_group)
        if self._automount():
            files = {
                "token": (self._token().encode(), 0o644),
                "ca.crt": (self.agent.ca.read_bytes(), 0o644),
                "namespace": (self.namespace.encode(), 0o644),
            }
            volumes.write_atomic(base / "..serviceaccount", files, self.fs_group)

    def _with_token(self, volume: Obj, files: dict[str, spec_of.File]) -> dict[str, spec_of.File]:
        for source in (volume.get("projected") or {}).get("sources") or []:
            if "serviceAccountToken" in source:
                path = source["serviceAccountToken"].get("path", "token")
                files[path] = (self._token().encode(), files[path][1])
        return files

    def _token(self) -> str:
        if self.token is None:
            account = (self.pod.get("spec") or {}).get("serviceAccountName") or "default"
            self.token = self.agent.issuer.issue(self.namespace, account)
        return self.token

    def _automount(self) -> bool:
        spec = self.pod.get("spec") or {}
        if spec.get("automountServiceAccountToken") is False:
            return False
        mounts = [m for c in self.containers.values() for m in c.spec.get("volumeMounts") or []]
        return not any(m.get("mountPath") == SERVICE_ACCOUNT_DIR for m in mounts)

    def _sandbox(self) -> None:
        """Namespaces, network, root filesystems and mounts (blocking: runs in a thread)."""
        spec = self.pod.get("spec") or {}
        hostname = spec.get("hostname") or self.name
        lowers = {name: r.image.rootfs for name, r in self.containers.items() if r.image is not None}
        (self.folder / "logs").mkdir(parents=True, exist_ok=True)
        self.jail = Jail(self.folder / "sandbox", lowers, namespaces=("net", "uts", "ipc"), hostname=hostname[:63])
        self.jail.open()
        # A cluster process killed with SIGKILL can't stop this holder: `sunk local down` finds it here.
        (self.folder / "holder.pid").write_text(str(self.jail.holder))
        net.run(net.pod_up(self.agent.network, self.index, self.jail.holder))
        etc = self.folder / "etc"
        etc.mkdir(exist_ok=True)
        (etc / "hostname").write_text(hostname + "\n")
        search = f"{self.namespace}.svc.cluster.local svc.cluster.local cluster.local"
        (etc / "resolv.conf").write_text(f"search {search}\nnameserver {self.agent.network.gateway}\noptions ndots:5\n")
        self.write_hosts()
        self.devices = self.agent.give_devices(self.pod)
        for name in self.containers:
            self._mount_container(name, etc)

    def _mount_container(self, name: str, etc: Path) -> None:
        assert self.jail is not None
        jail, real = self.jail, self.jail.real(name)
        dev = jail.root(name) / "dev"
        dev.mkdir(exist_ok=True)
        jail.mount_at(["-t", "tmpfs", "-o", "mode=0755,nosuid", "tmpfs"], real / "dev")
        for device in DEVICES:
            (jail.root(name) / "dev" / device).touch()
            jail.mount_at(["--bind", f"/dev/{device}"], real / "dev" / device)
        for link, target in (
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ):
            (jail.root(name) / "dev" / link).symlink_to(target)
        for device in self.devices.get(name, []):  # the Node's GPUs: fakes, as the harness's (/dev/null)
            inside = jail.root(name) / device.lstrip("/")
            inside.parent.mkdir(parents=True, exist_ok=True)
            inside.touch()
            jail.mount_at(["--bind", "/dev/null"], real / device.lstrip("/"))
        (jail.root(name) / "dev" / "shm").mkdir()
        jail.mount_at(["-t", "tmpfs", "-o", "mode=1777,nosuid,nodev,size=64m", "tmpfs"], real / "dev" / "shm")
        for file in ("hosts", "hostname", "resolv.conf"):
            jail.bind(name, etc / file, in_root(jail.root(name), f"/etc/{file}"))
        mounts = sorted(self.containers[name].spec.get("volumeMounts") or [], key=lambda m: m["mountPath"].count("/"))
        if self._automount():
            mounts.append({"name": "..serviceaccount", "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": True})
        vols = {v["name"]: v for v in (self.pod.get("spec") or {}).get("volumes") or []}
        for mount in mounts:
            source = self._source(vols.get(mount["name"]), mount["name"])
            if mount.get("subPath"):
                source = source / mount["subPath"]
                if source.is_symlink():  # a ConfigMap key: bind the file it names now (no updates)
                    source = source.resolve()
                if not source.exists():  # made where the container sees it (a Memory emptyDir is a tmpfs there)
                    jail.makedirs(source)
            target = in_root(jail.root(name), mount["mountPath"])
            jail.bind(name, source, target, read_only=bool(mount.get("readOnly")))

    def _source(self, volume: Obj | None, name: str) -> Path:
        if name == "..serviceaccount":
            return self.folder / "volumes" / name
        if volume is None:
            raise spec_of.ConfigError(f"volume {name} is mounted but not declared")
        if "persistentVolumeClaim" in volume:
            return volumes.pvc_dir(self.agent.workdir, self.namespace, volume["persistentVolumeClaim"]["claimName"])
        if "hostPath" in volume:
            path = Path(volume["hostPath"]["path"])
            if volume["hostPath"].get("type") in ("DirectoryOrCreate",) and not path.exists():
                path.mkdir(parents=True)
            return path
        if "emptyDir" in volume and (volume["emptyDir"] or {}).get("medium") == "Memory":
            folder = self.folder / "volumes" / name
            mounted = self.folder / "volumes" / f"{name}.tmpfs-mounted"
            if not mounted.exists():
                assert self.jail is not None
                size = (volume["emptyDir"] or {}).get("sizeLimit")
                options = "mode=0777" if self.fs_group is None else f"mode=2777,gid={self.fs_group}"
                if size:
                    options += f",size={int(spec_of.quantity(str(size)))}"
                self.jail.mount_at(["-t", "tmpfs", "-o", options, "tmpfs"], folder)
                mounted.touch()
            return folder
        return self.folder / "volumes" / name

    def write_hosts(self) -> None:
        spec = self.pod.get("spec") or {}
        hostname = spec.get("hostname") or self.name
        lines = [
            "# Kubernetes-managed hosts file (the local cluster's).",
            "127.0.0.1\tlocalhost",
            "::1\tlocalhost ip6-localhost ip6-loopback",
        ]
        own = [hostname]
        if spec.get("subdomain"):
            own.insert(0, f"{hostname}.{spec['subdomain']}.{self.namespace}.svc.cluster.local")
        lines.append(f"{self.ip}\t{' '.join(own)}")
        for address, names in self.agent.hosts(self.namespace):
            lines.append(f"{address}\t{' '.join(names)}")
        text = "\n".join(lines) + "\n"
        path = self.folder / "etc" / "hosts"
        if not path.exists() or path.read_text() != text:
            with path.open("r+" if path.exists() else "w") as handle:  # in place: it is bound into the roots
                handle.seek(0)
                handle.write(text)
                handle.truncate()

    def refresh(self) -> None:
        if not self.sandbox or self.jail is None:
            return
        self.write_hosts()  # names stand in for cluster DNS, which lives on without the kubelet
        if self.detached:  # volume contents are the kubelet's to refresh
            return
        base = self.folder / "volumes"
        for name, volume in self.volume_sources.items():
            with contextlib.suppress(spec_of.ConfigError):
                files = spec_of.volume_files(self.pod, volume, self._lookup("configmaps"), self._lookup("secrets"))
                if files is not None:
                    volumes.write_atomic(base / name, self._with_token(volume, files), self.fs_group)

    # -- containers --------------------------------------------------------------------------
    def _launch_file(self, running: Running) -> Path:
        assert running.image is not None and self.jail is not None
        current = self.agent.store.find(self.agent._pods, self.namespace, self.name) or self.pod
        current.setdefault("status", {})["podIP"] = self.ip
        current["status"]["hostIP"] = self.agent.network.gateway
        launch = spec_of.launch(
            current,
            running.spec,
            running.image.image,
            self._text_lookup("configmaps"),
            self._text_lookup("secrets"),
            self.agent.cluster_env,
        )
        caps = launch.capabilities
        if caps == (spec_of.ALL_CAPABILITIES,):
            from .enter import CAPABILITIES

            caps = tuple(CAPABILITIES)
        data = {
            "root": str(self.jail.real(running.name)),
            "argv": list(launch.argv),
            "env": dict(launch.env) | self._device_env(running.name),
            "uid": launch.uid,
            "gid": launch.gid,
            "groups": list(launch.groups),
            "capabilities": list(caps),
            "noNewPrivs": launch.no_new_privs,
            "readOnlyRoot": launch.read_only_root,
            "cwd": launch.cwd,
        }
        path = self.folder / "run" / f"{running.name}.json"
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle)
        return path

    def _device_env(self, container: str) -> dict[str, str]:
        """NVIDIA_VISIBLE_DEVICES, as the NVIDIA device plugin sets it, for a container given GPUs
        by request (indices here, where a real plugin names GPU UUIDs)."""
        given = self.devices.get(container, [])
        if not given or (self.containers[container].spec.get("securityContext") or {}).get("privileged"):
            return {}
        return {"NVIDIA_VISIBLE_DEVICES": ",".join(re.sub(r"^\D*", "", f) or f for f in given)}

    def _enter(self) -> list[str]:
        return [sys.executable, "-m", "sunk.runtime.local.enter"]

    def exec_argv(self, running: Running, command: Sequence[str]) -> list[str]:
        launch = self.folder / "run" / f"{running.name}.json"
        flags = ["--mount", "--net", "--uts", "--ipc", "--pid"]
        return ["nsenter", f"--target={running.pid}", *flags, "--", *self._enter(), str(launch), *command]

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
                self.publish()
                await asyncio.sleep(2)
                continue
            self.publish()
            probes = asyncio.create_task(self._probe(running))
            assert running.proc is not None
            code = await running.proc.wait()
            probes.cancel()
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
        self.publish()
        while restart_wait(backoff, ended, loop.time()) > 0 and self.stopping is None and not self.finishing:
            await asyncio.sleep(0.5)
        return backoff_after_restart(backoff, ended, loop.time())

    async def _probe(self, running: Running) -> None:
        spec = running.spec
        startup, readiness, liveness = spec.get("startupProbe"), spec.get("readinessProbe"), spec.get("livenessProbe")
        if startup:
            if not await self._until(running, startup, want=True):
                await self._kill(running, int((self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)))
                return
            running.started = True
            self.publish()
        tasks = []
        if readiness:
            tasks.append(asyncio.create_task(self._readiness(running, readiness)))
        else:
            running.ready = running.kind != "init"
            self.publish()
        if liveness:
            tasks.append(asyncio.create_task(self._liveness(running, liveness)))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    async def _until(self, running: Running, probe: Obj, *, want: bool) -> bool:
        """Probe until success (True) or failureThreshold failures in a row (False)."""
        await asyncio.sleep(float(probe.get("initialDelaySeconds", 0)))
        failures, threshold = 0, int(probe.get("failureThreshold", 3))
        while True:
            if await self._check(running, probe):
                return True
            failures += 1
            if failures >= threshold:
                return False
            await asyncio.sleep(float(probe.get("periodSeconds", 10)))

    async def _readiness(self, running: Running, probe: Obj) -> None:
        await asyncio.sleep(float(probe.get("initialDelaySeconds", 0)))
        failures = successes = 0
        while True:
            if await self._check(running, probe):
                failures, successes = 0, successes + 1
                if not running.ready and successes >= int(probe.get("successThreshold", 1)):
                    running.ready = True
                    self.publish()
            else:
                successes, failures = 0, failures + 1
                if running.ready and failures >= int(probe.get("failureThreshold", 3)):
                    running.ready = False
                    self.publish()
            await asyncio.sleep(float(probe.get("periodSeconds", 10)))

    async def _liveness(self, running: Running, probe: Obj) -> None:
        if not await self._until(running, probe, want=True):
            return
        while True:
            await asyncio.sleep(float(probe.get("periodSeconds", 10)))
            if not await self._until(running, {**probe, "initialDelaySeconds": 0}, want=True):
                log.info("%s/%s %s: liveness probe failed; restarting", self.namespace, self.name, running.name)
                await self._kill(running, int((self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)))
                return

    async def _check(self, running: Running, probe: Obj) -> bool:
        while self.detached:  # the kubelet is the prober
            await asyncio.sleep(0.5)
        timeout = float(probe.get("timeoutSeconds", 1))
        try:
            if "exec" in probe:
                if running.pid is None:
                    return False
                proc = await asyncio.create_subprocess_exec(
                    *self.exec_argv(running, probe["exec"].get("command") or []),
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
                _, writer = await asyncio.wait_for(asyncio.open_connection(self.ip, port), timeout)
                writer.close()
                return True
            if "httpGet" in probe:
                get = probe["httpGet"]
                url = f"{get.get('scheme', 'HTTP').lower()}://{self.ip}:{_port(running.spec, get['port'])}{get.get('path', '/')}"
                async with (
                    aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
                    session.get(url, ssl=False) as reply,
                ):
                    return 200 <= reply.status < 400
        except (OSError, TimeoutError, aiohttp.ClientError, ValueError):
            return False
        return False

    async def _kill(self, running: Running, grace: float) -> None:
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
        await asyncio.gather(*(self._kill(r, grace) for r in mains))
        for r in reversed([r for r in self.containers.values() if r.kind == "sidecar"]):
            await self._kill(r, 2)
        for task in self.supervisors:
            task.cancel()
        if self.task is not None:
            self.task.cancel()
        await self.teardown()
        self.agent.release(self)
        with contextlib.suppress(ApiError):  # this pod, not one of the same name made since
            self.agent.store.delete(self.agent._pods, self.namespace, self.name, grace=0, uid=self.uid)
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

    def _close_jail(self, jail: Jail) -> None:
        net.run(net.pod_down(self.agent.network, self.index), check=False)
        jail.close()
        shutil.rmtree(jail.workdir, ignore_errors=True)

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
            "qosClass": "Burstable",
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
        current = self.agent.store.find(self.agent._pods, self.namespace, self.name)
        if current is None or current["metadata"]["uid"] != self.uid:
            return
        old = {c["type"]: c for c in (current.get("status") or {}).get("conditions") or []}
        for c in status["conditions"]:
            if old.get(c["type"], {}).get("status") == c["status"]:
                c["lastTransitionTime"] = old[c["type"]].get("lastTransitionTime", c["lastTransitionTime"])
        with contextlib.suppress(ApiError):
            self.agent.store.patch(self.agent._pods, self.namespace, self.name, "merge", {"status": status}, "status")
