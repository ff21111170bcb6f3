"""The real control plane's command lines and the remote store's paths, without the binaries: what
issue 37 asks of each component is on its command line (the processes themselves run in
tests/runtime/local/controlplane, on demand)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sunk.runtime.local.controlplane import (
    KUBERNETES_SERVICE_IP,
    Ports,
    Settings,
    commands,
    go_duration,
    lifecycle_flags,
)
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


def test_the_node_lifecycle_settings_become_the_controllers_and_admission_s_flags() -> None:
    settings = Settings(
        node_monitor_grace=20.0,
        not_ready_toleration=71,
        unreachable_toleration=72,
        node_startup_grace=90.5,
        eviction_rate=0.25,
        secondary_eviction_rate=0.0,
        unhealthy_zone_threshold=0.6,
        large_cluster_threshold=10,
        terminated_pod_gc_threshold=100,
    )
    flags = lifecycle_flags(settings)
    assert flags == {
        "kube-apiserver": ["--default-not-ready-toleration-seconds=71", "--default-unreachable-toleration-seconds=72"],
        "kube-controller-manager": [
            "--node-monitor-grace-period=20s",
            "--node-startup-grace-period=90.5s",
            "--node-eviction-rate=0.25",
            "--secondary-node-eviction-rate=0",
            "--unhealthy-zone-threshold=0.6",
            "--large-cluster-size-threshold=10",
            "--terminated-pod-gc-threshold=100",
        ],
    }
    argv = commands(Path("/bin"), Path("/w"), PORTS, settings=settings)
    for component, own in flags.items():
        assert set(own) <= set(argv[component])
    assert not any("toleration-seconds" in a for a in argv["kube-controller-manager"])
    assert not any("node-monitor" in a for a in argv["kube-apiserver"])


def test_without_settings_the_components_get_kubernetes_defaults() -> None:
    argv = commands(Path("/bin"), Path("/w"), PORTS)
    kcm, apiserver = _flags(argv["kube-controller-manager"]), _flags(argv["kube-apiserver"])
    assert kcm["node-monitor-grace-period"] == "50s" and kcm["node-startup-grace-period"] == "60s"
    assert kcm["node-eviction-rate"] == "0.1" and kcm["secondary-node-eviction-rate"] == "0.01"
    assert kcm["unhealthy-zone-threshold"] == "0.55" and kcm["large-cluster-size-threshold"] == "50"
    assert kcm["terminated-pod-gc-threshold"] == "12500"
    assert apiserver["default-not-ready-toleration-seconds"] == "300"
    assert apiserver["default-unreachable-toleration-seconds"] == "300"


def test_go_durations_drop_a_needless_fraction() -> None:
    assert [go_duration(s) for s in (50.0, 0.5, 90.25, 3600)] == ["50s", "0.5s", "90.25s", "3600s"]


def test_the_cluster_process_takes_the_lifecycle_flags_sunk_local_up_passes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`sunk local up --node-startup-grace-period 30 --node-eviction-rate 0.5` reaches the
    cluster's Settings: the flags cli._start writes are the ones `python -m sunk.runtime.local` reads."""
    import sys

    from sunk.runtime.local import __main__ as entry
    from sunk.runtime.local import cli as local_cli

    want = Settings(20.0, 40, 40, node_startup_grace=30.0, eviction_rate=0.5)
    started: list[list[str]] = []

    class Started(Exception):
        pass

    def popen(argv: list[str], **_: Any) -> None:
        started.append(argv)
        raise Started

    monkeypatch.setattr("subprocess.Popen", popen)
    with pytest.raises(Started):
        local_cli._start(tmp_path, tmp_path, settings=want)
    got: list[Settings] = []

    def serve(workdir: Any, project: Any, settings: Settings) -> None:
        got.append(settings)

    monkeypatch.setattr(entry, "serve", serve)
    monkeypatch.setattr("asyncio.run", lambda ran: ran)  # no loop made and closed in the test process
    monkeypatch.setattr(sys, "argv", ["python -m sunk.runtime.local", *started[0][3:]])
    entry.main()
    assert got == [want]


def test_stop_kills_an_api_server_that_drains_and_gives_the_others_their_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`stop()` in reverse start order: a component that ends on SIGTERM ends so (etcd keeps its
    clean shutdown); the API server, which after SIGTERM waits up to its 60 s request timeout for
    the requests in flight, is killed once API_SERVER_STOP_GRACE has passed instead of after
    STOP_GRACE (set to 10 minutes here: waiting it out would hang the test, not slow it). Stand-ins,
    not the binaries: one shell ignores SIGTERM as the draining API server
    does (it never exits on its own here), the others exit on it. What the stand-ins can't model:
    the real API server's drain itself (measured on the local cluster, see the constant)."""
    import subprocess
    import threading
    import time

    from sunk.runtime.local import controlplane
    from sunk.runtime.local.controlplane import API_SERVER_STOP_GRACE, STOP_GRACE, ControlPlane

    assert API_SERVER_STOP_GRACE < STOP_GRACE
    monkeypatch.setattr(controlplane, "STOP_GRACE", 600.0)
    order = tmp_path / "order"
    names = ("etcd", "kube-apiserver", "kube-scheduler")
    plane = ControlPlane(tmp_path, ports=PORTS)
    for name in names:
        on_term = f"echo {name} >> {order}" + ("" if name == "kube-apiserver" else "; exit 0")
        script = f"trap '{on_term}' TERM; touch {tmp_path}/{name}.up; while :; do sleep 0.1; done"
        plane.processes[name] = subprocess.Popen(["bash", "-c", script])
    procs = dict(plane.processes)
    deadline = time.monotonic() + 60
    while not all((tmp_path / f"{name}.up").exists() for name in names):  # every trap set
        assert time.monotonic() < deadline, "the stand-ins did not start"
        time.sleep(0.05)
    stopping = threading.Thread(target=plane.stop, daemon=True)
    stopping.start()
    stopping.join(120)
    if stopping.is_alive():  # waiting STOP_GRACE out on the API server: end the stand-ins
        for proc in procs.values():
            proc.kill()
        pytest.fail("stop() waited STOP_GRACE out on the API server")
    assert order.read_text().split() == ["kube-scheduler", "kube-apiserver", "etcd"]
    assert procs["kube-apiserver"].returncode == -9  # SIGTERM seen, then killed
    assert procs["etcd"].returncode == 0 and procs["kube-scheduler"].returncode == 0
    assert plane.processes == {}
