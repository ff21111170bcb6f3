"""The real control plane's command lines and the remote store's paths, without the binaries: what
issue 37 asks of each component is on its command line (the processes themselves run in
tests/runtime/local/controlplane, on demand)."""

from __future__ import annotations

from pathlib import Path

from sunk.runtime.local.controlplane import KUBERNETES_SERVICE_IP, Ports, commands
from sunk.runtime.local.remote import _path
from sunk.runtime.local.resources import Registry

PORTS = Ports(etcd=1, etcd_peer=2, apiserver=3, controller_manager=4, scheduler=5)


def _flags(argv: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("--").partition("=")[::2] for a in argv[1:])


def test_the_components_start_in_order_from_the_built_binaries() -> None:
    argv = commands(Path("/bin"), Path("/w"), PORTS)
    assert list(argv) == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
    assert [a[0] for a in argv.values()] == [f"/bin/{n}" for n in argv]


def test_the_api_server_authenticates_authorizes_and_admits_as_issue_37_asks() -> None:
    flags = _flags(commands(Path("/bin"), Path("/w"), PORTS)["kube-apiserver"])
    assert flags["etcd-servers"] == "http://127.0.0.1:1" and flags["secure-port"] == "3"
    assert flags["authorization-mode"] == "Node,RBAC"
    assert flags["client-ca-file"] == "/w/pki/ca.crt"
    assert flags["service-account-signing-key-file"] == "/w/pki/sa.key"
    assert flags["service-account-key-file"] == "/w/pki/sa.pub"
    assert flags["kubelet-client-certificate"] == "/w/pki/apiserver-kubelet-client.crt"
    # PodSecurity and ServiceAccount are in the default set; disabling either would be a regression.
    assert "disable-admission-plugins" not in flags


def test_the_controllers_sign_tokens_with_the_pair_the_api_server_checks() -> None:
    argv = commands(Path("/bin"), Path("/w"), PORTS)
    kcm, scheduler = _flags(argv["kube-controller-manager"]), _flags(argv["kube-scheduler"])
    assert kcm["service-account-private-key-file"] == "/w/pki/sa.key"
    assert kcm["root-ca-file"] == "/w/pki/ca.crt"
    assert kcm["use-service-account-credentials"] == "true"
    assert kcm["kubeconfig"] == "/w/controller-manager.conf" and scheduler["kubeconfig"] == "/w/scheduler.conf"
    assert kcm["secure-port"] == "4" and scheduler["secure-port"] == "5"


def test_remote_paths_follow_the_api_s_layout() -> None:
    registry = Registry()
    pods = registry.get("v1", "pods")
    leases = registry.get("coordination.k8s.io/v1", "leases")
    nodes = registry.get("v1", "nodes")
    assert pods is not None and leases is not None and nodes is not None
    assert _path(pods, "ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert _path(pods, None) == "/api/v1/pods"
    assert _path(leases, "kube-node-lease", "n1") == "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
    assert _path(nodes, "ignored", "n1") == "/api/v1/nodes/n1"


def test_for_pods_the_api_server_listens_on_and_advertises_the_bridge_address() -> None:
    flags = _flags(commands(Path("/bin"), Path("/w"), PORTS, "10.233.7.1")["kube-apiserver"])
    assert flags["bind-address"] == flags["advertise-address"] == "10.233.7.1"
    assert flags["service-cluster-ip-range"] == "10.96.0.0/16" and KUBERNETES_SERVICE_IP == "10.96.0.1"
    assert _flags(commands(Path("/bin"), Path("/w"), PORTS)["kube-apiserver"])["bind-address"] == "127.0.0.1"
