"""Our node agent as the kubelet of the real control plane (controlplane.py): the first cut of the
switch of issue 37.

`NodeAgents(plane, workdir).start(nodes)` brings up a bridge of its own (net.py), a RemoteStore on
the API server (remote.py: list + watch of pods, Nodes and what pods mount), registers each Node
as a kubelet does (capacity, InternalIP, the kubelet port in daemonEndpoints; Ready), and starts
agent.py's Agent on that store: the Leases in kube-node-lease every 10 s, pods bound by the real
scheduler run from our images in their network namespaces, their status goes to pods/status, the
final delete with grace 0 after the grace period, projected tokens through TokenRequest.

The kubelet API the API server calls is served on each Node's InternalIP (the bridge address) at
10250, as a kubelet serves it: TLS with a serving certificate of its own CA (a kubelet's default is
self-signed), clients only with a certificate of the cluster's CA (the API server's
--kubelet-client-certificate). `/containerLogs/NS/POD/CONTAINER` is there (`kubectl logs`, with
`tailLines` and `previous`).

Not yet (the list for the switch is in docs/concepts/local-cluster.md): `follow`, exec, attach and
port-forward on the kubelet API, the API server on the bridge address for pods, per-Node
credentials under the Node authorizer (the agent uses the admin certificate), DNS and Services,
NetworkPolicy enforcement and the ports fed from the real API.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable
from pathlib import Path

import aiohttp.web

from . import net, pki
from .agent import Agent
from .controlplane import ControlPlane
from .images import Images
from .remote import RemoteStore, TokenRequestIssuer, register_node
from .store import Obj

KUBELET_PORT = 10250
"""What the Nodes announce in daemonEndpoints (the API server's target for logs and exec)."""


class NodeAgents:
    """The agent and what it stands on, started and stopped together."""

    def __init__(self, plane: ControlPlane, workdir: Path, images: Images | None = None) -> None:
        self.plane = plane
        self.workdir = workdir
        self.images = images or Images()
        self.network: net.Network | None = None
        self.store: RemoteStore | None = None
        self.agent: Agent | None = None
        self.server: aiohttp.web.AppRunner | None = None

    async def start(self, nodes: Iterable[Obj]) -> Agent:
        self.workdir.mkdir(parents=True, exist_ok=True)
        pki_dir = self.plane.folder / "pki"
        self.network = net.Network(net.bridge_name(str(self.workdir)), net.free_subnet(net.host_subnets()))
        # No pod reaches the API server yet (it listens on loopback): any port will do for the rule.
        net.run(net.bridge_up(self.network, 443))
        self.store = RemoteStore(self.plane.server, pki_dir / "ca.crt", pki_dir / "admin.crt", pki_dir / "admin.key")
        for node in nodes:
            register_node(self.store, node, self.network.gateway, KUBELET_PORT)
        self.store.start()
        self.agent = Agent(
            self.store,  # type: ignore[arg-type]  # the Store's surface, over HTTPS (remote.py)
            self.workdir,
            self.network,
            self.images,
            {},
            pki_dir / "ca.crt",
            TokenRequestIssuer(self.store),
        )
        self.agent.start()
        self.server = await self._serve(self.network.gateway)
        return self.agent

    async def _serve(self, address: str) -> aiohttp.web.AppRunner:
        """The kubelet API on `address`:KUBELET_PORT, for the API server only."""
        _, cert, key = pki.make_certificates(self.workdir / "kubelet-pki", [address], ["localhost"])
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.plane.folder / "pki" / "ca.crt"))
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_cert_chain(str(cert), str(key))
        app = aiohttp.web.Application()
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self._logs)
        runner = aiohttp.web.AppRunner(app, access_log=None)
        await runner.setup()
        await aiohttp.web.TCPSite(runner, address, KUBELET_PORT, ssl_context=context).start()
        return runner

    async def _logs(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        agent = self.agent
        assert self.store is not None and agent is not None
        match = request.match_info
        pod = self.store.find(self.store.resource("v1/pods"), match["namespace"], match["pod"])
        if pod is None:
            return aiohttp.web.Response(status=404, text=f"pod {match['namespace']}/{match['pod']} not found")
        path = agent.log_path(pod, match["container"], request.query.get("previous") == "true")
        if path is None or not path.exists():
            return aiohttp.web.Response(status=400, text=f'container "{match["container"]}" is waiting to start')
        data = path.read_bytes()
        tail = request.query.get("tailLines")
        if tail is not None:
            data = b"".join(data.splitlines(keepends=True)[-int(tail) :]) if int(tail) > 0 else b""
        return aiohttp.web.Response(body=data, content_type="text/plain")

    async def close(self) -> None:
        if self.server is not None:
            await self.server.cleanup()
        if self.agent is not None:
            await self.agent.close()
        if self.store is not None:
            self.store.close()
        if self.network is not None:
            net.remove_rules(self.network)
            net.run(net.bridge_down(self.network), check=False)
