"""Our node agent as the kubelet of the real control plane (controlplane.py): the first cut of the
switch of issue 37.

`open_network(workdir)` brings up the pods' bridge (net.py) before the control plane, whose API
server listens on the bridge address at 443 (`ControlPlane.for_pods`). `NodeAgents(plane, workdir,
network).start(nodes)` then starts a RemoteStore on the API server (remote.py) acting as each Node
with that Node's own client certificate (`system:node:NAME` in `system:nodes`, from the cluster's
CA), so the Node authorizer and NodeRestriction hold every request as they hold a real kubelet's.
It registers each Node as a kubelet does (the labels a kubelet may set, capacity, InternalIP, the
kubelet port in daemonEndpoints, ExtendWebSocketsToKubelet in declaredFeatures; Ready); the labels
only an administrator may set (NodeRestriction refuses them to the Node) are set with the admin's
certificate, as `kubectl label node` would. The `kubernetes` Service's ClusterIP is translated to
the API server on the bridge (net.service_nat), and pods get KUBERNETES_SERVICE_HOST and _PORT
naming it, as a kubelet sets them, so an in-cluster client reaches the API server as on any cluster.
Then agent.py's Agent runs on that store: the Leases in kube-node-lease every 10 s, pods bound by
the real scheduler run from our images in their network namespaces, their status goes to
pods/status, the final delete with grace 0 after the grace period, projected tokens through
TokenRequest bound to the pod with the source's audience and lifetime, renewed before they expire
(tokens.py).

The kubelet API the API server calls (logs, follow, exec, attach, port-forward) is kubeletapi.py's,
served on each Node's InternalIP (the bridge address) at 10250.

The cluster's network parts run beside it, fed by the real API server's watches: the DNS server
on the bridge (dns.py, from the agent's table of Services and pods), the NodePort and LoadBalancer
listeners on 127.0.0.1 (ports.py; the API server allocates the nodePorts, a LoadBalancer's ingress
goes to its status) and the NetworkPolicy enforcer (netpolicy.py), its rules written before the
first pod starts. They read Services, Namespaces and NetworkPolicies cluster-wide as user
`system:sunk-local-network` (remote.NETWORK), which a ClusterRole of that name grants only those
reads and a Service's status, as CoreDNS, kube-proxy and a CNI's agent hold their own accounts on
a real cluster; a Node's credentials may read none of them.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

import aiohttp.web
import httpx

from ..common.timefmt import rfc3339
from . import dns, hostsettings, net, netpolicy, pki, tokens
from .agent import SYNC_SECONDS, Agent
from .apitypes import ApiError, Obj
from .controlplane import POD_API_PORT, ControlPlane
from .images import Images
from .kubeletapi import KubeletApi
from .noderules import own_labels
from .ports import Ports
from .remote import NETWORK, NETWORK_RULES, RemoteStore

KUBELET_PORT = 10250
"""What the Nodes announce in daemonEndpoints (the API server's target for logs and exec)."""
WEBSOCKETS_FEATURE = "ExtendWebSocketsToKubelet"
"""What a Node declares (status.declaredFeatures) for the API server to proxy exec and attach to
its kubelet as WebSockets (Kubernetes 1.36) instead of translating them to SPDY."""
LIFECYCLE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
"""The NoSchedule taints the API server puts on a new Node (TaintNodesByCondition) and
kube-controller-manager's node lifecycle takes off once it has seen the Node Ready."""
SCHEDULABLE_SECONDS = 60.0
"""How long registered Nodes may wait for the node lifecycle to take those taints off (~5 s here)."""


def open_network(workdir: Path) -> net.Network:
    """The pods' bridge with its firewall rules (the API server's port for pods let in): made
    before the control plane, whose API server listens on its address."""
    network = net.Network(net.bridge_name(str(workdir)), net.free_subnet(net.host_subnets()))
    net.run(net.bridge_up(network, POD_API_PORT))
    return network


def close_network(network: net.Network) -> None:
    net.remove_rules(network)
    net.run(net.bridge_down(network), check=False)
    up = set(net.bridges())  # bridge-nf-call-iptables put back unless another cluster holds it
    hostsettings.release(network.bridge, lambda other: other in up)


def kubernetes_env(cluster_ip: str, port: int) -> dict[str, str]:
    """What a kubelet puts in every container's environment for the `kubernetes` Service."""
    return {
        "KUBERNETES_SERVICE_HOST": cluster_ip,
        "KUBERNETES_SERVICE_PORT": str(port),
        "KUBERNETES_SERVICE_PORT_HTTPS": str(port),
        "KUBERNETES_PORT": f"tcp://{cluster_ip}:{port}",
        f"KUBERNETES_PORT_{port}_TCP": f"tcp://{cluster_ip}:{port}",
        f"KUBERNETES_PORT_{port}_TCP_PROTO": "tcp",
        f"KUBERNETES_PORT_{port}_TCP_PORT": str(port),
        f"KUBERNETES_PORT_{port}_TCP_ADDR": cluster_ip,
    }


class NodeAgents:
    """The agent and what it stands on, started and stopped together (the network is the caller's)."""

    def __init__(
        self,
        plane: ControlPlane,
        workdir: Path,
        network: net.Network,
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
        if plane.address != network.gateway or plane.ports.apiserver != POD_API_PORT:
            raise ValueError(
                f"the API server must listen where pods reach it, {network.gateway}:{POD_API_PORT} "
                f"(ControlPlane.for_pods), not {plane.address}:{plane.ports.apiserver}"
            )
        self.network = network
        self.store: RemoteStore | None = None
        self.agent: Agent | None = None
        self.server: aiohttp.web.AppRunner | None = None
        self.enforcer: netpolicy.Enforcer | None = None
        self.ports: Ports | None = None
        self.dns: asyncio.DatagramTransport | None = None

    async def start(self, nodes: Iterable[Obj]) -> Agent:
        self.workdir.mkdir(parents=True, exist_ok=True)
        pki_dir = self.plane.folder / "pki"
        nodes = list(nodes)
        credentials = {n["metadata"]["name"]: self.plane.node_credentials(n["metadata"]["name"]) for n in nodes}
        self._admin("PATCH", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{NETWORK}", network_role())
        binding = network_binding()
        self._admin("PATCH", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{NETWORK}", binding)
        network_user = pki.client_certificate(pki_dir, "network", NETWORK)
        self.store = RemoteStore(self.plane.server, pki_dir / "ca.crt", credentials, network_user)
        self._register(nodes)
        self.store.start()
        service = await self._kubernetes_service()
        cluster_ip, port = service["spec"]["clusterIP"], int(service["spec"]["ports"][0]["port"])
        net.run(net.service_nat(self.network, cluster_ip, port, POD_API_PORT))
        self.agent = Agent(
            self.store,
            self.workdir,
            self.network,
            self.images,
            kubernetes_env(cluster_ip, port),
            pki_dir / "ca.crt",
            TokenRequestIssuer(self.store, self.clock),
            sync_seconds=self.sync_seconds,
        )
        agent = self.agent
        # The rules before the first pod: a pod never starts outside its NetworkPolicies.
        self.enforcer = netpolicy.Enforcer(self.store, self.network, lambda: {u: r.ip for u, r in agent.pods.items()})
        self.enforcer.start()
        self.agent.start()
        self.dns = await dns.serve(self.network.gateway, self.agent.dns_table)
        self.ports = Ports(self.store)
        self.ports.start()
        api = KubeletApi(self.agent)
        self.server = await api.serve(
            self.network.gateway, KUBELET_PORT, self.workdir / "kubelet-pki", pki_dir / "ca.crt"
        )
        await self.schedulable([n["metadata"]["name"] for n in nodes])
        return self.agent

    async def schedulable(self, names: Iterable[str], timeout: float = SCHEDULABLE_SECONDS) -> None:
        """Return once kube-controller-manager has taken the not-ready taint off every Node in
        `names`. Until then kube-scheduler filters the Node out, so a render applied at once
        would put its control plane's pods on whichever Nodes were cleared first: compute Nodes,
        whose PreferNoSchedule taint only scores (the upgrade drill's slurmd pods were then left
        without a Node)."""
        assert self.store is not None, "start() first"
        nodes, names = self.store.resource("v1/nodes"), list(names)
        deadline = time.monotonic() + timeout
        while held := not_schedulable(self.store.find(nodes, None, n) or {"metadata": {"name": n}} for n in names):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Nodes not schedulable after {timeout:g} s (kube-controller-manager's node lifecycle "
                    f"did not clear them; see its log in the plane folder): {'; '.join(held)}"
                )
            await asyncio.sleep(0.2)

    def _register(self, nodes: Iterable[Obj]) -> None:
        assert self.store is not None
        for node in nodes:
            left = register_node(self.store, node, self.network.gateway, KUBELET_PORT)
            if left:
                self._label(node["metadata"]["name"], left)

    def add_nodes(self, nodes: Iterable[Obj]) -> list[str]:
        """Nodes joining the running cluster (`sunk local apply` with a new NodeSet), each with its
        own certificate, registered as at the start; the names of those that were new."""
        assert self.store is not None, "start() first"
        fresh = [n for n in nodes if n["metadata"]["name"] not in self.store.clients]
        for node in fresh:
            name = node["metadata"]["name"]
            self.store.add_node(name, *self.plane.node_credentials(name))
        self._register(fresh)
        return [n["metadata"]["name"] for n in fresh]

    async def _kubernetes_service(self, timeout: float = 60) -> Obj:
        """The `kubernetes` Service, which the API server makes soon after it starts."""
        assert self.store is not None
        services = self.store.resource("v1/services")
        deadline = time.monotonic() + timeout
        while (found := self.store.find(services, "default", "kubernetes")) is None:
            if time.monotonic() > deadline:
                raise TimeoutError("the API server made no `kubernetes` Service in default")
            await asyncio.sleep(0.5)
        return found

    def _label(self, node: str, labels: dict[str, str]) -> None:
        """Labels NodeRestriction refuses to a Node, set as the administrator sets them."""
        self._admin("MERGE", f"/api/v1/nodes/{node}", {"metadata": {"labels": labels}})

    def _admin(self, verb: str, path: str, body: Obj) -> None:
        """One write with the administrator's certificate: a merge patch (MERGE), or a server-side
        apply (PATCH) that makes the object or brings it to `body`."""
        pki_dir = self.plane.folder / "pki"
        context = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
        context.load_cert_chain(str(pki_dir / "admin.crt"), str(pki_dir / "admin.key"))
        kind = "application/merge-patch+json" if verb == "MERGE" else "application/apply-patch+yaml"
        params = {} if verb == "MERGE" else {"fieldManager": "sunk-local", "force": "true"}
        with httpx.Client(base_url=self.plane.server, verify=context, timeout=30) as admin:
            answer = admin.patch(path, json=body, params=params, headers={"Content-Type": kind})
            answer.raise_for_status()

    async def close(self) -> None:
        if self.dns is not None:
            self.dns.close()
        if self.ports is not None:
            self.ports.close()
        if self.enforcer is not None:
            self.enforcer.close()
        if self.server is not None:
            await self.server.cleanup()
        if self.agent is not None:
            await self.agent.close()
        if self.store is not None:
            self.store.close()


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


def not_schedulable(nodes: Iterable[Obj]) -> list[str]:
    """'NAME: why' for each Node kube-scheduler would still filter out for its lifecycle: not yet
    seen (no status), not Ready, or still carrying a LIFECYCLE_TAINTS taint."""
    held = []
    for node in nodes:
        name = node["metadata"]["name"]
        if "status" not in node:
            held.append(f"{name}: not seen yet")
            continue
        conditions = {c.get("type"): c.get("status") for c in node["status"].get("conditions") or []}
        taints = [t["key"] for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") in LIFECYCLE_TAINTS]
        if conditions.get("Ready") != "True":
            held.append(f"{name}: Ready is {conditions.get('Ready', 'unset')}")
        elif taints:
            held.append(f"{name}: tainted {', '.join(taints)}")
    return held


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


def network_role() -> Obj:
    """The ClusterRole of the network parts' user (remote.NETWORK_RULES)."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": NETWORK},
        "rules": NETWORK_RULES,
    }


def network_binding() -> Obj:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": NETWORK},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NETWORK},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NETWORK}],
    }
