"""NetworkPolicies from the role table (sunk.roles): a default deny over this cluster's own pods
(selected by their cluster label, so a tenant's other workloads in the namespace are untouched),
and per role one policy admitting exactly the traffic its row lists, both ways.

How the table's peers become policy peers:
- a role of this cluster: its pods (the cluster and component labels; slurmd pods carry both);
- the operator: its pods in the operator's namespace;
- `source-ranges`: the role's Service `sourceRanges`; for login, anywhere when it names none (its
  Service is then open to anywhere), for slurmrestd only the ranges it is exposed to;
- `metrics-scrapers`: any pod of any namespace, on the metrics port only;
- `kube-api`: `network.apiServerCidrs` on `network.apiServerPorts` (the API server's addresses
  differ per cluster);
- `dns`: any address on port 53, UDP and TCP (node-local DNS caches listen outside the cluster's
  pod network);
- `ldap`, `external-database`: any address on the ports of auth.ldap.uris and accounting.external;
- `anywhere`: no restriction (users' sessions on login, jobs on slurmd).

The kubelet's probes come from the Node itself, which the common policy engines (Calico, Cilium)
admit to the Node's own pods whatever the policies say."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

from sunk import keys, naming, roles
from sunk.manifests.controller import fenced
from sunk.manifests.keygen import made_here
from sunk.manifests.meta import Manifest, metadata, obj
from sunk.spec.cluster import ClusterSpec
from sunk.spec.services import NetworkSpec

API = "networking.k8s.io/v1"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Set by the API server on every namespace (Kubernetes >= 1.22)."""
OPERATOR_LABELS = {"app.kubernetes.io/name": "sunk-operator"}
OPEN = None
"""A peer resolver's answer for `anywhere` (the rule names no peer)."""
Peers = Callable[[str], list[Manifest] | None]
"""A table peer -> the policy peers it stands for ([]: none here; OPEN: anywhere)."""


def pods_of(cluster: str, role: str) -> Manifest:
    """The pod selector of a role's pods in one cluster."""
    return {"matchLabels": {keys.CLUSTER: cluster, keys.APP_COMPONENT: role}}


def present_roles(spec: ClusterSpec, keygen: bool = True) -> list[str]:
    """The table's roles this cluster runs pods of in its namespace (`keygen`: the key generator
    runs, that is the keys are made in the cluster)."""
    out = ["controller", "slurmd", "syncer", "scheduler"]
    if spec.accounting.enabled:
        out += ["accounting", "accounting-setup"]
        if spec.accounting.external is None:
            out.append("mariadb")
    if spec.restapi.enabled:
        out.append("restapi")
    if spec.login.enabled:
        out.append("login")
    if spec.monitoring.enabled and spec.monitoring.exporter.enabled:
        out.append("exporter")
    if made_here(spec, keys_in_cluster=keygen):
        out.append("keygen")
    if spec.inference.namespaces:
        out.append("webhook")
    return sorted(out)


def _ldap_ports(spec: ClusterSpec) -> list[int]:
    ldap = spec.auth.ldap
    if ldap is None:
        return []
    return sorted({urlsplit(u).port or (636 if u.startswith("ldaps:") else 389) for u in ldap.uris})


def _ports(numbers: list[int], protocol: str = "TCP") -> list[Manifest]:
    return [{"protocol": protocol, "port": n} for n in numbers]


def policy_spec(pods: Manifest, ingress: list[Manifest], egress: list[Manifest]) -> Manifest:
    """A NetworkPolicy's spec denying both ways but for `ingress` and `egress`. An empty list is left
    out, not written `[]`: it means the same (policyTypes names both), and the API server drops an
    empty list, so a render that kept it would differ from the stored object at every apply
    (`kubectl apply` says "configured", a GitOps tool shows it out of sync)."""
    return {
        "podSelector": pods,
        "policyTypes": ["Ingress", "Egress"],
        **({"ingress": ingress} if ingress else {}),
        **({"egress": egress} if egress else {}),
    }


