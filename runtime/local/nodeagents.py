"""Our node agent as the kubelet of the real control plane (controlplane.py): the first cut of the
switch of issue 37.

`NodeAgents(plane, workdir).start(nodes)` brings up a bridge of its own (net.py), a RemoteStore on
the API server (remote.py) acting as each Node with that Node's own client certificate
(`system:node:NAME` in `system:nodes`, from the cluster's CA), so the Node authorizer and
NodeRestriction hold every request as they hold a real kubelet's. It registers each Node as a
kubelet does (the labels a kubelet may set, capacity, InternalIP, the kubelet port in
daemonEndpoints; Ready); the labels only an administrator may set (NodeRestriction refuses them to
the Node) are set with the admin's certificate, as `kubectl label node` would. Then agent.py's
Agent runs on that store: the Leases in kube-node-lease every 10 s, pods bound by the real
scheduler run from our images in their network namespaces, their status goes to pods/status, the
final delete with grace 0 after the grace period, projected tokens through TokenRequest bound to
the pod with the source's audience and lifetime, renewed before they expire (tokens.py).

The kubelet API the API server calls is served on each Node's InternalIP (the bridge address) at
10250, as a kubelet serves it: TLS with a serving certificate of its own CA (a kubelet's default is
self-signed), clients only with a certificate of the cluster's CA (the API server's
--kubelet-client-certificate). `/containerLogs/NS/POD/CONTAINER` is there (`kubectl logs`, with
`tailLines` and `previous`).

Not yet (the list for the switch is in docs/concepts/local-cluster.md): `follow`, exec, attach and
port-forward on the kubelet API, the API server on the bridge address for pods, DNS and Services,
NetworkPolicy enforcement and the ports fed from the real API.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

import aiohttp.web
import httpx

from ..common.timefmt import rfc3339
from . import net, pki, tokens
from .agent import SYNC_SECONDS, Agent
from .controlplane import ControlPlane
from .images import Images
from .noderules import own_labels
from .remote import RemoteStore
from .store import ApiError, Obj

KUBELET_PORT = 10250
"""What the Nodes announce in daemonEndpoints (the API server's target for logs and exec)."""
WEBSOCKETS_FEATURE = "ExtendWebSocketsToKubelet"
"""What a Node declares (status.declaredFeatures) for the API server to proxy exec and attach to
its kubelet as WebSockets (Kubernetes 1.36) instead of translating them to SPDY."""


class NodeAgents:
    """The agent and what it stands on, started and stopped together."""

    def __init__(
        self,
        plane: ControlPlane,
        workdir: Path,
        images: Images | None = None,
        *,
        clock: Callable[[], float] = time.time,
        sync_seconds: float = SYNC_SECONDS,
    ) -> None:
        self.plane = plane
        self.workdir = workdir
        self.images = images or Images()
        self.clock = clock
        """What token rotation reads (a test moves it on)."""
        self.sync_seconds = sync_seconds
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
        nodes = list(nodes)
        credentials = {n["metadata"]["name"]: self.plane.node_credentials(n["metadata"]["name"]) for n in nodes}
        self.store = RemoteStore(self.plane.server, pki_dir / "ca.crt", credentials)
        for node in nodes:
            left = register_node(self.store, node, self.network.gateway, KUBELET_PORT)
            if left:
                self._label(node["metadata"]["name"], left)
        self.store.start()
        self.agent = Agent(
            self.store,  # type: ignore[arg-type]  # the Store's surface, over HTTPS (remote.py)
            self.workdir,
            self.network,
            self.images,
            {},
            pki_dir / "ca.crt",
            TokenRequestIssuer(self.store, self.clock),
            sync_seconds=self.sync_seconds,
        )
        self.agent.start()
        self.server = await self._serve(self.network.gateway)
        return self.agent

    def _label(self, node: str, labels: dict[str, str]) -> None:
        """Labels NodeRestriction refuses to a Node, set as the administrator sets them."""
        pki_dir = self.plane.folder / "pki"
        context = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
        context.load_cert_chain(str(pki_dir / "admin.crt"), str(pki_dir / "admin.key"))
        with httpx.Client(base_url=self.plane.server, verify=context, timeout=30) as admin:
            answer = admin.patch(
                f"/api/v1/nodes/{node}",
                json={"metadata": {"labels": labels}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            answer.raise_for_status()

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


class TokenRequestIssuer:
    """ServiceAccount tokens as a kubelet gets them for a pod's projected volumes: a TokenRequest
    bound to the pod, for the source's audience and lifetime, made as the pod's Node; the API
    server signs a JWT (tokens.py keeps and renews them). `clock` is what rotation reads."""

    def __init__(self, store: RemoteStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    def issue(self, pod: Obj, account: str, audience: str | None, seconds: int) -> tokens.Token:
        answer = self.store.request_token(pod, account, tokens.request_body(pod, audience, seconds))
        status, granted = answer["status"], int(answer["spec"]["expirationSeconds"])
        expires = datetime.fromisoformat(str(status["expirationTimestamp"]).replace("Z", "+00:00")).timestamp()
        return tokens.Token(str(status["token"]), expires - granted, expires)

    def now(self) -> float:
        return self.clock()


def register_node(store: RemoteStore, node: Obj, address: str, kubelet_port: int) -> dict[str, str]:
    """Create (or take over) `node` as its kubelet registers it, as that Node: the labels it may set
    and the inventory's taints, then its status: capacity and allocatable, InternalIP, the kubelet's
    port, the WebSocket streaming it declares, Ready. Returns the labels left to an administrator
    (`own_labels`)."""
    nodes = store.resource("v1/nodes")
    meta = dict(node["metadata"])
    own, admin = own_labels(meta.get("labels") or {})
    meta["labels"] = own
    try:
        store.create(nodes, None, {"metadata": meta, "spec": node.get("spec") or {}})
    except ApiError as err:
        if err.code != 409:
            raise
    status = dict(node.get("status") or {})
    stamp = rfc3339(datetime.now(UTC))
    status["conditions"] = [
        {**c, "lastHeartbeatTime": stamp, "lastTransitionTime": stamp} for c in status.get("conditions") or []
    ]
    status["addresses"] = [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": meta["name"]}]
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": kubelet_port}}
    status["declaredFeatures"] = [WEBSOCKETS_FEATURE]
    store.patch(nodes, None, meta["name"], "merge", {"status": status}, "status")
    return admin
