"""NetworkPolicy enforcement on the local cluster: the decision (which pods are isolated, and whom
each admits) as Kubernetes defines it, from acme-dev's rendered policies and from hand-made ones,
and the iptables rules that carry it out."""

from __future__ import annotations

import ipaddress
import subprocess
from typing import Any

import pytest
from sunk.runtime.local import net, netpolicy
from sunk.runtime.local.netpolicy import ANY_V4, Allow

from sunk.manifests.network import network_policies
from sunk.manifests.operator import operator_network_policy
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

NS = "acme-research"
NETWORK = net.Network("sk12345678", ipaddress.IPv4Network("10.233.7.0/24"))


def pod(
    name: str, ip: str, labels: dict[str, str], namespace: str = NS, ports: list[Any] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "uid": name},
        "spec": {"containers": [{"name": "c", "ports": ports or []}]},
        "status": {"podIP": ip, "phase": "Running"},
    }


def role(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/component": component, "slurm.sunk.dev/cluster": "research"}


def namespaces(*names: str, labels: dict[str, dict[str, str]] | None = None) -> list[dict[str, Any]]:
    return [{"metadata": {"name": n, "labels": (labels or {}).get(n, {})}} for n in names]


def policy(name: str, spec: dict[str, Any], namespace: str = NS) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


def acme_dev() -> list[dict[str, Any]]:
    stack = load_stack("acme-dev", FIXTURE_STACKS)
    assert stack.operator is not None
    return [*network_policies(stack.spec, stack.operator.namespace), operator_network_policy(stack.operator)]


PODS = [
    pod("research-controller-0", "10.233.7.2", role("controller")),
    pod("research-cpu-0", "10.233.7.3", role("slurmd")),
    pod("research-login-x", "10.233.7.4", role("login")),
    pod("research-syncer-x", "10.233.7.5", role("syncer")),
    pod("research-restapi-x", "10.233.7.6", role("restapi")),
    pod("probe", "10.233.7.9", {"app": "probe"}),
    pod("probe-as-slurmd-elsewhere", "10.233.7.10", role("slurmd"), namespace="other"),
    pod("sunk-operator-x", "10.233.7.11", {"app.kubernetes.io/name": "sunk-operator"}, namespace="sunk-system"),
]


def admitted(allows: tuple[Allow, ...], source: str, port: int, protocol: str = "TCP") -> bool:
    address = ipaddress.IPv4Address(source)
    return any(
        address in a.peer and a.protocol in (None, protocol) and (a.low is None or (a.low <= port <= (a.high or a.low)))
        for a in allows
    )


def test_no_policy_isolates_nothing() -> None:
    decided = netpolicy.plan([], PODS, namespaces(NS, "other", "sunk-system"))
    assert decided.ingress == {} and decided.egress == {}


def test_acme_devs_policies_admit_exactly_the_tables_peers_to_slurmctld() -> None:
    decided = netpolicy.plan(acme_dev(), PODS, namespaces(NS, "other", "sunk-system"))
    slurmctld = decided.ingress["10.233.7.2"]
    for allowed in ("10.233.7.3", "10.233.7.4", "10.233.7.5", "10.233.7.6"):
        assert admitted(slurmctld, allowed, 6817), allowed
        assert not admitted(slurmctld, allowed, 22), allowed  # only slurmctld's port
    # a pod of the namespace without the labels, and a "slurmd" of another namespace: refused
    assert not admitted(slurmctld, "10.233.7.9", 6817)
    assert not admitted(slurmctld, "10.233.7.10", 6817)
    # the probe is not sunk's: not isolated either way (a tenant's other workloads are untouched)
    assert "10.233.7.9" not in decided.ingress and "10.233.7.9" not in decided.egress
    # slurmctld may open 6818 toward slurmd, DNS anywhere, and nothing else toward the probe
    out = decided.egress["10.233.7.2"]
    assert admitted(out, "10.233.7.3", 6818) and admitted(out, "10.233.7.1", 53, "UDP")
    assert not admitted(out, "10.233.7.9", 6817) and not admitted(out, "10.233.7.1", 6443)


def test_the_operator_reaches_restapi_across_namespaces_and_the_api_on_its_ports() -> None:
    decided = netpolicy.plan(acme_dev(), PODS, namespaces(NS, "other", "sunk-system"))
    assert admitted(decided.ingress["10.233.7.6"], "10.233.7.11", 6820)  # namespaceSelector by name
    out = decided.egress["10.233.7.11"]
    assert admitted(out, "10.233.7.6", 6820) and admitted(out, "10.233.7.1", 443)
    assert not admitted(out, "10.233.7.1", 8443)


def test_a_default_deny_alone_isolates_both_ways_with_nothing_admitted() -> None:
    deny = policy("deny", {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})
    decided = netpolicy.plan([deny], PODS[:2], namespaces(NS))
    assert decided.ingress == {"10.233.7.2": (), "10.233.7.3": ()} == decided.egress


def test_policy_types_default_to_ingress_plus_egress_when_it_has_egress_rules() -> None:
    only_in = policy("a", {"podSelector": {}, "ingress": [{}]})
    both = policy("b", {"podSelector": {}, "egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}]})
    assert netpolicy.policy_types(only_in) == {"Ingress"} and netpolicy.policy_types(both) == {"Ingress", "Egress"}
    decided = netpolicy.plan([only_in], PODS[:1], namespaces(NS))
    assert decided.egress == {} and decided.ingress == {"10.233.7.2": (Allow(ANY_V4),)}


def test_policies_add_up_and_a_peer_with_both_selectors_needs_both() -> None:
    labels = {"team": {"tier": "x"}}
    both = policy(
        "both",
        {
            "podSelector": {},
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": {"matchLabels": {"tier": "x"}},
                            "podSelector": {"matchLabels": {"app": "a"}},
                        }
                    ]
                }
            ],
        },
    )
    either = policy(
        "either",
        {
            "podSelector": {},
            "ingress": [
                {
                    "from": [
                        {"namespaceSelector": {"matchLabels": {"tier": "x"}}},
                        {"podSelector": {"matchLabels": {"app": "b"}}},
                    ]
                }
            ],
        },
    )
    pods = [
        pod("target", "10.233.7.2", {}),
        pod("a-in-team", "10.233.7.3", {"app": "a"}, namespace="team"),
        pod("c-in-team", "10.233.7.4", {"app": "c"}, namespace="team"),
        pod("b-here", "10.233.7.5", {"app": "b"}),
        pod("a-here", "10.233.7.6", {"app": "a"}),
    ]
    spaces = namespaces(NS, "team", labels=labels)
    alone = netpolicy.plan([both], pods, spaces).ingress["10.233.7.2"]
    assert [str(a.peer) for a in alone] == ["10.233.7.3/32"]
    union = netpolicy.plan([both, either], pods, spaces).ingress["10.233.7.2"]
    assert sorted(str(a.peer) for a in union) == ["10.233.7.3/32", "10.233.7.4/32", "10.233.7.5/32"]


