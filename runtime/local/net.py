"""The local cluster's network: one Linux bridge on the host, a veth pair per pod whose inner end
is the pod's eth0 in the pod's own network namespace, and firewall rules that keep every packet
inside the cluster.

Addresses: each cluster takes one free /24 inside 10.233.0.0/16 (`SUBNETS`), with .1 on the bridge
(where pods reach the API server) and pods from .2 up. Nothing is routed or translated off the
bridge: iptables drops whatever is forwarded from the bridge to any other interface and the
reverse, so a pod can reach only other pods and the host's bridge address.

Pure parts (names, the commands for each step) are separate from `run`, so tests check the
commands without root. NetworkPolicy is enforced by netpolicy.py on this bridge. On the real
control plane one ClusterIP is translated, the `kubernetes` Service's, to the API server on the
bridge address (`service_nat`). Not modelled: other ClusterIPs (Services are names in each pod's
/etc/hosts, see agent.py), multi-host networking, IPv6.
"""

from __future__ import annotations

import hashlib
import ipaddress
import shlex
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SUBNETS = ipaddress.IPv4Network("10.233.0.0/16")
"""The only addresses the local cluster uses; each cluster takes one /24 of it."""
COMMENT = "sunk-local"


@dataclass(frozen=True)
class Network:
    bridge: str
    subnet: ipaddress.IPv4Network

    @property
    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    def address(self, index: int) -> str:
        """The pod address number `index` (0 is the first pod's, .2)."""
        if not 0 <= index < self.subnet.num_addresses - 3:
            raise ValueError(f"no address {index} in {self.subnet}")
        return str(self.subnet.network_address + 2 + index)

    def veth(self, index: int) -> str:
        """The host end of pod address `index`'s veth pair (at most 15 characters)."""
        return f"{self.bridge[:9]}p{index}"

    def comment(self) -> str:
        return f"{COMMENT} {self.bridge}"


def bridge_name(key: str) -> str:
    """`sk` and 8 hex digits of the cluster's key (its project folder): 10 characters."""
    return "sk" + hashlib.sha256(key.encode()).hexdigest()[:8]


def free_subnet(used: Iterable[ipaddress.IPv4Network]) -> ipaddress.IPv4Network:
    taken = list(used)
    for subnet in SUBNETS.subnets(new_prefix=24):
        if not any(subnet.overlaps(u) for u in taken):
            return subnet
    raise RuntimeError(f"every /24 of {SUBNETS} is in use on this host")


def firewall_rules(net: Network, api_port: int) -> list[tuple[str, list[str]]]:
    """(chain, rule) pairs, each inserted at the top of its chain in this order, so the last one
    listed is checked first:
    - FORWARD: anything forwarded between the bridge and any other interface is dropped, both ways
      (nothing leaves the cluster's namespaces, routed or not);
    - INPUT: from the bridge, the host takes only the API server's port and the cluster's DNS
      server (UDP 53) on the bridge address, and replies to what it opened itself (probes); any
      other host address or service is dropped."""
    tag = ["-m", "comment", "--comment", net.comment()]
    return [
        ("FORWARD", ["-i", net.bridge, "!", "-o", net.bridge, *tag, "-j", "DROP"]),
        ("FORWARD", ["!", "-i", net.bridge, "-o", net.bridge, *tag, "-j", "DROP"]),
        ("INPUT", ["-i", net.bridge, *tag, "-j", "DROP"]),
        ("INPUT", ["-i", net.bridge, "-d", net.gateway, "-p", "tcp", "--dport", str(api_port), *tag, "-j", "ACCEPT"]),
        ("INPUT", ["-i", net.bridge, "-d", net.gateway, "-p", "udp", "--dport", "53", *tag, "-j", "ACCEPT"]),
        ("INPUT", ["-i", net.bridge, "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", *tag, "-j", "ACCEPT"]),
    ]


def bridge_up(net: Network, api_port: int) -> list[list[str]]:
    commands = [
        ["ip", "link", "add", net.bridge, "type", "bridge"],
        ["ip", "addr", "add", f"{net.gateway}/{net.subnet.prefixlen}", "dev", net.bridge],
        ["ip", "link", "set", net.bridge, "up"],
    ]
    return commands + [["iptables", "-I", chain, *rule] for chain, rule in firewall_rules(net, api_port)]


