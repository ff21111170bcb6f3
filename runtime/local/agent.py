"""The node agent: what the kubelets of the local cluster's Nodes do towards the API server.

- each Node's heartbeat: its Lease in kube-node-lease renewed every 10 s, and Ready=True posted
  when the Node does not say so (after the control plane marked it Unknown: kube-controller-manager's node lifecycle);
- the watch on pods: a pod bound to a Node gets a pod runner (podrunner.py: sandbox, containers,
  probes, restarts, status) and an address on the bridge; a deletion stops it gracefully, a pod
  force-deleted from the API has its containers killed (KILL_GRACE);
- the Node's devices, given to pods as a device plugin allocates them (inventory.py decides);
- what the API server asks of a kubelet: a container's log file, and the argv of an exec;
- names: the /etc/hosts lines of every pod and the table the cluster's DNS server (dns.py) answers
  from, rewritten when pods or Services change: pod FQDNs under headless Services, and each
  Service's names (short, namespaced and cluster.local) to its first ready endpoint, which stands
  in for a ClusterIP (offcluster.py lists it).

A Node's agent can stop two ways (`stop_node`): as a Node losing power (its containers and sandboxes
go, nothing reaches the API), or as a kubelet that crashed (`keep_containers`: the containers run
on, unwatched, and API deletions don't reach them; when the agent starts again it kills the
containers of pods the API no longer has, stops the Terminating ones, and takes the rest back
without restarting them). While it is stopped, logs and exec of its pods fail, as they go through
the kubelet.

Not modelled: Node registration by the agent (cluster.py writes the Nodes inventory.py derives),
the kubelet's own API on port 10250 (the API server asks the agent in process), node status
beyond Ready (no capacity updates, no pressure conditions), static pods, the kubelet's eviction
under pressure.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..common.timefmt import rfc3339, rfc3339_micro
from . import events, inventory, net
from .apitypes import ApiError, Event, Obj, Store
from .images import Images
from .podrunner import PodRunner
from .remote import LEASE_NAMESPACE
from .sandbox import PodSandbox
from .tokens import Issuer

log = logging.getLogger("sunk.local.agent")

LEASE_SECONDS = 40
"""The kubelet's nodeLeaseDurationSeconds; it renews the Lease every quarter of it (10 s)."""
KILL_GRACE = 2
SYNC_SECONDS = 60.0
"""The kubelet's syncFrequency: a running pod's volumes are refreshed at least this often, which is
when a projected token that is due is renewed (tokens.py), besides after every change seen."""
"""Seconds the kubelet gives a container of a pod removed from the API (force-deleted): its minimum."""


class Agent:
    """The kubelets of every Node of the cluster, in one process: the pods bound to them run here."""

    def __init__(
        self,
        store: Store,
        workdir: Path,
        network: net.Network,
        images: Images,
        cluster_env: Mapping[str, str],
        ca: Path,
        issuer: Issuer,
        *,
        sync_seconds: float = SYNC_SECONDS,
    ) -> None:
        self.store = store
        self.workdir = workdir
        self.network = network
        self.images = images
        self.cluster_env = dict(cluster_env)
        self.ca = ca
        self.issuer = issuer
        self.sync_seconds = sync_seconds
        self.recorder = events.Recorder(store, "kubelet")
        """The kubelets' Events (one recorder for every Node: each Event names its host)."""
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
        if self.store.find(leases, LEASE_NAMESPACE, name) is None:
            owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"]["uid"]}
            self.store.create(
                leases,
                LEASE_NAMESPACE,
                {"metadata": {"name": name, "ownerReferences": [owner]}, "spec": renew},
            )
        else:
            self.store.patch(leases, LEASE_NAMESPACE, name, "merge", {"spec": renew})
        if ready_status(node) != "True":
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

    def release(self, runner: PodSandbox, keep_address: bool = False) -> None:
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
        """Rewrites /etc/hosts and the ConfigMap/Secret volumes of running pods after changes, and
        every `sync_seconds` (tokens that are due renewed)."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._dirty.wait(), self.sync_seconds)
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

    def netns_argv(self, pod: Obj) -> list[str]:
        """The argv prefix that runs a host command in the pod's network namespace (port-forward)."""
        runner = self.pods.get(pod["metadata"]["uid"])
        self._reachable(runner)
        if runner is None or runner.jail is None:
            raise ApiError(400, "BadRequest", f"pod {pod['metadata']['name']} has no sandbox running")
        return ["nsenter", f"--net=/proc/{runner.jail.holder}/ns/net", "--"]

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
            out += service_hosts(svc, pods, namespace)
        return out


def service_hosts(svc: Obj, pods: list[Obj], namespace: str) -> list[tuple[str, list[str]]]:
    """The (address, names) lines one Service gives the pods of `namespace`: its names (the short
    one only in its own namespace) at its first ready endpoint (any endpoint with
    publishNotReadyAddresses), and for a headless Service each member's hostname under it. A
    Service without a selector has no lines (its endpoints are not modelled)."""
    meta, spec = svc["metadata"], svc.get("spec") or {}
    selector = spec.get("selector") or {}
    if not selector:
        return []
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
    out: list[tuple[str, list[str]]] = []
    if ready:
        out.append((ready[0]["status"]["podIP"], names))
    if spec.get("clusterIP") == "None":
        out += _headless_hosts(meta["name"], ns, members)
    return out


def _headless_hosts(service: str, ns: str, members: list[Obj]) -> list[tuple[str, list[str]]]:
    """A headless Service's members that name it as their subdomain, by hostname (StatefulSet pods)."""
    out: list[tuple[str, list[str]]] = []
    for p in members:
        pspec = p.get("spec") or {}
        if pspec.get("subdomain") == service and pspec.get("hostname"):
            fqdn = f"{pspec['hostname']}.{service}.{ns}.svc.cluster.local"
            out.append((p["status"]["podIP"], [fqdn, f"{pspec['hostname']}.{service}"]))
    return out


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def ready_status(node: Obj) -> str:
    """The Node's Ready condition: "True", "False" or "Unknown" (absent counts as Unknown)."""
    found = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    return str(found.get("status", "Unknown")) if found else "Unknown"
