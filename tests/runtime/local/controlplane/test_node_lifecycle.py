"""The node lifecycle on the real control plane: `sunk local up`'s lifecycle settings reach
kube-controller-manager and the API server's DefaultTolerationSeconds admission, and when our node
agent stops one Node's heartbeats (`sunk local node stop`) the real node-lifecycle controller marks
it Ready=Unknown and taints it `node.kubernetes.io/unreachable`, then takes both back when the
agent renews its Lease again. On demand (marker `controlplane`, `make test-controlplane`)."""

from __future__ import annotations

import json
import ssl
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from sunk.runtime.local import inventory
from sunk.runtime.local.controlplane import ControlPlane, Settings
from sunk.runtime.local.nodeagents import NodeAgents, close_network, open_network

from tests.support.controlplane import Loop, get, kubectl, wait_for

pytestmark = pytest.mark.controlplane

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
"""The taints the node lifecycle controller puts on a Node whose Ready is False or Unknown."""

LOST, KEPT = "cp-lost-1", "cp-kept-1"
SETTINGS = Settings(
    node_monitor_grace=30.0,
    not_ready_toleration=71,
    unreachable_toleration=72,
    node_startup_grace=45.0,
    eviction_rate=0.5,
    terminated_pod_gc_threshold=100,
)
"""A grace of three Lease renewals (the agent renews every 10 s), not Kubernetes' 50 s; every value
unlike its default, so that what the components run with can only come from the flags."""

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
"""The taints the node lifecycle controller puts on a Node whose Ready is False or Unknown."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, NodeAgents, Loop]]:
    folder = tmp_path_factory.mktemp("lifecycle")
    network = open_network(folder / "agent")
    try:
        with ControlPlane.for_pods(folder / "plane", network.gateway, SETTINGS) as cp:
            loop = Loop()
            agents = NodeAgents(cp, folder / "agent", network)
            try:
                # Two Nodes: with one of two lost the zone is not fully down, so the NoExecute taint
                # (rate limited by --node-eviction-rate) is given as well as the NoSchedule one.
                nodes = [inventory.node(n, {"cpu": "2", "memory": "4Gi"}, {}) for n in (LOST, KEPT)]
                loop.run(agents.start(nodes))
                yield cp, agents, loop
            finally:
                loop.run(agents.close())
                loop.close()
    finally:
        close_network(network)


def _ready(node: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in node["status"]["conditions"] if c["type"] == "Ready")


def _unreachable(node: dict[str, Any]) -> set[str]:
    return {t["effect"] for t in node["spec"].get("taints") or [] if t["key"] == UNREACHABLE}


def _renewed(cp: ControlPlane, name: str) -> str:
    return str(get(cp, "lease", "-n", "kube-node-lease", name)["spec"]["renewTime"])


def test_start_returns_once_the_node_lifecycle_has_cleared_every_node(
    cluster: tuple[ControlPlane, NodeAgents, Loop],
) -> None:
    """First in the module, right after start(): the API server gave each new Node the not-ready
    taint (TaintNodesByCondition), and start() waited for kube-controller-manager to take it off,
    so a render applied next is scheduled on every Node, not on those cleared first."""
    cp, _, _ = cluster
    for name in (LOST, KEPT):
        node = get(cp, "node", name)
        assert _ready(node)["status"] == "True"
        assert [t["key"] for t in node["spec"].get("taints") or []] == []


def test_kube_controller_manager_runs_with_the_settings(cluster: tuple[ControlPlane, NodeAgents, Loop]) -> None:
    cp, _, _ = cluster
    context = ssl._create_unverified_context()  # its /configz certificate is self-signed, made at start
    context.load_cert_chain(cp.folder / "pki" / "admin.crt", cp.folder / "pki" / "admin.key")
    url = f"https://127.0.0.1:{cp.ports.controller_manager}/configz"
    with urllib.request.urlopen(url, context=context, timeout=30) as answer:
        config = json.load(answer)["kubecontrollermanager.config.k8s.io"]
    assert config["NodeLifecycleController"] == {
        "NodeEvictionRate": 0.5,
        "SecondaryNodeEvictionRate": 0.01,
        "NodeStartupGracePeriod": "45s",
        "NodeMonitorGracePeriod": "30s",
        "PodEvictionTimeout": "0s",  # unused since taint-based eviction
        "LargeClusterSizeThreshold": 50,
        "UnhealthyZoneThreshold": 0.55,
    }
    assert config["PodGCController"] == {"TerminatedPodGCThreshold": 100}


def test_admission_gives_pods_the_toleration_seconds_up_was_given(
    cluster: tuple[ControlPlane, NodeAgents, Loop],
) -> None:
    cp, _, _ = cluster
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "tolerated", "namespace": "default"},
        # Bound nowhere: only what admission made of it matters.
        "spec": {"nodeSelector": {"sunk.test/nowhere": "x"}, "containers": [{"name": "c", "image": "none.invalid/x"}]},
    }
    # ServiceAccount admission refuses a pod until the controller has made the namespace's `default`.
    wait_for("the default ServiceAccount", lambda: "default" in kubectl(cp, "get", "serviceaccounts", "-o", "name"), 60)
    kubectl(cp, "create", "-f", "-", stdin=json.dumps(pod))
    tolerations = get(cp, "pod", "tolerated")["spec"]["tolerations"]
    seconds = {t["key"]: t["tolerationSeconds"] for t in tolerations if t.get("effect") == "NoExecute"}
    assert seconds == {NOT_READY: 71, UNREACHABLE: 72}
    kubectl(cp, "delete", "pod", "tolerated", "--wait=false")


def test_a_node_whose_agent_stops_goes_unknown_and_unreachable_then_ready_again(
    cluster: tuple[ControlPlane, NodeAgents, Loop],
) -> None:
    cp, agents, loop = cluster
    assert agents.agent is not None
    wait_for("Ready Nodes", lambda: all(_ready(get(cp, "node", n))["status"] == "True" for n in (LOST, KEPT)), 60)
    loop.run(agents.agent.stop_node(LOST))
    stopped_at = _renewed(cp, LOST)

    def unknown() -> dict[str, Any] | None:
        node: dict[str, Any] = get(cp, "node", LOST)
        return node if _ready(node)["status"] == "Unknown" else None

    lost = wait_for("the lost Node Unknown", unknown, 180)
    assert _ready(lost)["reason"] == "NodeStatusUnknown"
    wait_for("the unreachable taints", lambda: _unreachable(get(cp, "node", LOST)) == {"NoSchedule", "NoExecute"}, 120)
    assert _renewed(cp, LOST) == stopped_at  # the real Lease was left to expire
    kept = get(cp, "node", KEPT)
    assert _ready(kept)["status"] == "True" and not _unreachable(kept)

    loop.run(agents.agent.start_node(LOST))
    wait_for("the Node Ready again", lambda: _ready(get(cp, "node", LOST))["status"] == "True", 120)
    wait_for("the taints gone", lambda: not _unreachable(get(cp, "node", LOST)), 120)
    assert _renewed(cp, LOST) > stopped_at
