"""`sunk local up` end to end, driven only through the sunk command and the real kubectl: the
acme-dev render applied to a local cluster, slurmctld's pod running from the slurmctld image with
its volumes, user and probes as rendered, `kubectl logs` and `kubectl exec`, the render applied a
second time, no way out of the cluster's network, and `sunk local down` leaving nothing behind.

One cluster for the module (the slow part is its pods starting: about a minute)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[3]
NS = "acme-research"


def _sunk(*args: str, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sunk", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def footprint(marker: str) -> dict[str, int]:
    """What this test's local clusters leave on the host: processes and mounts naming their folder,
    their pods' namespace holders and network namespaces, their bridges, veths and firewall rules.
    Only theirs: other local clusters (another checkout's tests) may come and go meanwhile."""
    states = [json.loads(p.read_text()) for p in Path(marker).glob("*/state.json")]
    bridges = {state["bridge"] for state in states} | set(_seen_bridges)
    holders = set(_seen_holders)
    for note in Path(marker).glob("*/pods/*/holder.pid"):
        holders.add(int(note.read_text()))
    _seen_bridges.update(bridges)
    _seen_holders.update(holders)
    procs = 0
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            procs += marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes() or int(pid) in holders
    for holder in holders:
        with contextlib.suppress(OSError):
            _seen_netns.add(os.readlink(f"/proc/{holder}/ns/net"))
    namespaces = subprocess.run(["lsns", "-t", "net", "-n", "-o", "NS"], capture_output=True, text=True, check=True)
    alive = {f"net:[{ns.strip()}]" for ns in namespaces.stdout.split()}
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in links.splitlines() if ":" in line]
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True).stdout
    return {
        "processes": procs,
        "mounts": Path("/proc/self/mountinfo").read_text().count(marker),
        "netns": len(alive & _seen_netns),
        "bridges": sum(1 for n in names if n in bridges),
        "veths": sum(1 for n in names if any(n.startswith(b[:9] + "p") for b in bridges)),
        "rules": sum(1 for line in rules.splitlines() if any(f"sunk-local {b}" in line for b in bridges)),
    }


_seen_bridges: set[str] = set()
_seen_holders: set[int] = set()
_seen_netns: set[str] = set()


