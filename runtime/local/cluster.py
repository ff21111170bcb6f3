"""The local cluster's process: Kubernetes' own control plane (controlplane.py), our node agents as
its kubelets (nodeagents.py), the claims' provisioner (provisioner.py) and a control socket, in one
asyncio loop, on a bridge of its own. `python -m sunk.runtime.local serve --workdir W` runs it until
SIGTERM; runtime/local/cli.py starts and stops it.

Its folder W holds everything it makes: state.json (its PID, the API server's URL and the network),
the control plane's folder (kubeconfig, PKI, etcd, logs), the pods' folders and the claims' folders.
At exit it stops every pod (the mounts go with each pod's namespaces), the control plane, and
removes the veths, the bridge and its firewall rules.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import aiohttp.web

from . import hostsettings, inventory, net, nodeagents
from .apitypes import ApiError
from .controlplane import ControlPlane, Settings
from .nodeagents import NodeAgents
from .provisioner import STORAGE_CLASSES, HttpApi, Provisioner, storage_classes

log = logging.getLogger("sunk.local")

NODES_FILE = "nodes.json"
"""The Nodes the cluster starts with (inventory.py), written by `sunk local up`; absent: one large Node."""
POD_API_PORT = 443
"""Where pods reach the API server, on the bridge's address: the `kubernetes` Service's port, so a
NetworkPolicy admitting the API on 443 (the render's default) admits it here too."""


@dataclass(frozen=True)
class State:
    """What state.json says of a running local cluster."""

    pid: int
    port: int
    bridge: str
    subnet: str
    kubeconfig: str
    project: str
    server: str
    """The API server's URL as kubectl dials it."""
    control: str
    """The cluster process's own socket (node stop/start, Nodes added): CONTROL_SOCKET."""

    @property
    def url(self) -> str:
        return self.server

    @staticmethod
    def read(workdir: Path) -> State | None:
        path = workdir / "state.json"
        if not path.is_file():
            return None
        try:
            return State(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            return None


def release_host_settings(bridge: str) -> None:
    """The host settings this cluster changed, put back unless another running cluster (a bridge
    still up) holds them."""
    up = set(net.bridges())
    hostsettings.release(bridge, lambda other: other in up)


CONTROL_SOCKET = "control.sock"
"""The cluster process's own socket in its folder (mode 0700): `sunk local node` and `apply` reach
the node agents through it. A file, not a port: whoever may read the folder may drive it."""


def control_app(agents: NodeAgents) -> aiohttp.web.Application:
    """POST /nodes/NAME/stop|stop-keep-containers|start (`sunk local node`), POST /nodes with a
    JSON list of Nodes (`sunk local apply` adding a NodeSet's Nodes). Answers {"message": ...}."""
    verbs = ("stop", "stop-keep-containers", "start")

    async def node(request: aiohttp.web.Request) -> aiohttp.web.Response:
        name, verb = request.match_info["name"], request.match_info["verb"]
        agent = agents.agent
        if verb not in verbs or agent is None:
            return aiohttp.web.json_response({"message": f"POST /nodes/NAME/{'|'.join(verbs)}"}, status=404)
        if agents.store is None or agents.store.find(agents.store.resource("v1/nodes"), None, name) is None:
            return aiohttp.web.json_response({"message": f'nodes "{name}" not found'}, status=404)
        if verb == "start":
            await agent.start_node(name)
            said = f"node {name}: agent started"
        else:
            said = await agent.stop_node(name, keep_containers=verb == "stop-keep-containers")
        return aiohttp.web.json_response({"message": said})

    async def add(request: aiohttp.web.Request) -> aiohttp.web.Response:
        nodes = await request.json()
        added = await asyncio.to_thread(agents.add_nodes, nodes)
        try:
            await agents.schedulable(added)
        except TimeoutError as late:
            return aiohttp.web.json_response({"message": str(late), "added": added}, status=503)
        return aiohttp.web.json_response({"message": f"nodes added: {' '.join(added) or 'none'}", "added": added})

    app = aiohttp.web.Application()
    app.router.add_post("/nodes/{name}/{verb}", node)
    app.router.add_post("/nodes", add)
    return app


async def serve(workdir: Path, project: str, settings: Settings | None = None) -> None:
    """The local cluster: Kubernetes' own control plane (controlplane.py, built by `sunk local
    controlplane build`), our node agents as its kubelets (nodeagents.py), claims provisioned as
    host folders (provisioner.py). What stays ours is what a kubelet, a CNI and kube-proxy do."""
    settings = settings or Settings()
    workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
    stale = net.Network(net.bridge_name(str(workdir)), ipaddress.IPv4Network("10.233.0.0/24"))
    net.remove_rules(stale)  # left by a process that was killed: start clean
    if stale.bridge in net.bridges():
        net.run(net.bridge_down(stale), check=False)
    network = nodeagents.open_network(workdir)
    plane = ControlPlane.for_pods(workdir / "plane", network.gateway, settings)
    agents: NodeAgents | None = None
    provisioner: Provisioner | None = None
    runner: aiohttp.web.AppRunner | None = None
    try:
        await asyncio.to_thread(plane.start)
        nodes_file = workdir / NODES_FILE
        nodes = json.loads(nodes_file.read_text()) if nodes_file.is_file() else inventory.default()
        agents = NodeAgents(plane, workdir, network)
        await agents.start(nodes)
        pki_dir = plane.folder / "pki"
        api = HttpApi(plane.server, pki_dir / "ca.crt", pki_dir / "admin.crt", pki_dir / "admin.key")
        # A default StorageClass from the start, as kind's or k3s's: a render applied with plain
        # kubectl (the GitOps path) gets its unclassed claims provisioned, not left Pending.
        for klass in storage_classes():
            try:
                api.create(STORAGE_CLASSES, klass)
            except ApiError as err:
                if err.code != 409:
                    raise
        provisioner = Provisioner(api, workdir)
        provisioner.start()
        runner = aiohttp.web.AppRunner(control_app(agents), handle_signals=False, access_log=None)
        await runner.setup()
        socket_path = workdir / CONTROL_SOCKET
        socket_path.unlink(missing_ok=True)
        await aiohttp.web.UnixSite(runner, str(socket_path)).start()
        os.chmod(socket_path, 0o600)
        state = State(
            os.getpid(), POD_API_PORT, network.bridge, str(network.subnet), str(plane.kubeconfig), project,
            plane.server, str(socket_path),
        )  # fmt: skip
        (workdir / "state.json").write_text(json.dumps(state.__dict__))
        log.info("local cluster serving on %s (pods on %s)", plane.server, network.subnet)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("stopping")
    finally:
        if runner is not None:
            await runner.cleanup()
        if provisioner is not None:
            provisioner.close()
        if agents is not None:
            await agents.close()
        await asyncio.to_thread(plane.stop)
        nodeagents.close_network(network)
        (workdir / "state.json").unlink(missing_ok=True)
