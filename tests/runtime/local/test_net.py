"""The local cluster's network plan: its addresses and the rules that keep packets inside it."""

from __future__ import annotations

import ipaddress

import pytest
from sunk.runtime.local import net


def test_each_cluster_takes_a_free_24_inside_the_clusters_range() -> None:
    used = [ipaddress.IPv4Network("10.233.0.0/24"), ipaddress.IPv4Network("192.168.1.0/24")]
    subnet = net.free_subnet(used)
    assert subnet == ipaddress.IPv4Network("10.233.1.0/24") and subnet.subnet_of(net.SUBNETS)
    with pytest.raises(RuntimeError, match="in use"):
        net.free_subnet([net.SUBNETS])


def test_names_fit_linux_interface_names() -> None:
    network = net.Network(net.bridge_name("/some/project"), ipaddress.IPv4Network("10.233.4.0/24"))
    assert len(network.bridge) <= 15 and len(network.veth(249) + "c") <= 15
    assert (network.gateway, network.address(0)) == ("10.233.4.1", "10.233.4.2")
    with pytest.raises(ValueError):
        network.address(300)


def test_the_firewall_drops_forwarding_off_the_bridge_and_host_services_but_the_api() -> None:
    network = net.Network("sk12345678", ipaddress.IPv4Network("10.233.0.0/24"))
    rules = net.firewall_rules(network, 6443)
    forward = [r for chain, r in rules if chain == "FORWARD"]
    assert forward[0][:5] == ["-i", "sk12345678", "!", "-o", "sk12345678"] and forward[0][-1] == "DROP"
    assert forward[1][:5] == ["!", "-i", "sk12345678", "-o", "sk12345678"] and forward[1][-1] == "DROP"
    inputs = [r for chain, r in rules if chain == "INPUT"]
    # inserted at the top in order: the last is checked first, the catch-all drop last of all
    assert inputs[0][-1] == "DROP" and "6443" in inputs[1] and inputs[2][5:8] == ["udp", "--dport", "53"]
    assert "ESTABLISHED,RELATED" in inputs[3]
    listing = "\n".join(
        f'-A {chain} {" ".join(r[:-6])} -m comment --comment "{network.comment()}" -j {r[-1]}' for chain, r in rules
    )
    assert len(net.tagged_rules(network, listing + "\n-A INPUT -j ACCEPT")) == len(rules)


def test_a_pods_interface_lives_in_its_namespace() -> None:
    network = net.Network("sk12345678", ipaddress.IPv4Network("10.233.0.0/24"))
    commands = net.pod_up(network, 3, 4242)
    assert ["ip", "link", "set", "sk1234567p3c", "netns", "4242"] in commands
    inside = [c for c in commands if c[0] == "nsenter"]
    assert all(c[1] == "--net=/proc/4242/ns/net" for c in inside)
    assert inside[1][3:] == ["ip", "addr", "add", "10.233.0.5/24", "dev", "eth0"]
    assert net.pod_down(network, 3) == [["ip", "link", "del", "sk1234567p3"]]


def test_the_kubernetes_service_s_clusterip_goes_to_the_api_server_on_the_bridge_and_is_removed_with_it() -> None:
    network = net.Network("sk12345678", ipaddress.IPv4Network("10.233.0.0/24"))
    [rule] = net.service_nat(network, "10.96.0.1", 443, 443)
    assert rule[:5] == ["iptables", "-t", "nat", "-I", "PREROUTING"]
    assert rule[5:13] == ["-i", "sk12345678", "-d", "10.96.0.1", "-p", "tcp", "--dport", "443"]
    assert rule[-3:] == ["DNAT", "--to-destination", "10.233.0.1:443"]
    listing = f'-A PREROUTING -i sk12345678 -d 10.96.0.1/32 -m comment --comment "{network.comment()}" -j DNAT'
    assert net.tagged_rules(network, listing, "nat") == [
        ["iptables", "-t", "nat", "-D", "PREROUTING", "-i", "sk12345678", "-d", "10.96.0.1/32", "-m", "comment",
         "--comment", network.comment(), "-j", "DNAT"],
    ]  # fmt: skip