class Cluster:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.kubeconfig = ""

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", self.kubeconfig, *args], capture_output=True, text=True, timeout=timeout
        )
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done

    def sh(self, script: str, container: str = "slurmctld", check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.kubectl(
            "exec", "-n", NS, "research-controller-0", "-c", container, "--", "sh", "-c", script, check=check
        )


@pytest.fixture(scope="module")
def marker(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("local-clusters"))


@pytest.fixture(scope="module")
def before(marker: str) -> dict[str, int]:
    return footprint(marker)


@pytest.fixture(scope="module")
def cluster(marker: str, before: dict[str, int]) -> Iterator[Cluster]:
    env = {**os.environ, "SUNK_LOCAL_DIR": marker}
    running = Cluster(env)
    # The images this checkout's manifests name (cached by input hash: quick when built; the
    # runtime image's hash covers the sources, so a changed checkout rebuilds that one).
    built = _sunk("images", "build", env=env, timeout=1800)
    assert built.returncode == 0, built.stderr
    up = _sunk("local", "up", "acme-dev", "--no-wait", env=env)
    try:
        assert up.returncode == 0, up.stderr + up.stdout
        running.kubeconfig = _sunk("local", "kubeconfig", env=env).stdout.strip()
        ready = running.kubectl(
            "wait",
            "-n",
            NS,
            "--for=condition=Ready",
            "pod/research-controller-0",
            "--timeout=400s",
            check=False,
            timeout=450,
        )
        if ready.returncode != 0:
            pods = running.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
            pytest.fail(f"slurmctld's pod is not Ready: {ready.stderr}\n{pods}")
        yield running
    finally:
        down = _sunk("local", "down", env=env)
        assert down.returncode == 0, down.stderr


def test_slurmctld_runs_from_its_image_with_the_rendered_user_volumes_and_probes(cluster: Cluster) -> None:
    pod = json.loads(cluster.kubectl("get", "pod", "-n", NS, "research-controller-0", "-o", "json").stdout)
    statuses = {c["name"]: c for c in pod["status"]["containerStatuses"] + pod["status"]["initContainerStatuses"]}
    assert statuses["slurmctld"]["ready"] and statuses["reconfigure"]["ready"] and statuses["munge"]["started"]
    assert pod["status"]["podIP"].startswith("10.233.")
    assert cluster.sh("id -u; id -g; hostname").stdout.split() == ["64030", "64030", "research-controller-0"]
    assert "Slurmctld(primary) at research-controller-0 is UP" in cluster.sh("scontrol ping").stdout
    assert cluster.sh("grep CapEff /proc/self/status").stdout.split() == ["CapEff:", "0000000000000000"]
    # the state claim is owned by fsGroup; the config is the rendered ConfigMap, read-only
    assert cluster.sh("stat -c %g /var/spool/slurmctld").stdout.strip() == "64030"
    configmap = json.loads(cluster.kubectl("get", "configmap", "-n", NS, "research-slurm-conf", "-o", "json").stdout)
    assert cluster.sh("cat /etc/slurm/slurm.conf").stdout == configmap["data"]["slurm.conf"]
    refused = cluster.sh("touch /etc/slurm/x", check=False)
    assert refused.returncode != 0 and "Read-only file system" in refused.stderr
    # the munge sidecar runs as root with only its five capabilities
    assert cluster.sh("grep CapEff /proc/self/status", container="munge").stdout.split()[1] == "00000000000000cb"


def test_logs_and_exec_exit_codes(cluster: Cluster) -> None:
    logs = cluster.kubectl("logs", "-n", NS, "research-controller-0", "-c", "slurmctld").stdout
    assert "Running as primary controller" in logs
    failed = cluster.sh("echo out; echo err >&2; exit 3", check=False)
    assert failed.returncode == 3 and failed.stdout == "out\n" and failed.stderr.startswith("err\n")


def test_the_render_applies_a_second_time_unchanged(cluster: Cluster, marker: str) -> None:
    """Unchanged but two: kubectl resends the PodDisruptionBudget's selector (see test_kubectl.py),
    and the topology ConfigMap, which the render creates and the operator then rewrites from the
    Nodes its pods run on, goes back to the rendered text once the operator has written it."""
    (render,) = Path(marker).glob("*/render")
    out = cluster.kubectl("apply", "-f", str(render)).stdout.splitlines()
    changed = {line for line in out if not line.endswith(" unchanged")}
    assert "poddisruptionbudget.policy/research-controller configured" in changed
    assert changed <= {
        "poddisruptionbudget.policy/research-controller configured",
        "configmap/research-topology configured",
    }


def _uplink_address() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route's source address
        address: str = s.getsockname()[0]
        return address


def test_no_packet_leaves_the_clusters_namespaces(cluster: Cluster) -> None:
    """From a pod: the API server on the bridge answers; a listener of the host's on every address
    does not, neither on the uplink's address nor the bridge's, and nothing outside is reached."""
    server = socket.create_server(("0.0.0.0", 0))
    port = server.getsockname()[1]

    def accept() -> None:
        with contextlib.suppress(OSError):  # closed at the end: nothing ever connects
            server.accept()

    threading.Thread(target=accept, daemon=True).start()
    try:
        api = cluster.sh(
            'timeout 5 bash -c "exec 3<>/dev/tcp/$KUBERNETES_SERVICE_HOST/$KUBERNETES_SERVICE_PORT"', check=False
        )
        assert api.returncode == 0, api.stderr
        targets: list[Any] = [(_uplink_address(), port), ("$KUBERNETES_SERVICE_HOST", port), ("1.1.1.1", 53)]
        for host, target_port in targets:
            done = cluster.sh(f'timeout 3 bash -c "exec 3<>/dev/tcp/{host}/{target_port}"', check=False)
            assert done.returncode != 0, f"a pod reached {host}:{target_port}"
    finally:
        server.close()


def test_the_operator_creates_slurmd_pods_that_join_slurm(cluster: Cluster) -> None:
    """The runtime image's operator (in its own pod, with its ServiceAccount token) creates the cpu
    NodeSet's slurmd pods; they register, the NodeSet's status counts them idle (read from Slurm)
    and sinfo on the login pod shows them."""
    deadline = time.monotonic() + 480
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        nodeset = cluster.kubectl("get", "nodeset", "-n", NS, "research-cpu", "-o", "json", check=False)
        status = json.loads(nodeset.stdout).get("status") or {} if nodeset.returncode == 0 else {}
        if status.get("idle") == 2:
            break
        time.sleep(5)
    else:
        pods = cluster.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
        operator = cluster.kubectl("logs", "-n", "sunk-system", "deploy/sunk-operator", "--tail=20", check=False).stdout
        pytest.fail(f"the cpu NodeSet's nodes are not idle in Slurm: {status}\n{pods}\n{operator}")
    for name in ("research-cpu-0", "research-cpu-1"):
        pod = json.loads(cluster.kubectl("get", "pod", "-n", NS, name, "-o", "json").stdout)
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "NodeSet"
    login = ("exec", "-n", NS, "deploy/research-login", "-c", "sshd", "--")
    assert cluster.kubectl(*login, "sinfo", "-h", "-p", "batch", "-o", "%T %N").stdout.split() == ["idle", "cpu-[0-1]"]


def test_a_second_up_says_one_is_running(cluster: Cluster) -> None:
    again = _sunk("local", "up", "acme-dev", "--no-wait", env=cluster.env)
    assert again.returncode == 1 and "already running" in again.stderr and "sunk local down" in again.stderr
    assert "research-controller-0" in _sunk("local", "status", env=cluster.env).stdout


def test_down_leaves_nothing_behind(cluster: Cluster, marker: str, before: dict[str, int]) -> None:
    up = footprint(marker)  # the cluster is up: the counts see it
    assert up["processes"] > 0 and up["netns"] > 0 and up["bridges"] == 1 and up["veths"] > 0 and up["rules"] == 6
    down = _sunk("local", "down", env=cluster.env)
    assert down.returncode == 0, down.stderr
    assert footprint(marker) == before
    assert _sunk("local", "status", env=cluster.env).returncode == 1