def test_ip_blocks_less_their_excepts_and_ipv6_selecting_nothing() -> None:
    rule = {"to": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.233.0.0/16"]}}, {"ipBlock": {"cidr": "::/0"}}]}
    decided = netpolicy.plan([policy("p", {"podSelector": {}, "egress": [rule]})], PODS[:1], namespaces(NS))
    allows = decided.egress["10.233.7.2"]
    assert admitted(allows, "10.1.2.3", 80) and not admitted(allows, "10.233.7.3", 80)
    assert all(a.peer.subnet_of(ipaddress.IPv4Network("10.0.0.0/8")) for a in allows)


def test_named_ports_resolve_on_the_receiving_pod_and_end_ports_make_ranges() -> None:
    ports = [{"name": "slurmctld", "containerPort": 6817, "protocol": "TCP"}]
    target = pod("ctld", "10.233.7.2", {"app": "ctld"}, ports=ports)
    client = pod("client", "10.233.7.3", {"app": "client"})
    ingress = policy(
        "in",
        {
            "podSelector": {"matchLabels": {"app": "ctld"}},
            "ingress": [{"ports": [{"port": "slurmctld"}, {"port": 7000, "endPort": 7010}]}],
        },
    )
    egress = policy(
        "out",
        {
            "podSelector": {"matchLabels": {"app": "client"}},
            "policyTypes": ["Egress"],
            "egress": [{"ports": [{"port": "slurmctld"}]}],
        },
    )
    decided = netpolicy.plan([ingress, egress], [target, client], namespaces(NS))
    assert admitted(decided.ingress["10.233.7.2"], "10.233.7.3", 6817)
    assert admitted(decided.ingress["10.233.7.2"], "10.233.7.3", 7005)
    assert not admitted(decided.ingress["10.233.7.2"], "10.233.7.3", 7011)
    # the client may open "slurmctld" only toward a pod that has a port of that name
    assert decided.egress["10.233.7.3"] == (Allow(ipaddress.IPv4Network("10.233.7.2/32"), "TCP", 6817, 6817),)


def test_selector_expressions() -> None:
    labels = {"a": "1", "b": "2"}
    assert netpolicy.selects({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "3"]}]}, labels)
    assert netpolicy.selects({"matchExpressions": [{"key": "c", "operator": "DoesNotExist"}]}, labels)
    assert not netpolicy.selects({"matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["2"]}]}, labels)
    assert not netpolicy.selects({"matchExpressions": [{"key": "c", "operator": "Exists"}]}, labels)
    with pytest.raises(netpolicy.PolicyError, match="In, NotIn, Exists, DoesNotExist"):
        netpolicy.selects({"matchExpressions": [{"key": "a", "operator": "Gt"}]}, labels)


def test_pods_without_an_address_or_finished_are_left_out() -> None:
    pending = pod("pending", "", role("controller"))
    done = pod("done", "10.233.7.8", role("controller"))
    done["status"]["phase"] = "Succeeded"
    deny = policy("deny", {"podSelector": {}, "policyTypes": ["Ingress"]})
    assert netpolicy.plan([deny], [pending, done], namespaces(NS)).ingress == {}


def test_the_rules_let_replies_pass_then_check_egress_then_ingress_dropping_the_rest() -> None:
    decided = netpolicy.plan(acme_dev(), PODS, namespaces(NS, "other", "sunk-system"))
    rows = netpolicy.rules(NETWORK, decided)
    dispatch, out, inn = netpolicy.chains(NETWORK)
    assert rows[:3] == [
        (dispatch, ["-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"]),
        (dispatch, ["-j", out]),
        (dispatch, ["-j", inn]),
    ]
    slurmctld = [r for chain, r in rows if chain == inn and r[:2] == ["-d", "10.233.7.2"]]
    assert slurmctld[-1] == ["-d", "10.233.7.2", "-j", "DROP"]
    assert ["-d", "10.233.7.2", "-s", "10.233.7.3/32", "-p", "tcp", "--dport", "6817", "-j", "RETURN"] in slurmctld
    assert all(len(chain) <= 28 for chain in netpolicy.chains(NETWORK))
    hooks = netpolicy.hooks(NETWORK)
    assert [chain for chain, _ in hooks] == ["FORWARD", "INPUT"] and all(NETWORK.comment() in r for _, r in hooks)


def test_iptables_restore_accepts_the_rules_in_a_scratch_network_namespace() -> None:
    """The text is what iptables-restore reads (in a new network namespace: the host's rules are
    untouched)."""
    decided = netpolicy.plan(acme_dev(), PODS, namespaces(NS, "other", "sunk-system"))
    text = netpolicy.restore_text(NETWORK, decided)
    done = subprocess.run(
        ["unshare", "--net", "sh", "-c", "iptables-restore --noflush && iptables -S"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "-A sk12345678-in -d 10.233.7.2/32 -j DROP" in done.stdout
    assert done.stdout.count("-N sk12345678-") == 3


def test_a_policy_whose_rules_cant_be_read_isolates_its_pods_and_admits_nothing() -> None:
    """Fail closed: the old rules are not kept, and the unreadable policy widens nothing; the
    other policies still admit what they admit."""
    bad = policy("bad", {"podSelector": {"matchLabels": role("controller")}, "policyTypes": ["Ingress", "Egress"],
                         "ingress": [{"from": [{"ipBlock": {"cidr": "not-a-cidr"}}]}]})  # fmt: skip
    good = policy("good", {"podSelector": {"matchLabels": role("login")}, "ingress": [{}]})
    decided = netpolicy.plan([bad, good], PODS[:3], namespaces(NS))
    assert decided.ingress["10.233.7.2"] == () and decided.egress["10.233.7.2"] == ()
    assert decided.ingress["10.233.7.4"] == (Allow(ANY_V4),)
    assert "10.233.7.3" not in decided.ingress  # not selected by either
    assert len(decided.errors) == 1 and decided.errors[0].startswith(f"{NS}/bad: ipBlock"), decided.errors
    # Beside a readable policy selecting the same pod, only the readable one's peers pass.
    also = policy(
        "also", {"podSelector": {"matchLabels": role("controller")}, "ingress": [{"ports": [{"port": 6817}]}]}
    )
    decided = netpolicy.plan([bad, also], PODS[:3], namespaces(NS))
    assert decided.ingress["10.233.7.2"] == (Allow(ANY_V4, "TCP", 6817, 6817),)


def test_a_policy_whose_selector_cant_be_read_isolates_its_whole_namespace() -> None:
    bad = policy("bad", {"podSelector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}})
    decided = netpolicy.plan([bad], PODS, namespaces(NS, "other", "sunk-system"))
    mine = {p["status"]["podIP"] for p in PODS if p["metadata"]["namespace"] == NS}
    assert set(decided.ingress) == set(decided.egress) == mine
    assert all(a == () for a in [*decided.ingress.values(), *decided.egress.values()])
    assert "In, NotIn, Exists, DoesNotExist" in decided.errors[0]


class _Store:
    def __init__(self, policies: list[dict[str, Any]]) -> None:
        self.objects = {"v1/pods": PODS, "networking.k8s.io/v1/networkpolicies": policies,
                        "v1/namespaces": namespaces(NS, "other", "sunk-system")}  # fmt: skip

    def resource(self, name: str) -> str:
        return name

    def items(self, resource: str) -> list[dict[str, Any]]:
        return self.objects[resource]


def test_rules_iptables_refuses_are_replaced_by_a_denial_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[netpolicy.Plan] = []

    def write(network: net.Network, decided: netpolicy.Plan) -> None:
        if decided.ingress.get("10.233.7.2"):
            raise net.NetworkError("iptables-restore: line 9 failed")
        written.append(decided)

    monkeypatch.setattr(netpolicy, "write", write)
    enforcer = netpolicy.Enforcer(_Store(acme_dev()), NETWORK, dict)
    decided = enforcer.snapshot()
    enforcer.write_or_deny(decided, netpolicy.deny_all(enforcer.pods()))
    (denied,) = written
    assert enforcer.written == denied
    every = {p["status"]["podIP"] for p in PODS}
    assert set(denied.ingress) == set(denied.egress) == every
    assert all(a == () for a in [*denied.ingress.values(), *denied.egress.values()])
