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

from . import admission, dns, hostsettings, inventory, lifecycle, net, netpolicy, pki, rbac
from .agent import Agent, TokenIssuer
from .api import ApiServer, tls_context
from .controllers import Controllers
from .images import Images
from .ports import Ports
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
        state = State(os.getpid(), port, bridge, str(network.subnet), str(kubeconfig), project)
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
