"""NetworkPolicy enforcement for the local cluster: the NetworkPolicies in the store become
iptables rules on the cluster's bridge, with the semantics Kubernetes defines
(https://kubernetes.io/docs/concepts/services-networking/network-policies/):

- a pod is isolated for ingress (egress) when a policy of its namespace selects it with Ingress
  (Egress) among its policyTypes; policyTypes left out means Ingress, plus Egress when the policy
  has egress rules;
- an isolated pod takes (sends) a new connection only when some selecting policy's rule admits
  its peer and port: the union of the policies, never an intersection; a connection between two
  pods needs the sender's egress and the receiver's ingress both to admit it;
- a rule with no `from`/`to` admits every peer, one with no `ports` every port; a peer is a
  podSelector (pods of the policy's namespace), a namespaceSelector (every pod of the matching
  namespaces), both (those pods of those namespaces), or an ipBlock (its CIDR less its excepts);
  selectors take matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist), and every
  namespace carries the `kubernetes.io/metadata.name` label the API server gives it;
- a port is a number or a container port's name (resolved against the receiving pod), a protocol
  (TCP when left out) and an optional endPort;
- replies (conntrack ESTABLISHED/RELATED) always pass: a policy governs who opens a connection.

`plan(policies, pods, namespaces)` is that decision, pure: it answers each isolated pod's allowed
peers. It fails closed, as a policy that can't be read must not widen what passes: a policy whose
rules can't be read still isolates the pods it selects (for its policyTypes) but admits nothing,
and one whose podSelector can't be read isolates every pod of its namespace both ways; the plan
names each such policy in `errors`, which the Enforcer logs. Were iptables to refuse a plan, the
Enforcer writes a plan that isolates every pod and admits nothing, rather than keep the old rules. `restore_text` turns a plan into an `iptables-restore --noflush` input that replaces three
chains named after the bridge, at once. `Enforcer` is the thin edge: it watches the store's
policies, pods and namespaces and rewrites the chains after each burst of changes.

Where the rules sit: pod-to-pod traffic crosses the bridge, which hands it to iptables' FORWARD
chain (br_netfilter, `bridge-nf-call-iptables`, which `install` turns on); traffic from a pod to
the host's bridge address (the API server, the DNS server) enters INPUT. Both jump to the
dispatch chain first. Traffic the host opens toward a pod (the node agent's probes) is not
filtered, as kubelet probes are admitted on a real node.

Not modelled: IPv6 (the cluster's pods have IPv4 addresses only: IPv6 ipBlocks select nothing),
SCTP's port matching beyond iptables' own, and named ports in egress rules toward peers that are
not pods. A pod's rules exist once the node agent has given it an address; ingress toward an
isolated pod is denied to every address not yet listed, so a new peer is refused (and retries)
until its rules are written, never admitted by mistake.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import hostsettings, net

log = logging.getLogger("sunk.local.netpolicy")

Obj = dict[str, Any]
ANY_V4 = ipaddress.IPv4Network("0.0.0.0/0")
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class PolicyError(ValueError):
    """A NetworkPolicy this module can't read (the API server would have refused it)."""


@dataclass(frozen=True)
class Allow:
    """Traffic with `peer` (a network; a pod is its /32) on `protocol` and ports `low`..`high`
    (None: every protocol, or every port of it)."""

    peer: ipaddress.IPv4Network
    protocol: str | None = None
    low: int | None = None
    high: int | None = None


@dataclass(frozen=True)
class Plan:
    """For each isolated pod address: what it may take (`ingress`) and open (`egress`)."""

    ingress: Mapping[str, tuple[Allow, ...]]
    egress: Mapping[str, tuple[Allow, ...]]
    errors: tuple[str, ...] = ()
    """`<namespace>/<name>: why` for each policy that could not be read (it denies instead)."""


@dataclass(frozen=True)
class _Pod:
    namespace: str
    name: str
    labels: Mapping[str, str]
    ip: str
    ports: Mapping[str, tuple[str, int]]
    """Named container ports: name -> (protocol, number)."""


