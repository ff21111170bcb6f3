"""A node agent that stops while its containers run on, as a kubelet that crashed or was stopped
(`sunk local node stop NAME --keep-containers`), on an empty local cluster of one Node.

While the agent is away the API and the machine disagree: a pod force-deleted from the API, and
one deleted gracefully (Terminating: no kubelet confirms it), keep their processes running, and
`kubectl exec` can't reach the Node. When the agent starts again it reconciles: the containers of
the pod the API no longer has are killed, the Terminating pod is stopped and goes, and the pod that
was left alone is taken back as it runs (no restart). This is what controller HA's split brain
rests on: an old slurmctld still running on a lost Node.

The same cluster shows pod GC of a deleted Node's pods (after the 40 s quarantine) through kubectl.

Its own cluster (the cluster's process, no stack; one Node, the default inventory, and one made by
a test) and one image (slurmctld, built and cached by `sunk images build slurmctld`): about a
minute."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from sunk.runtime.local import cli, inventory
from sunk.runtime.local.inventory import DEFAULT_NODE

from tests.support import waiting
from tests.support.localcluster import sunk

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[3]
IMAGE = "ghcr.io/sunk-dev/slurmctld:26.05.5"


class One:
    """An empty cluster for this checkout's folder under a temporary SUNK_LOCAL_DIR, started as
    `sunk local up` starts one (cli._start) and stopped by `sunk local down`."""

    def __init__(self, base: Path) -> None:
        self.env = {**os.environ, cli.BASE_ENV: str(base)}
        with mock.patch.dict(os.environ, {cli.BASE_ENV: str(base)}):
            self.folder = cli.workdir(ROOT)  # the folder `sunk local down` here finds
        self.state = cli._start(self.folder, ROOT)
        self.kubeconfig = self.state.kubeconfig
        # The ServiceAccount admission refuses a pod until kube-controller-manager made `default`.
        waiting.wait_for(
            "the default ServiceAccount",
            lambda: self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0,
            timeout=120,
        )

    def kubectl(self, *args: str, check: bool = True, timeout: float = 200) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", self.kubeconfig, *args], capture_output=True, text=True, timeout=timeout
        )
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done

    def pod(self, name: str) -> dict[str, Any]:
        """The pod, or {} when the API has none of that name."""
        done = self.kubectl("get", "pod", "-n", "default", name, "-o", "json", "--ignore-not-found")
        return dict(json.loads(done.stdout)) if done.stdout.strip() else {}

    def down(self) -> None:
        done = sunk("local", "down", env=self.env)
        assert done.returncode == 0, done.stderr
        waiting.wait_for("the cluster's process to exit", lambda: cli.running(self.folder) is None, timeout=30)


@pytest.fixture(scope="module")
def one(tmp_path_factory: pytest.TempPathFactory) -> Iterator[One]:
    built = sunk("images", "build", "slurmctld", env=dict(os.environ), timeout=1800)
    assert built.returncode == 0, built.stderr
    running = One(tmp_path_factory.mktemp("agent-stop"))
    try:
        yield running
    finally:
        running.down()


def _alive(marker: str) -> set[int]:
    """The host's processes whose command line carries `marker` (a container's shell, whatever its
    PID namespace)."""
    found = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if marker.encode() in (proc / "cmdline").read_bytes():
                    found.add(int(proc.name))
            except OSError:  # gone meanwhile
                continue
    return found


def _ticker(name: str, marker: str) -> dict[str, Any]:
    container = {"name": "c", "image": IMAGE, "command": ["sh", "-c", "while :; do sleep 1; done", marker]}
    spec = {"nodeName": DEFAULT_NODE, "containers": [container], "terminationGracePeriodSeconds": 2}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def test_a_stopped_agent_leaves_containers_running_and_reconciles_them_when_it_starts(one: One, tmp_path: Path) -> None:
    names = ("kept", "deleted", "forced")
    markers = {name: f"sunk-agent-stop-{name}-{secrets.token_hex(4)}" for name in names}
    manifest = tmp_path / "pods.yaml"
    manifest.write_text(yaml.safe_dump_all([_ticker(name, markers[name]) for name in names]))
    one.kubectl("apply", "-f", str(manifest))
    one.kubectl("wait", "-n", "default", "--for=condition=Ready", *(f"pod/{n}" for n in names), "--timeout=180s")
    kept = one.pod("kept")

    def shells() -> dict[str, set[int]] | None:
        seen = {name: _alive(markers[name]) for name in names}
        return seen if all(seen.values()) else None

    # Ready comes as the container starts; its shell's exec may come a moment later
    pids = waiting.wait_for("every container's shell", shells, timeout=60, interval=1)

    stopped = sunk("local", "node", "stop", DEFAULT_NODE, "--keep-containers", env=one.env)
    assert stopped.returncode == 0, stopped.stderr
    assert f"node {DEFAULT_NODE}: agent stopped (3 pods' containers left running)" in stopped.stdout
    try:
        one.kubectl("delete", "pod", "-n", "default", "deleted", "--wait=false")
        one.kubectl("delete", "pod", "-n", "default", "forced", "--force", "--grace-period=0")
        refused = one.kubectl("exec", "-n", "default", "kept", "--", "true", check=False)
        # Refused by the Node's kubelet API; kube-apiserver's upgrading proxy relays no message.
        assert refused.returncode != 0 and "Error from server" in refused.stderr
        time.sleep(8)  # the agent would have stopped them by now (2 s grace) were it running
        assert one.pod("forced") == {}  # gone from the API...
        assert one.pod("deleted")["metadata"]["deletionTimestamp"]  # ...or Terminating, unconfirmed
        assert {name: _alive(markers[name]) for name in names} == pids  # and every process runs on
    finally:
        started = sunk("local", "node", "start", DEFAULT_NODE, env=one.env)
    assert started.returncode == 0 and f"node {DEFAULT_NODE}: agent started" in started.stdout, started.stderr

    def settled() -> tuple[dict[str, Any], set[int], set[int]] | None:
        seen = (one.pod("deleted"), _alive(markers["deleted"]), _alive(markers["forced"]))
        return seen if seen == ({}, set(), set()) else None

    waiting.wait_for(
        "the deleted pods' containers killed and the Terminating pod gone", settled, timeout=120, interval=1
    )
    again = one.pod("kept")
    assert again["metadata"]["uid"] == kept["metadata"]["uid"]
    assert _alive(markers["kept"]) == pids["kept"]  # taken back as it ran: the same process
    (status,) = again["status"]["containerStatuses"]
    assert status["restartCount"] == 0 and status["ready"] and "running" in status["state"]
    assert one.kubectl("exec", "-n", "default", "kept", "--", "true").returncode == 0


def test_the_pods_of_a_deleted_node_are_collected_after_the_quarantine(one: One, tmp_path: Path) -> None:
    """`kubectl delete node`: pod GC waits out its 40 s quarantine, then deletes the pods bound to
    that Node (the agent then kills their containers, as a kubelet does for a pod gone from the API)."""
    marker = f"sunk-agent-stop-orphan-{secrets.token_hex(4)}"
    # Registered by a node agent, as `sunk local apply` adds a NodeSet's Nodes: one made with
    # kubectl would have no kubelet to run its pod.
    cli._control(one.state, "/nodes", [inventory.node("short-lived", {"cpu": "4", "memory": "8Gi"})])
    pod = _ticker("orphan", marker)
    pod["spec"]["nodeName"] = "short-lived"
    manifest = tmp_path / "node.yaml"
    manifest.write_text(yaml.safe_dump_all([pod]))
    one.kubectl("apply", "-f", str(manifest))
    one.kubectl("wait", "-n", "default", "--for=condition=Ready", "pod/orphan", "--timeout=180s")
    waiting.wait_for("the container's shell", lambda: _alive(marker), timeout=60, interval=1)
    one.kubectl("delete", "node", "short-lived")
    assert one.pod("orphan")["spec"]["nodeName"] == "short-lived"  # not at once: the quarantine

    def collected() -> bool:
        return one.pod("orphan") == {} and not _alive(marker)

    waiting.wait_for("the orphaned pod collected and its containers killed", collected, timeout=180, interval=2)