def service_nat(net: Network, cluster_ip: str, port: int, target_port: int) -> list[list[str]]:
    """What kube-proxy writes for a Service whose one endpoint is the bridge address (the API
    server's `kubernetes` Service): TCP from the bridge to `cluster_ip`:`port` goes to the bridge
    address at `target_port`, which the INPUT rules already let in. Matched on the bridge, so each
    cluster on the host translates its own pods' packets to its own API server."""
    tag = ["-m", "comment", "--comment", net.comment()]
    rule = ["-i", net.bridge, "-d", cluster_ip, "-p", "tcp", "--dport", str(port), *tag]
    return [["iptables", "-t", "nat", "-I", "PREROUTING", *rule, "-j", "DNAT", "--to-destination",
             f"{net.gateway}:{target_port}"]]  # fmt: skip


def bridge_down(net: Network) -> list[list[str]]:
    """Removes the bridge and every rule tagged with its comment (whatever port it was made with)."""
    return [["ip", "link", "del", net.bridge]]


def tagged_rules(net: Network, listing: str, table: str = "filter") -> list[list[str]]:
    """`iptables -D` commands for the rules of `iptables [-t TABLE] -S` output that carry the bridge's tag."""
    out = []
    for line in listing.splitlines():
        if line.startswith("-A ") and f'"{net.comment()}"' in line:
            out.append(["iptables", *(["-t", table] if table != "filter" else []), "-D", *shlex.split(line)[1:]])
    return out


def own_chains(net: Network, listing: str) -> list[list[str]]:
    """`iptables -F` then `-X` commands for the chains of `iptables -S` output named after the
    bridge (NetworkPolicy's, netpolicy.py): emptied first, since they jump to each other."""
    names = [line.split()[1] for line in listing.splitlines() if line.startswith(f"-N {net.bridge}-")]
    return [["iptables", "-F", name] for name in names] + [["iptables", "-X", name] for name in names]


def remove_rules(net: Network) -> None:
    listing = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=False).stdout
    run(tagged_rules(net, listing), check=False)
    run(own_chains(net, listing), check=False)
    nat = subprocess.run(["iptables", "-t", "nat", "-S"], capture_output=True, text=True, check=False).stdout
    run(tagged_rules(net, nat, "nat"), check=False)


def pod_up(net: Network, index: int, holder_pid: int) -> list[list[str]]:
    """Commands that give the network namespace of process `holder_pid` an eth0 on the bridge."""
    host, peer = net.veth(index), f"{net.veth(index)}c"
    inside = ["nsenter", f"--net=/proc/{holder_pid}/ns/net", "--"]
    return [
        ["ip", "link", "add", host, "type", "veth", "peer", "name", peer],
        ["ip", "link", "set", host, "master", net.bridge, "up"],
        ["ip", "link", "set", peer, "netns", str(holder_pid)],
        [*inside, "ip", "link", "set", peer, "name", "eth0"],
        [*inside, "ip", "addr", "add", f"{net.address(index)}/{net.subnet.prefixlen}", "dev", "eth0"],
        [*inside, "ip", "link", "set", "eth0", "up"],
        [*inside, "ip", "link", "set", "lo", "up"],
        [*inside, "ip", "route", "add", "default", "via", net.gateway],
    ]


def pod_down(net: Network, index: int) -> list[list[str]]:
    return [["ip", "link", "del", net.veth(index)]]


class NetworkError(RuntimeError):
    pass


def run(commands: Sequence[Sequence[str]], *, check: bool = True) -> None:
    for command in commands:
        done = subprocess.run(list(command), capture_output=True, text=True, check=False)
        if done.returncode != 0 and check:
            raise NetworkError(f"{' '.join(command)}: {done.stderr.strip()}")


def host_subnets() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network configured on this host's interfaces (so a new cluster takes a free one)."""
    done = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=True)
    out = []
    for line in done.stdout.splitlines():
        words = line.split()
        if "inet" in words:
            out.append(ipaddress.IPv4Interface(words[words.index("inet") + 1]).network)
    return out


def bridges() -> list[str]:
    done = subprocess.run(["ip", "-o", "link", "show", "type", "bridge"], capture_output=True, text=True, check=True)
    return [line.split(":")[1].strip() for line in done.stdout.splitlines() if ":" in line]


def veths(net: Network) -> list[str]:
    """The host ends of this cluster's veth pairs still present."""
    done = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True, text=True, check=True)
    names = [line.split(":")[1].strip().split("@")[0] for line in done.stdout.splitlines() if ":" in line]
    return [n for n in names if n.startswith(net.veth(0)[:-1]) and not n.endswith("c")]