def rules(links: tuple[roles.Link, ...], side: str, peers: Peers, network: NetworkSpec) -> list[Manifest]:
    """Policy rules (`side`: from or to) for the table's links."""
    out: list[Manifest] = []
    for link in links:
        ports = [] if link.port is None else _ports([link.port], link.protocol)
        selected: list[Manifest] = []
        anywhere = False
        for peer in link.peers:
            if peer == roles.KUBE_API:
                # Out to the API server: on its ports; in from it (an admission call): on the pod's.
                api_ports = _ports(network.api_server_ports) if side == "to" or link.port is None else ports
                out += [{side: [{"ipBlock": {"cidr": cidr}}], "ports": api_ports} for cidr in network.api_server_cidrs]
                continue
            found = peers(peer)
            if found is OPEN:
                anywhere = True
            else:
                selected += found
        if anywhere:
            out.append({"ports": ports} if ports else {})
        elif selected:
            out.append({side: selected, **({"ports": ports} if ports else {})})
    return out


def _tenant_peers(spec: ClusterSpec, role: str, operator_namespace: str | None) -> Peers:
    present = set(present_roles(spec))

    def peers(peer: str) -> list[Manifest] | None:
        if peer in present:
            return [{"podSelector": pods_of(spec.name, peer)}]
        if peer == "operator":
            if operator_namespace is None:
                return []
            return [
                {
                    "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: operator_namespace}},
                    "podSelector": {"matchLabels": OPERATOR_LABELS},
                }
            ]
        if peer == roles.SOURCE_RANGES:
            settings = spec.login.service if role == "login" else spec.restapi.service
            ranges = [{"ipBlock": {"cidr": c}} for c in settings.source_ranges]
            return OPEN if role == "login" and not ranges else ranges
        if peer == roles.SCRAPERS:
            return [{"namespaceSelector": {}}]
        if peer in (roles.DNS, roles.ANYWHERE):
            return OPEN
        return []  # LDAP and an external database: their own port rules (below); absent roles: none

    return peers


def _outside_ports(spec: ClusterSpec, row: roles.Role) -> list[Manifest]:
    """Egress to the LDAP servers and an external database, on the spec's ports, any address."""
    out = []
    peers = row.peers_out()
    if roles.LDAP in peers and _ldap_ports(spec):
        out.append({"ports": _ports(_ldap_ports(spec))})
    ext = spec.accounting.external
    if roles.DATABASE in peers and spec.accounting.enabled and ext is not None:
        out.append({"ports": _ports([ext.port])})
    return out


def default_deny(spec: ClusterSpec) -> Manifest:
    """Every pod of this cluster: nothing in, nothing out, unless its role's policy says so."""
    return obj(
        API,
        "NetworkPolicy",
        metadata(spec, naming.default_deny(spec), "network"),
        spec={"podSelector": {"matchLabels": {keys.CLUSTER: spec.name}}, "policyTypes": ["Ingress", "Egress"]},
    )


def role_policy(spec: ClusterSpec, role: str, operator_namespace: str | None) -> Manifest:
    row = roles.ROLES[role]
    peers = _tenant_peers(spec, role, operator_namespace)
    talks_to = row.talks_to
    if role == "controller" and not fenced(spec):
        # Only the fence calls the API server, and only a controller with backups has one.
        talks_to = tuple(link for link in talks_to if roles.KUBE_API not in link.peers)
    return obj(
        API,
        "NetworkPolicy",
        metadata(spec, naming.role_policy(spec, role), role),
        spec=policy_spec(
            pods_of(spec.name, role),
            rules(row.listens, "from", peers, spec.network),
            [*rules(talks_to, "to", peers, spec.network), *_outside_ports(spec, row)],
        ),
    )


def network_policies(spec: ClusterSpec, operator_namespace: str | None, *, keygen: bool = True) -> list[Manifest]:
    """The default deny over this cluster's pods, then one policy per role it runs (`keygen`: the
    key generator's too); none when `network.policies` is off."""
    if not spec.network.policies:
        return []
    present = present_roles(spec, keygen)
    return [default_deny(spec), *(role_policy(spec, r, operator_namespace) for r in present)]