# -- selectors -----------------------------------------------------------------------------------
def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A LabelSelector against labels; an empty selector selects everything."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), list(expr.get("values") or [])
        if op == "In":
            ok = key in labels and labels[key] in values
        elif op == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif op == "Exists":
            ok = key in labels
        elif op == "DoesNotExist":
            ok = key not in labels
        else:
            raise PolicyError(f"matchExpressions operator {op!r}: one of In, NotIn, Exists, DoesNotExist")
        if not ok:
            return False
    return True


def _pods(pods: Iterable[Obj]) -> list[_Pod]:
    out = []
    for pod in pods:
        meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
        ip = status.get("podIP")
        if not ip or spec.get("hostNetwork") or status.get("phase") in ("Succeeded", "Failed"):
            continue
        ports = {}
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            for p in c.get("ports") or []:
                if p.get("name"):
                    ports[p["name"]] = (p.get("protocol") or "TCP", int(p["containerPort"]))
        out.append(_Pod(meta.get("namespace", "default"), meta["name"], meta.get("labels") or {}, ip, ports))
    return sorted(out, key=lambda p: (p.namespace, p.name))


def _namespace_labels(namespaces: Iterable[Obj]) -> dict[str, dict[str, str]]:
    out = {}
    for ns in namespaces:
        name = ns["metadata"]["name"]
        out[name] = {**(ns["metadata"].get("labels") or {}), NAMESPACE_NAME_LABEL: name}
    return out


def policy_types(policy: Obj) -> set[str]:
    spec = policy.get("spec") or {}
    if spec.get("policyTypes"):
        return set(spec["policyTypes"])
    return {"Ingress", "Egress"} if spec.get("egress") else {"Ingress"}


# -- peers and ports -----------------------------------------------------------------------------
def _block(peer: Mapping[str, Any]) -> list[ipaddress.IPv4Network]:
    block = peer["ipBlock"]
    try:
        cidr = ipaddress.ip_network(block["cidr"], strict=False)
        excepts = [ipaddress.ip_network(e, strict=False) for e in block.get("except") or []]
    except (KeyError, ValueError) as err:
        raise PolicyError(f"ipBlock {dict(block)}: a CIDR and CIDRs inside it to except ({err})") from None
    if not isinstance(cidr, ipaddress.IPv4Network):
        return []  # no pod or host address here is IPv6
    parts = [cidr]
    for excluded in excepts:
        if not isinstance(excluded, ipaddress.IPv4Network):
            continue
        parts = [rest for part in parts for rest in _without(part, excluded)]
    return parts


def _without(part: ipaddress.IPv4Network, excluded: ipaddress.IPv4Network) -> list[ipaddress.IPv4Network]:
    if not part.overlaps(excluded):
        return [part]
    if excluded.supernet_of(part):
        return []
    return list(part.address_exclude(excluded))


def _peer_pods(
    peer: Mapping[str, Any], namespace: str, pods: Sequence[_Pod], ns_labels: Mapping[str, Mapping[str, str]]
) -> list[_Pod]:
    if "namespaceSelector" in peer:
        spaces = {ns for ns, labels in ns_labels.items() if selects(peer["namespaceSelector"], labels)}
    else:
        spaces = {namespace}
    return [p for p in pods if p.namespace in spaces and selects(peer.get("podSelector"), p.labels)]


def _ports(
    ports: Sequence[Mapping[str, Any]] | None, target: _Pod | None
) -> list[tuple[str | None, int | None, int | None]]:
    """(protocol, low, high) for a rule's ports on `target` (the receiving pod, for named ports;
    None: a peer that is not a pod, where a named port matches nothing)."""
    if not ports:
        return [(None, None, None)]
    out: list[tuple[str | None, int | None, int | None]] = []
    for port in ports:
        protocol = port.get("protocol") or "TCP"
        number = port.get("port")
        if number is None:
            out.append((protocol, None, None))
        elif isinstance(number, int) or str(number).isdigit():
            low = int(number)
            out.append((protocol, low, int(port.get("endPort") or low)))
        elif target is not None and number in target.ports and target.ports[number][0] == protocol:
            resolved = target.ports[number][1]
            out.append((protocol, resolved, resolved))
    return out


