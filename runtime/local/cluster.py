"""The local cluster's process: the API server, the controllers and the node agent in one asyncio
loop, on a bridge of its own. `python -m sunk.runtime.local serve --workdir W` runs it until
SIGTERM; runtime/local/cli.py starts and stops it.

Its folder W holds everything it makes: state.json (its PID, port and network), the kubeconfig
and the PKI, the pods' folders and the claims' folders. At exit it stops every pod (the mounts
go with each pod's namespaces), removes the veths, the bridge and its firewall rules.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import signal
import socket
from dataclasses import dataclass
from pathlib import Path

import aiohttp.web

from . import admission, dns, hostsettings, inventory, lifecycle, net, netpolicy, nodeagents, pki, rbac
from .agent import Agent, TokenIssuer
from .api import ApiServer, tls_context
from .controllers import Controllers
from .controlplane import ControlPlane
from .images import Images
from .nodeagents import NodeAgents
from .ports import Ports
from .provisioner import HttpApi, Provisioner
from .store import Store

log = logging.getLogger("sunk.local")

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
NODES_FILE = "nodes.json"
"""The Nodes the cluster starts with (inventory.py), written by `sunk local up`; absent: one large Node."""
POD_API_PORT = 443
"""Where pods reach the API server, on the bridge's address: the `kubernetes` Service's port, so a
NetworkPolicy admitting the API on 443 (the render's default) admits it here too. kubectl on the
host uses its own port on 127.0.0.1."""


@dataclass(frozen=True)
class State:
    """What state.json says of a running local cluster."""

    pid: int
    port: int
    bridge: str
    subnet: str
    kubeconfig: str
    project: str
    server: str = ""
    """The API server's URL as kubectl dials it (an older state.json: https://127.0.0.1:port)."""
    control: str = ""
    """The cluster process's own socket (node stop/start, Nodes added) on the real control plane;
    "" on ours, where the API server serves those verbs itself (/sunk-local/v1)."""
    control_plane: str = "sunk"
    """Which control plane runs it: "sunk" (api.py and its controllers) or "kubernetes" (issue 37)."""

    @property
    def url(self) -> str:
        return self.server or f"https://127.0.0.1:{self.port}"

    @staticmethod
    def read(workdir: Path) -> State | None:
        path = workdir / "state.json"
        if not path.is_file():
            return None
        try:
            return State(**json.loads(path.read_text()))
        except (ValueError, TypeError):
            return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def serve(workdir: Path, project: str, settings: lifecycle.Settings | None = None) -> None:
    settings = settings or lifecycle.Settings()
    workdir.mkdir(parents=True, exist_ok=True)
    bridge = net.bridge_name(str(workdir))
    stale = net.Network(bridge, ipaddress.IPv4Network("10.233.0.0/24"))
    net.remove_rules(stale)  # left by a process that was killed: start clean
    if bridge in net.bridges():
        net.run(net.bridge_down(stale), check=False)
    network = net.Network(bridge, net.free_subnet(net.host_subnets()))
    port = _free_port()
    net.run(net.bridge_up(network, POD_API_PORT))
    store = Store()
    store.admission.append(lifecycle.admission(settings))
    store.admission.append(admission.Webhooks(store))  # after the built-in ones, as kube-apiserver
    agent: Agent | None = None
    nodes_control: lifecycle.LifecycleController | None = None
    enforcer: netpolicy.Enforcer | None = None
    runner: aiohttp.web.AppRunner | None = None
    try:
        ca, cert, key = pki.make_certificates(
            workdir / "pki",
            ["127.0.0.1", network.gateway],
            [
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ],
        )
        admin = pki.token()
        tokens = {admin: rbac.ADMIN}
        for name in SYSTEM_NAMESPACES:
            store.create(store.resource("v1/namespaces"), None, {"metadata": {"name": name}})
        nodes_file = workdir / NODES_FILE
        nodes = json.loads(nodes_file.read_text()) if nodes_file.is_file() else inventory.default()
        for one in nodes:
            store.create(store.resource("v1/nodes"), None, one)
        cluster_env = {
            "KUBERNETES_SERVICE_HOST": network.gateway,
            "KUBERNETES_SERVICE_PORT": str(POD_API_PORT),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(POD_API_PORT),
            "KUBERNETES_PORT": f"tcp://{network.gateway}:{POD_API_PORT}",
        }
        agent = Agent(store, workdir, network, Images(), cluster_env, ca, TokenIssuer(tokens))
        server = ApiServer(store, tokens, agent)
        runner = aiohttp.web.AppRunner(server.app, handle_signals=False, access_log=None)
        await runner.setup()
        context = tls_context(cert, key)
        await aiohttp.web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
        await aiohttp.web.TCPSite(runner, network.gateway, POD_API_PORT, ssl_context=context).start()
        # The rules before the first pod: a pod never starts outside its NetworkPolicies.
        pods = agent.pods
        enforcer = netpolicy.Enforcer(store, network, lambda: {uid: r.ip for uid, r in pods.items()})
        enforcer.start()
        agent.start()
        dns_transport = await dns.serve(network.gateway, agent.dns_table)
        Controllers(store).start()
        nodes_control = lifecycle.LifecycleController(store, settings)
        nodes_control.start()
        ports = Ports(store)
        ports.start()
        kubeconfig = workdir / "kubeconfig"
        fd = os.open(kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(pki.kubeconfig(f"https://127.0.0.1:{port}", ca, admin))
        server_url = f"https://127.0.0.1:{port}"
        state = State(os.getpid(), port, bridge, str(network.subnet), str(kubeconfig), project, server_url)
        (workdir / "state.json").write_text(json.dumps(state.__dict__))
        log.info("local cluster serving on https://127.0.0.1:%d (pods on %s)", port, network.subnet)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("stopping")
        dns_transport.close()
        ports.close()
    finally:
        if nodes_control is not None:
            nodes_control.close()
        if enforcer is not None:
            enforcer.close()
        store.close_watches()
        if agent is not None:
            await agent.close()
        if runner is not None:
            await runner.cleanup()
        net.remove_rules(network)
        net.run(net.bridge_down(network), check=False)
        release_host_settings(network.bridge)
        (workdir / "state.json").unlink(missing_ok=True)


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
        return aiohttp.web.json_response({"message": f"nodes added: {' '.join(added) or 'none'}", "added": added})

    app = aiohttp.web.Application()
    app.router.add_post("/nodes/{name}/{verb}", node)
    app.router.add_post("/nodes", add)
    return app


async def serve_kubernetes(workdir: Path, project: str, settings: lifecycle.Settings | None = None) -> None:
    """The local cluster on Kubernetes' own control plane (controlplane.py, built by `sunk local
    controlplane build`), our node agents as its kubelets (nodeagents.py), claims provisioned as
    host folders (provisioner.py). What stays ours is what a kubelet, a CNI and kube-proxy do."""
    settings = settings or lifecycle.Settings()
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
        provisioner = Provisioner(
            HttpApi(plane.server, pki_dir / "ca.crt", pki_dir / "admin.crt", pki_dir / "admin.key"), workdir
        )
        provisioner.start()
        runner = aiohttp.web.AppRunner(control_app(agents), handle_signals=False, access_log=None)
        await runner.setup()
        socket_path = workdir / CONTROL_SOCKET
        socket_path.unlink(missing_ok=True)
        await aiohttp.web.UnixSite(runner, str(socket_path)).start()
        os.chmod(socket_path, 0o600)
        state = State(
            os.getpid(), POD_API_PORT, network.bridge, str(network.subnet), str(plane.kubeconfig), project,
            plane.server, str(socket_path), "kubernetes",
        )  # fmt: skip
        (workdir / "state.json").write_text(json.dumps(state.__dict__))
        log.info("local cluster (Kubernetes' control plane) serving on %s (pods on %s)", plane.server, network.subnet)
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
