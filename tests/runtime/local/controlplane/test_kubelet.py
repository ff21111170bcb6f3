"""Our node agent as the kubelet of the real control plane (runtime/local/nodeagents.py): it registers a
Node, renews its Lease, and runs a pod from our slurmctld image that the real scheduler bound to it,
with the ServiceAccount token the real admission asked for, until the pod is Ready; a deletion
ends with the agent's final delete. On demand (marker `controlplane`, `make test-controlplane`)."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sunk.runtime.local import inventory
from sunk.runtime.local.controlplane import ControlPlane
from sunk.runtime.local.nodeagents import NodeAgents

from sunk.images import ROLES, tag_for

pytestmark = pytest.mark.controlplane

T = TypeVar("T")
NODE = "cp-node-1"


class Loop:
    """An asyncio loop on a thread: the agent's, as the cluster's process runs it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = 120) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Path]]:
    folder = tmp_path_factory.mktemp("kubelet")
    with ControlPlane(folder / "plane") as cp:
        loop = Loop()
        agents = NodeAgents(cp, folder / "agent")
        try:
            loop.run(agents.start([inventory.node(NODE, {"cpu": "4", "memory": "8Gi"})]))
            yield cp, folder
        finally:
            loop.run(agents.close())
            loop.close()


def kubectl(cp: ControlPlane, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={cp.kubeconfig}", *args], input=stdin, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def get(cp: ControlPlane, *args: str) -> Any:
    return json.loads(kubectl(cp, "get", "-o", "json", *args))


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 180) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(1)
    raise AssertionError(f"no {what} in {timeout:.0f} s")


def test_the_agent_registers_its_node_and_renews_the_lease(plane: tuple[ControlPlane, Path]) -> None:
    cp, _ = plane
    node = get(cp, "node", NODE)
    assert {"type": "InternalIP", "address": node["status"]["addresses"][0]["address"]} in node["status"]["addresses"]
    assert node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 10250
    assert node["status"]["allocatable"]["cpu"] == "4"
    first = get(cp, "lease", "-n", "kube-node-lease", NODE)["spec"]["renewTime"]
    wait_for("renewed lease", lambda: get(cp, "lease", "-n", "kube-node-lease", NODE)["spec"]["renewTime"] != first, 40)


def _pod(name: str) -> dict[str, Any]:
    role = ROLES["slurmctld"]
    image = f"ghcr.io/sunk-dev/{role.image}:{tag_for(role, release='26.05')}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [
                {
                    "name": "c",
                    "image": image,
                    "command": [
                        "sh",
                        "-c",
                        "cat /var/run/secrets/kubernetes.io/serviceaccount/token; exec sleep infinity",
                    ],
                    "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 2},
                }
            ],
        },
    }


def test_a_pod_the_scheduler_bound_runs_ready_with_a_token_request_token(plane: tuple[ControlPlane, Path]) -> None:
    cp, folder = plane
    # The ServiceAccount controller makes `default` in each namespace soon after the start.
    wait_for("default ServiceAccount", lambda: "default" in kubectl(cp, "get", "serviceaccounts", "-o", "name"), 60)
    kubectl(cp, "apply", "-f", "-", stdin=json.dumps(_pod("real")))

    def ready() -> dict[str, Any] | None:
        pod = get(cp, "pod", "real")
        conditions = {c["type"]: c["status"] for c in pod["status"].get("conditions") or []}
        return pod if conditions.get("Ready") == "True" else None

    pod = wait_for("Ready pod", ready)
    assert pod["spec"]["nodeName"] == NODE
    assert pod["status"]["podIP"].startswith("10.233.")
    events = get(cp, "events", "--field-selector=involvedObject.name=real")["items"]
    assert any(e["reason"] == "Scheduled" for e in events)
    # The container printed the token the agent mounted: a JWT the API server signed for this pod's account.
    logs = sorted((folder / "agent" / "pods" / pod["metadata"]["uid"] / "logs" / "c").glob("*.log"))
    token = logs[-1].read_text().split()[0]
    claims = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))
    assert claims["sub"] == "system:serviceaccount:default:default"
    # kubectl logs: the API server asks the Node's kubelet API (10250 on its InternalIP).
    assert kubectl(cp, "logs", "real", "-c", "c").split()[0] == token
    kubectl(cp, "delete", "pod", "real", "--wait=false")
    wait_for("final delete", lambda: "real" not in kubectl(cp, "get", "pods", "-o", "name"), 60)