def _one(address: str) -> ipaddress.IPv4Network:
    return ipaddress.IPv4Network(f"{address}/32")


# -- the decision --------------------------------------------------------------------------------
def plan(policies: Iterable[Obj], pods: Iterable[Obj], namespaces: Iterable[Obj]) -> Plan:
    """Which pod addresses are isolated, each way, and what each may take or open."""
    running = _pods(pods)
    ns_labels = _namespace_labels(namespaces)
    ingress: dict[str, list[Allow]] = {}
    egress: dict[str, list[Allow]] = {}
    errors: list[str] = []
    for policy in sorted(policies, key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"])):
        namespace = policy["metadata"].get("namespace", "default")
        where = f"{namespace}/{policy['metadata']['name']}"
        try:
            spec, types = policy.get("spec") or {}, policy_types(policy)
            selected = [p for p in running if p.namespace == namespace and selects(spec.get("podSelector"), p.labels)]
        except _UNREADABLE as err:
            # Which pods it selects is unknown: every pod of its namespace, isolated both ways.
            errors.append(f"{where}: {err}; every pod of {namespace} isolated, nothing admitted")
            for pod in running:
                if pod.namespace == namespace:
                    ingress.setdefault(pod.ip, [])
                    egress.setdefault(pod.ip, [])
            continue
        try:
            admits = _policy_allows(spec, types, selected, namespace, running, ns_labels)
        except _UNREADABLE as err:
            errors.append(f"{where}: {err}; the pods it selects isolated, nothing of it admitted")
            admits = {pod.ip: ([], []) for pod in selected}
        for pod in selected:
            inn, out = admits[pod.ip]
            if "Ingress" in types:
                ingress.setdefault(pod.ip, []).extend(inn)
            if "Egress" in types:
                egress.setdefault(pod.ip, []).extend(out)
    return Plan(
        ingress={ip: tuple(dict.fromkeys(a)) for ip, a in sorted(ingress.items())},
        egress={ip: tuple(dict.fromkeys(a)) for ip, a in sorted(egress.items())},
        errors=tuple(errors),
    )


_UNREADABLE = (PolicyError, ValueError, TypeError, KeyError, AttributeError)
"""What reading a malformed policy raises (the API server would have refused it): the policy denies."""


def _policy_allows(
    spec: Mapping[str, Any],
    types: set[str],
    selected: Sequence[_Pod],
    namespace: str,
    running: Sequence[_Pod],
    ns_labels: Mapping[str, Mapping[str, str]],
) -> dict[str, tuple[list[Allow], list[Allow]]]:
    """One policy's (ingress, egress) Allows for each pod it selects, all or nothing."""
    out: dict[str, tuple[list[Allow], list[Allow]]] = {}
    for pod in selected:
        inn: list[Allow] = []
        egr: list[Allow] = []
        if "Ingress" in types:
            for rule in spec.get("ingress") or []:
                inn += _admitted(rule.get("from"), rule.get("ports"), pod, namespace, running, ns_labels, "in")
        if "Egress" in types:
            for rule in spec.get("egress") or []:
                egr += _admitted(rule.get("to"), rule.get("ports"), pod, namespace, running, ns_labels, "out")
        out[pod.ip] = (inn, egr)
    return out


def deny_all(pods: Iterable[Obj]) -> Plan:
    """Every pod with an address isolated both ways, nothing admitted (replies to the host's own
    connections still pass): what the Enforcer writes when iptables refuses a plan."""
    addresses = sorted({p.ip for p in _pods(pods)})
    return Plan(ingress=dict.fromkeys(addresses, ()), egress=dict.fromkeys(addresses, ()))


def _admitted(
    peers: Sequence[Mapping[str, Any]] | None,
    ports: Sequence[Mapping[str, Any]] | None,
    pod: _Pod,
    namespace: str,
    running: Sequence[_Pod],
    ns_labels: Mapping[str, Mapping[str, str]],
    direction: str,
) -> list[Allow]:
    """The Allows of one rule of a policy selecting `pod`. Named ports name a port of the pod
    receiving the connection: `pod` itself for ingress, each peer pod for egress."""
    if not peers:
        return _anyone(ports, pod, running, direction)
    out: list[Allow] = []
    for peer in peers:
        if "ipBlock" in peer:
            out += _in_block(peer, ports, pod, running, direction)
            continue
        for other in _peer_pods(peer, namespace, running, ns_labels):
            target = pod if direction == "in" else other
            out += [Allow(_one(other.ip), *p) for p in _ports(ports, target)]
    return out


def _anyone(
    ports: Sequence[Mapping[str, Any]] | None, pod: _Pod, running: Sequence[_Pod], direction: str
) -> list[Allow]:
    """A rule that names no peer: every address, on its ports."""
    if direction == "in":
        return [Allow(ANY_V4, *p) for p in _ports(ports, pod)]
    out = [Allow(ANY_V4, *p) for p in _ports(ports, None)]
    if _is_named(ports):  # a named port matches each pod that has it, wherever it is
        out += [Allow(_one(t.ip), *p) for t in running for p in _ports(ports, t)]
    return out


def _in_block(
    peer: Mapping[str, Any],
    ports: Sequence[Mapping[str, Any]] | None,
    pod: _Pod,
    running: Sequence[_Pod],
    direction: str,
) -> list[Allow]:
    """An ipBlock peer: its networks, and for a named egress port the pods inside them that have it."""
    out: list[Allow] = []
    for network in _block(peer):
        if direction == "in":
            out += [Allow(network, *p) for p in _ports(ports, pod)]
            continue
        out += [Allow(network, *p) for p in _ports(ports, None)]
        if _is_named(ports):
            targets = [t for t in running if ipaddress.IPv4Address(t.ip) in network]
            out += [Allow(_one(t.ip), *p) for t in targets for p in _ports(ports, t)]
    return out


def _is_named(ports: Sequence[Mapping[str, Any]] | None) -> bool:
    return any(p.get("port") is not None and not str(p["port"]).isdigit() for p in ports or [])


# -- iptables ------------------------------------------------------------------------------------
def chains(network: net.Network) -> tuple[str, str, str]:
    """The dispatch, egress and ingress chains of a cluster (named after its bridge: 15 characters
    at most, under iptables' 28)."""
    return f"{network.bridge}-np", f"{network.bridge}-out", f"{network.bridge}-in"


def _match(allow: Allow, *, side: str) -> list[str]:
    words = [] if allow.peer == ANY_V4 else [side, str(allow.peer)]
    if allow.protocol is not None:
        words += ["-p", allow.protocol.lower()]
        if allow.low is not None:
            ports = str(allow.low) if allow.high in (None, allow.low) else f"{allow.low}:{allow.high}"
            words += ["--dport", ports]
    return words


def rules(network: net.Network, decided: Plan) -> list[tuple[str, list[str]]]:
    """(chain, rule) pairs, in order, that carry out a plan: replies pass, then a connection must
    pass its sender's egress and its receiver's ingress (each: RETURN when admitted, DROP at the
    end for an isolated pod)."""
    dispatch, out, inn = chains(network)
    rows: list[tuple[str, list[str]]] = [
        (dispatch, ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"]),
        (dispatch, ["-j", out]),
        (dispatch, ["-j", inn]),
    ]
    for ip, allows in decided.egress.items():
        rows += [(out, ["-s", ip, *_match(a, side="-d"), "-j", "RETURN"]) for a in allows]
        rows.append((out, ["-s", ip, "-j", "DROP"]))
    for ip, allows in decided.ingress.items():
        rows += [(inn, ["-d", ip, *_match(a, side="-s"), "-j", "RETURN"]) for a in allows]
        rows.append((inn, ["-d", ip, "-j", "DROP"]))
    return rows


def restore_text(network: net.Network, decided: Plan) -> str:
    """`iptables-restore --noflush` input that replaces the cluster's three chains at once (a
    declared chain is emptied first) and touches nothing else."""
    lines = ["*filter", *(f":{chain} - [0:0]" for chain in chains(network))]
    lines += [" ".join(["-A", chain, *rule]) for chain, rule in rules(network, decided)]
    return "\n".join([*lines, "COMMIT", ""])


def hooks(network: net.Network) -> list[tuple[str, list[str]]]:
    """The jumps into the dispatch chain, tagged like the bridge's other rules (so net.remove_rules
    takes them away): pod to pod across the bridge, and pod to the host's bridge address."""
    tag = ["-m", "comment", "--comment", network.comment()]
    dispatch = chains(network)[0]
    return [
        ("FORWARD", ["-i", network.bridge, "-o", network.bridge, *tag, "-j", dispatch]),
        ("INPUT", ["-i", network.bridge, *tag, "-j", dispatch]),
    ]


def install(network: net.Network) -> None:
    """Empty chains (everything passes until the first plan), the jumps into them, and bridged
    traffic handed to iptables (without it, pod-to-pod packets never meet a rule), its prior value
    recorded so that the cluster's stop puts it back (hostsettings.py)."""
    try:
        hostsettings.take_bridge_nf(network.bridge)
    except hostsettings.HostSettingError as err:
        raise net.NetworkError(str(err)) from None
    write(network, Plan({}, {}))
    net.run([["iptables", "-I", chain, *rule] for chain, rule in hooks(network)])


def write(network: net.Network, decided: Plan) -> None:
    done = subprocess.run(
        ["iptables-restore", "--noflush"],
        input=restore_text(network, decided),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise net.NetworkError(f"iptables-restore: {done.stderr.strip()}")


class Enforcer:
    """Rewrites the cluster's chains after each burst of changes to policies, pods or namespaces.

    `addresses` answers the address the node agent gave each pod (by uid) before the pod's status
    says so, so its rules exist before its sandbox does."""

    WATCHED = ("networking.k8s.io/v1/networkpolicies", "v1/pods", "v1/namespaces")

    def __init__(self, store: Any, network: net.Network, addresses: Callable[[], Mapping[str, str]]) -> None:
        self.store = store
        self.network = network
        self.addresses = addresses
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None
        self.written: Plan | None = None

    def start(self) -> None:
        install(self.network)
        self.store.listen(self._on_event)
        self._dirty.set()
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def _on_event(self, event: Any) -> None:
        if event.resource in self.WATCHED:
            self._dirty.set()

    def pods(self) -> list[Obj]:
        """The store's pods, each with the address the node agent gave it."""
        known = self.addresses()
        pods = []
        for pod in self.store.items(self.store.resource("v1/pods")):
            ip = known.get(pod["metadata"]["uid"])
            if ip and not (pod.get("status") or {}).get("podIP"):
                pod = {**pod, "status": {**(pod.get("status") or {}), "podIP": ip}}
            pods.append(pod)
        return pods

    def snapshot(self) -> Plan:
        res = self.store.resource
        return plan(
            self.store.items(res("networking.k8s.io/v1/networkpolicies")),
            self.pods(),
            self.store.items(res("v1/namespaces")),
        )

    def write_or_deny(self, decided: Plan, denied: Plan) -> None:
        """Writes `decided`; where iptables refuses it, `denied` (every pod isolated), never
        keeping the old rules, which may admit what the new policies don't."""
        try:
            write(self.network, decided)
        except net.NetworkError as err:
            self.written = None  # unknown until the denial is written
            log.error("NetworkPolicy rules refused (%s): every pod isolated, nothing admitted", err)
            write(self.network, denied)
            self.written = denied
            return
        self.written = decided

    async def _loop(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            await asyncio.sleep(0.1)  # an apply is a burst of writes: one rewrite
            decided = self.snapshot()
            for error in decided.errors:
                log.error("NetworkPolicy %s", error)
            if decided == self.written:
                continue
            try:
                await asyncio.to_thread(self.write_or_deny, decided, deny_all(self.pods()))
            except net.NetworkError as err:
                log.error("NetworkPolicy rules not written, not even the denial: %s", err)

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
