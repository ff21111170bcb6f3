"""`sunk local up` end to end, driven only through the sunk command, the real kubectl and the
login pod's Slurm clients: the acme-dev render applied to a local cluster, slurmctld's pod running
from the slurmctld image with its volumes, user and probes as rendered, `kubectl logs` and
`kubectl exec`, the render applied a second time, no way out of the cluster's network; then the
scenarios a user runs (the operator's slurmd pods on their NodeSets' Nodes, a 2-node job, a pod
placed by Slurm beside a job, cordon, scale, slurmctld's pod replaced, crash loops, RBAC, a stack
change through `sunk local apply`, a Node lost and brought back, a directory user's job submitted
over ssh with auth.ldap applied), and `sunk local down` leaving nothing behind.

One cluster for the module, its scenarios in order (each leaves it as it found it, but the last,
the directory user's, leaves auth.ldap applied with its directory gone); the slow part
is its pods starting, about a minute, and the scale-down waiting for a job."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import select
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from sunk.runtime.harness.directory import DirectoryGroup, DirectoryUser, LocalLdap
from sunk.runtime.local.stuck import why as stuck_why

from sunk import keys, naming
from tests.support import bridgehost, waiting
from tests.support.localcluster import ROOT, LocalCluster, booted, kubectl_at, sunk, token_kubeconfig

pytestmark = pytest.mark.slurm

NS = "acme-research"
STATE = naming.STATE_SAVE
"""slurmctld's StateSaveLocation."""
T = TypeVar("T")


def footprint(marker: str) -> dict[str, int]:
    """What this test's local clusters leave on the host: processes and mounts naming their folder,
    their pods' namespace holders and network namespaces, their bridges, veths and firewall rules.
    Only theirs: other local clusters (another checkout's tests) may come and go meanwhile. A
    holder is known by its PID and start time, so a PID the kernel gave to another process after
    `down` (under load, often another cluster's) is never taken for it."""
    states = [json.loads(p.read_text()) for p in Path(marker).glob("*/state.json")]
    bridges = {state["bridge"] for state in states} | set(_seen_bridges)
    for note in Path(marker).glob("*/pods/*/holder.pid"):
        pid = int(note.read_text())
        started = _started(pid)
        if started is not None:
            _seen_holders.setdefault(pid, started)
    _seen_bridges.update(bridges)
    holders = {pid for pid, started in _seen_holders.items() if _started(pid) == started}
    procs = 0
    for entry in (p for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            procs += marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes() or int(entry) in holders
    host = os.readlink("/proc/self/ns/net")
    for holder in holders:
        with contextlib.suppress(OSError):
            _seen_netns.add(os.readlink(f"/proc/{holder}/ns/net"))
    _seen_netns.discard(host)  # the host's own is never a pod's
    alive = _live_net_namespaces()
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
        "chains": sum(1 for line in rules.splitlines() if any(line.startswith(f"-N {b}-") for b in bridges)),
    }


def _live_net_namespaces() -> set[str]:
    """Every network namespace the host still holds, as `net:[inode]`: one some process is in, or one
    a bind mount keeps (`ip netns add`). Read from /proc directly, skipping processes that exit
    meanwhile: `lsns` gives up (exit 1) when one vanishes between its listing and its read, which
    happens exactly while `sunk local down` tears pods down."""
    alive = set()
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            alive.add(os.readlink(f"/proc/{pid}/ns/net"))
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if len(fields) > 3 and fields[3].startswith("net:["):  # an nsfs mount: its root names the namespace
            alive.add(fields[3])
    return alive


_seen_bridges: set[str] = set()
_seen_holders: dict[int, str] = {}
"""PID -> its start time (/proc/PID/stat's 22nd field) when first seen."""


def _started(pid: int) -> str | None:
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    return None


def _in_leftover_namespaces() -> list[str]:
    """The processes in the network namespaces footprint() counts: what kept one alive."""
    left, found = _live_net_namespaces() & _seen_netns, []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/ns/net") in left:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                found.append(f"{pid} {command[:120]}")
    return found


_seen_netns: set[str] = set()


class Cluster(LocalCluster):
    def __init__(self, env: dict[str, str], kubeconfig: str = "") -> None:
        super().__init__(env, kubeconfig)
        self.first_job: tuple[int, str, str] = (-1, "", "")
        """sbatch -N2 submitted the moment `sunk local up` returned: exit code, stdout, stderr."""

    def pod(self, name: str, namespace: str = NS) -> dict[str, Any]:
        return super().pod(name, namespace)

    def login(self, script: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A shell on the login pod (as root: the Slurm clients as an administrator would run them)."""
        return self.kubectl("exec", "-n", NS, "deploy/research-login", "-c", "sshd", "--", "bash", "-c", script,
                            check=check)  # fmt: skip

    def sbatch(self, options: str) -> str:
        """`sbatch --parsable OPTIONS` on login: the job id. Retried for five minutes: right after a
        node registers, slurmctld refuses a job naming it beside others ("Requested topology (or
        node) configuration is not available") until the operator's topology reconfigure (10 to
        80 s after it writes topology.conf, a last one at 90 s), later on a loaded machine: the
        scale test's job was refused for over 60 s here."""
        done = wait_for(
            f"sbatch {options}",
            lambda: self.login(f"sbatch --parsable -o /dev/null {options}", check=False),
            lambda d: d.returncode == 0,
            300,
            self,
        )
        return done.stdout.strip()

    def sh(self, script: str, container: str = "slurmctld", check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.kubectl(
            "exec", "-n", NS, "research-controller-0", "-c", container, "--", "sh", "-c", script, check=check
        )


def wait_for(
    what: str, probe: Callable[[], T], done: Callable[[T], bool], timeout: float, cluster: Cluster | None = None
) -> T:
    """probe() until done(value) holds (the suite's one wait_for, every 2 s: each probe is a kubectl
    or Slurm command); else fail naming `what`, the last value and every pod of the cluster."""
    seen: list[T] = []

    def check() -> tuple[T] | None:
        seen[:] = [probe()]
        return (seen[0],) if done(seen[0]) else None

    try:
        return waiting.wait_for(what, check, timeout=timeout, interval=2)[0]
    except AssertionError:
        pods = cluster.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout if cluster else ""
        slurm = _slurm_picture(cluster) if cluster else ""
        pytest.fail(f"{what}: not after {timeout:.0f} s; last: {str(seen[0] if seen else None)[:2000]}\n{pods}{slurm}")


def _slurm_picture(cluster: Cluster) -> str:
    """What a person debugging a timed-out wait reads first: the queue with reasons, every node's
    state and reason, the topology slurmctld holds, and the end of slurmctld's and the operator's logs
    (each best effort: the cluster may be the thing that broke)."""
    logins = {
        "squeue": "squeue -o '%i %T %r %N %S %V'",
        "nodes": "sinfo -N -h -o '%N %T %E %f'",
        "jobs": "scontrol show job | grep -E 'JobId|JobState|ReqNodeList|Reason'",
        "topology": "scontrol show topology",
    }
    logs = {
        "slurmctld log": ("-n", NS, "research-controller-0", "-c", "slurmctld", "--tail=60"),
        "operator log": ("-n", "sunk-system", "deploy/sunk-operator", "--tail=40"),
    }
    parts = []
    for title in [*logins, *logs]:
        try:
            done = (
                cluster.login(logins[title], check=False)
                if title in logins
                else cluster.kubectl("logs", *logs[title], check=False)
            )
            parts.append(f"--- {title}\n{(done.stdout + done.stderr)[-4000:]}")
        except Exception as error:  # a diagnostic must not hide the failure it explains
            parts.append(f"--- {title}: {error}")
    return "\n" + "\n".join(parts)


@pytest.fixture(scope="module")
def marker(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("local-clusters"))


@pytest.fixture(scope="module")
def before(marker: str) -> dict[str, int]:
    return footprint(marker)


@pytest.fixture(scope="module")
def cluster(marker: str, before: dict[str, int]) -> Iterator[Cluster]:
    # The images this checkout's manifests name (cached by input hash: quick when built; the
    # runtime image's hash covers the sources, so a changed checkout rebuilds that one).
    with booted(Path(marker), "acme-dev", clusters=Path(marker)) as boot:
        running = Cluster(boot.env, boot.kubeconfig)
        if boot.up.returncode != 0:
            pods = running.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
            pytest.fail(f"sunk local up failed:\n{boot.up.stdout[-3000:]}\n{boot.up.stderr[-3000:]}\n{pods}")
        # The moment `up` returns, a job on two nodes is taken: no retry (up waited until slurmctld
        # bound every registered node into its topology, which the operator's reconfigure does).
        first = running.login("sbatch --parsable -N2 -o /dev/null --wrap 'srun hostname'", check=False)
        running.first_job = (first.returncode, first.stdout.strip(), first.stderr.strip())
        yield running


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
    # read-only roots: each writes only its volumes (munged's key copy is in munge-state)
    for container in ("slurmctld", "munge", "reconfigure"):
        refused = cluster.sh("touch /var/x", container=container, check=False)
        assert refused.returncode != 0 and "Read-only file system" in refused.stderr, container
    assert cluster.sh("stat -c %U:%a /etc/munge/munge.key", container="munge").stdout.strip() == "munge:400"
    mariadb = cluster.kubectl("exec", "-n", NS, "research-mariadb-0", "--", "touch", "/var/x", check=False)
    assert mariadb.returncode != 0 and "Read-only file system" in mariadb.stderr


def test_logs_and_exec_exit_codes(cluster: Cluster) -> None:
    logs = cluster.kubectl("logs", "-n", NS, "research-controller-0", "-c", "slurmctld").stdout
    assert "Running as primary controller" in logs
    failed = cluster.sh("echo out; echo err >&2; exit 3", check=False)
    assert failed.returncode == 3 and failed.stdout == "out\n" and failed.stderr.startswith("err\n")


def test_exec_it_gives_the_command_a_terminal(cluster: Cluster) -> None:
    """`kubectl exec -it` from a terminal (a pseudo-terminal here): the shell in the container has a
    terminal of its own as its controlling one, reads what is typed, and its exit status is kubectl's."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: kubectl on the terminal
        argv = ["kubectl", "--kubeconfig", cluster.kubeconfig, "exec", "-it", "-n", NS, "research-controller-0",
                "-c", "slurmctld", "--", "bash", "--norc"]  # fmt: skip
        os.execvp(argv[0], argv)
    os.write(fd, b"tty; test -t 0 && echo interactive; echo $((6 * 7)); exit 3\n")
    out = b""
    deadline = time.monotonic() + 180  # the whole session; ends sooner, when kubectl exits
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: kubectl has exited
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 3, text
    assert "/dev/pts/" in text and "interactive" in text and "42" in text, text


def test_a_load_balancer_service_reaches_login_over_ssh_on_loopback(cluster: Cluster) -> None:
    """The login Service made a LoadBalancer: a nodePort on 127.0.0.1 whose connections reach the
    login pod's sshd (the handshake completes; this test holds no authorized key)."""
    login = ("-n", NS, "service/research-login")
    cluster.kubectl("patch", *login, "-p", '{"spec": {"type": "LoadBalancer"}}')
    try:
        service = wait_for(
            "a nodePort and an ingress for the login Service",
            lambda: json.loads(cluster.kubectl("get", *login, "-o", "json").stdout),
            lambda s: bool((s.get("status") or {}).get("loadBalancer", {}).get("ingress")),
            120,
            cluster,
        )
        # The API server adds ipMode: VIP beside the ip (the default since 1.30).
        assert [i["ip"] for i in service["status"]["loadBalancer"]["ingress"]] == ["127.0.0.1"]
        port = service["spec"]["ports"][0]["nodePort"]
        options = ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null"]
        done = subprocess.run(
            ["ssh", *options, "-p", str(port), "nobody@127.0.0.1", "true"], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 255 and "Permission denied (publickey" in done.stderr, done.stderr
    finally:
        cluster.kubectl("patch", *login, "-p", '{"spec": {"type": "ClusterIP"}}', check=False)


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
    """From the login pod, whose NetworkPolicy lets it open anything: the API server on the bridge
    answers; a listener of the host's on every address does not, neither on the uplink's address
    nor the bridge's, and nothing outside is reached. slurmctld, whose row opens no connection to
    the API, is refused it by its policy."""
    server = socket.create_server(("0.0.0.0", 0))
    port = server.getsockname()[1]

    def accept() -> None:
        with contextlib.suppress(OSError):  # closed at the end: nothing ever connects
            server.accept()

    threading.Thread(target=accept, daemon=True).start()

    def login(script: str) -> subprocess.CompletedProcess[str]:
        return cluster.kubectl(
            "exec", "-n", NS, "deploy/research-login", "-c", "sshd", "--", "sh", "-c", script, check=False
        )

    try:
        to_api = 'timeout 5 bash -c "exec 3<>/dev/tcp/$KUBERNETES_SERVICE_HOST/$KUBERNETES_SERVICE_PORT"'
        api = login(to_api)
        assert api.returncode == 0, api.stderr
        assert cluster.sh(to_api, check=False).returncode != 0  # slurmctld: its policy drops it
        targets: list[Any] = [(_uplink_address(), port), ("$KUBERNETES_SERVICE_HOST", port), ("1.1.1.1", 53)]
        for host, target_port in targets:
            done = login(f'timeout 3 bash -c "exec 3<>/dev/tcp/{host}/{target_port}"')
            assert done.returncode != 0, f"a pod reached {host}:{target_port}"
    finally:
        server.close()


def test_the_operator_creates_slurmd_pods_that_join_slurm(cluster: Cluster) -> None:
    """The runtime image's operator (in its own pod, with its ServiceAccount token, authorized by
    the render's RBAC) creates both NodeSets' slurmd pods; they register, each NodeSet's status
    counts them idle (read from Slurm) and sinfo on the login pod shows them."""
    for nodeset in ("research-cpu", "research-gpu"):

        def status(nodeset: str = nodeset) -> dict[str, Any]:
            return _nodeset_status(cluster, nodeset)

        found = wait_for(f"NodeSet {nodeset} idle in Slurm", status, lambda s: s.get("idle") == 2, 480, cluster)
        assert found["idle"] == 2
    for name in ("research-cpu-0", "research-cpu-1", "research-gpu-0", "research-gpu-1"):
        pod = json.loads(cluster.kubectl("get", "pod", "-n", NS, name, "-o", "json").stdout)
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "NodeSet"
    # One line per node (-N), compared as a set: a compressed list follows registration order.
    wait_for(
        "every batch node idle in sinfo",
        lambda: sorted(cluster.login("sinfo -h -N -p batch -o '%N %T'", check=False).stdout.splitlines()),
        lambda per_node: per_node == ["cpu-0 idle", "cpu-1 idle", "gpu-0 idle", "gpu-1 idle"],
        180,
        cluster,
    )


def _nodeset_status(cluster: Cluster, name: str) -> dict[str, Any]:
    done = cluster.kubectl("get", "nodeset", "-n", NS, name, "-o", "json", check=False)
    return (json.loads(done.stdout).get("status") or {}) if done.returncode == 0 else {}


def test_each_slurmd_pod_has_a_node_of_its_nodesets_pool_and_gpu_nodes_their_devices(cluster: Cluster) -> None:
    """The Nodes come from the stack: a system Node for the control plane, and per NodeSet Nodes
    with the labels, taints and capacity it asks for; the GPU NodeSet's pods (nodeSelector on the
    instance type, a toleration of the GPU taint) run on GPU Nodes, whose discovery labels and
    device files slurmd registers as the node's GRES."""
    nodes = {
        n["metadata"]["name"]: n for n in json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    }
    placed = {name: cluster.pod(name)["spec"]["nodeName"] for name in ("research-cpu-0", "research-cpu-1",
                                                                        "research-gpu-0", "research-gpu-1")}  # fmt: skip
    assert len(set(placed.values())) == 4  # one slurmd pod per Node
    for pod, node in placed.items():
        labels = nodes[node]["metadata"]["labels"]
        assert labels[keys.LOCAL_POOL] == pod.rsplit("-", 1)[0]
    gpu_node = nodes[placed["research-gpu-0"]]
    assert gpu_node["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "H100x8"
    assert gpu_node["metadata"]["labels"]["nvidia.com/gpu.count"] == "2"
    # The API server leaves an empty taint value out.
    taints = [{"value": "", **t} for t in gpu_node["spec"]["taints"]]
    assert {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"} in taints
    assert cluster.pod("research-controller-0")["spec"]["nodeName"] == "local-system"
    gpu = ("exec", "-n", NS, "research-gpu-0", "-c", "slurmd", "--", "sh", "-c", "ls /dev/nvidia*")
    assert cluster.kubectl(*gpu).stdout.split() == ["/dev/nvidia0", "/dev/nvidia1"]
    gres = cluster.login("sinfo -h -N -n gpu-0 -o '%G'").stdout.strip()
    assert gres.startswith("gpu:h100:2"), gres


def test_a_two_node_job_from_login_completes_and_is_in_sacct(cluster: Cluster) -> None:
    # Submitted the moment `sunk local up` returned (the fixture), on no named node.
    code, job, err = cluster.first_job
    assert code == 0 and job.isdigit(), f"sbatch -N2 right after up: exit {code}: {err}"
    state = wait_for(
        f"job {job} in sacct",
        lambda: cluster.login(f"sacct -n -X -j {job} -o State,NNodes,NodeList%40 -P", check=False).stdout.strip(),
        lambda line: line.startswith(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")),
        180,
        cluster,
    )
    status, nnodes, nodelist = state.split("|")
    assert (status, nnodes) == ("COMPLETED", "2"), state
    # Slurm writes a dynamic node list in the order the nodes registered (cpu-[1,0] when cpu-1's
    # slurmd came up first), so compare the hosts it expands to, not the compressed spelling.
    hosts = cluster.login(f"scontrol show hostnames '{nodelist}'").stdout.split()
    assert len(set(hosts)) == 2, state


def _squeue(cluster: Cluster, job: str) -> str:
    """`STATE NODES REASON` of a job (the reason says why a pending job waits, when it does too long)."""
    return cluster.login(f"squeue -h -j {job} -o '%T %N %r'", check=False).stdout.strip()


def test_a_pod_placed_by_slurm_runs_beside_a_slurm_job(cluster: Cluster, tmp_path: Path) -> None:
    """A Slurm job holds one GPU node whole; a pod with sunk's schedulerName asking for a GPU gets
    a placeholder job, which Slurm places on the other GPU node; the pod is bound to that node's
    Kubernetes Node, its container starts (its log says so) with one of the Node's GPUs, and
    squeue shows the placeholder beside the job."""
    job = cluster.sbatch("-p gpu -N1 --exclusive --wrap 'sleep 600'")
    try:
        running = wait_for(f"job {job} running", lambda: _squeue(cluster, job), lambda s: s.startswith("RUNNING "),
                           300, cluster)  # fmt: skip
        job_node = running.split()[1]
        image = cluster.pod("research-gpu-0")["spec"]["containers"][0]["image"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "inference", "namespace": NS},
            "spec": {
                "schedulerName": "sunk-scheduler",
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "server",
                        "image": image,
                        "command": ["sh", "-c", 'echo "inference server started on GPUs $NVIDIA_VISIBLE_DEVICES"; '
                                    "exec sleep 600"],
                        "resources": {
                            "requests": {"cpu": "1", "memory": "1Gi"},
                            "limits": {"memory": "1Gi", "nvidia.com/gpu": "1"},
                        },
                    }
                ],
            },
        }  # fmt: skip
        manifest = tmp_path / "inference.json"
        manifest.write_text(json.dumps(pod))
        cluster.kubectl("apply", "-f", str(manifest))
        bound = wait_for(
            "the inference pod running",
            lambda: cluster.pod("inference"),
            lambda p: (p.get("status") or {}).get("phase") == "Running",
            300,
            cluster,
        )
        annotations = bound["metadata"]["annotations"]
        slurm_node = annotations["slurm.sunk.dev/slurm-node"]
        assert slurm_node != job_node and slurm_node.startswith("gpu-")
        slurmd_pod = cluster.pod(f"research-{slurm_node}")
        assert bound["spec"]["nodeName"] == slurmd_pod["spec"]["nodeName"]
        logs = wait_for(
            "the inference pod's log",
            lambda: cluster.kubectl("logs", "-n", NS, "inference", check=False).stdout,
            lambda text: "inference server started" in text,
            120,
            cluster,
        )
        assert logs.strip() == "inference server started on GPUs 0"
        placeholder = annotations["slurm.sunk.dev/job-id"]
        queue = cluster.login("squeue -h -o '%i %T %N'").stdout.split("\n")
        assert f"{placeholder} RUNNING {slurm_node}" in queue and f"{job} RUNNING {job_node}" in queue
    finally:
        cluster.kubectl("delete", "pod", "-n", NS, "inference", "--ignore-not-found", "--wait=false", check=False)
        cluster.login(f"scancel {job}", check=False)


def test_cordon_drains_the_node_in_slurm_and_uncordon_resumes_it(cluster: Cluster) -> None:
    node = cluster.pod("research-cpu-1")["spec"]["nodeName"]
    cluster.kubectl("cordon", node)
    try:
        drained = wait_for(
            "cpu-1 drained in Slurm",
            lambda: cluster.login("sinfo -h -N -n cpu-1 -o '%T|%E'").stdout.strip(),
            lambda line: line.startswith("drain"),
            180,
            cluster,
        )
        assert drained.split("|")[1].startswith("sunk:"), drained  # the syncer's reason
    finally:
        cluster.kubectl("uncordon", node)
    wait_for(
        "cpu-1 idle again",
        lambda: cluster.login("sinfo -h -N -n cpu-1 -o '%T'").stdout.strip(),
        lambda state: state == "idle",
        180,
        cluster,
    )


def _cpu_pods(cluster: Cluster) -> list[str]:
    listed = cluster.kubectl("get", "pods", "-n", NS, "-l", "slurm.sunk.dev/nodeset=cpu", "-o", "json").stdout
    return sorted(
        p["metadata"]["name"] for p in json.loads(listed)["items"] if not p["metadata"].get("deletionTimestamp")
    )


RELEASE = "scale-in-test-done"
"""The comment the scale-in test sets on its job to let it end."""

HELD = f"""srun sh -c 'until [ "$(squeue -h -j "$SLURM_JOB_ID" -o %k)" = {RELEASE} ]; do sleep 1; done'"""
"""A job step on every node of the job that runs until the job's comment (squeue's %k) is RELEASE:
the test ends the job when it has seen what it needs, not after a fixed time that a loaded machine
may outlast. (Not `scontrol show job | grep`: the job's SubmitLine holds the word too.)"""


def test_scaling_a_nodeset_adds_a_slurmd_and_scaling_down_waits_for_a_job(cluster: Cluster) -> None:
    """Up: a third slurmd pod, on the pool's spare Node, registers. Down while a job runs on every
    node: the operator drains one node for the scale-in and removes its pod only once the job is
    done."""
    nodes = json.loads(cluster.kubectl("get", "nodes", "-l", f"{keys.LOCAL_POOL}=research-cpu", "-o", "json").stdout)
    taken = {cluster.pod(name)["spec"]["nodeName"] for name in _cpu_pods(cluster)}
    (spare,) = {n["metadata"]["name"] for n in nodes["items"]} - taken  # which one is the scheduler's choice
    cluster.kubectl("scale", "nodeset", "-n", NS, "research-cpu", "--replicas=3")
    try:
        _scale_up_then_down_under_a_job(cluster, spare)
    finally:  # as found, whatever failed: two cpu pods (later tests count them)
        cluster.kubectl("scale", "nodeset", "-n", NS, "research-cpu", "--replicas=2", check=False)


def _scale_up_then_down_under_a_job(cluster: Cluster, spare: str) -> None:
    wait_for(
        "cpu-2 idle in Slurm",
        lambda: cluster.login("sinfo -h -N -n cpu-2 -o '%T'", check=False).stdout.strip(),
        lambda state: state == "idle",
        300,
        cluster,
    )
    assert cluster.pod("research-cpu-2")["spec"]["nodeName"] == spare  # the pool's Node no slurmd had
    job = cluster.sbatch(f"-p batch -w cpu-[0-2] -t 15 --wrap {shlex.quote(HELD)}")
    try:
        wait_for(f"job {job} running", lambda: _squeue(cluster, job), lambda s: s.startswith("RUNNING"), 300,
                 cluster)  # fmt: skip
        cluster.kubectl("scale", "nodeset", "-n", NS, "research-cpu", "--replicas=2")
        drained = wait_for(
            "a cpu node drained for the scale-in",
            lambda: cluster.login("sinfo -h -N -p batch -o '%N %T %E'", check=False).stdout,
            lambda text: "scale-in" in text,
            180,
            cluster,
        )
        victim = next(line.split()[0] for line in drained.splitlines() if "scale-in" in line)
        assert _squeue(cluster, job).startswith("RUNNING")
        assert f"research-{victim}" in _cpu_pods(cluster)  # the job still runs there: the pod stays
    finally:
        cluster.login(f"scontrol update job={job} comment={RELEASE}", check=False)
    wait_for("the scale-in done", lambda: _cpu_pods(cluster), lambda pods: len(pods) == 2, 300, cluster)
    assert f"research-{victim}" not in _cpu_pods(cluster)
    wait_for(  # slurmdbd records the end shortly after slurmctld
        f"job {job} COMPLETED in sacct",
        lambda: cluster.login(f"sacct -n -X -j {job} -o State -P", check=False).stdout.strip(),
        lambda state: state == "COMPLETED",
        120,
        cluster,
    )


def test_slurmctld_recreated_keeps_running_and_pending_jobs(cluster: Cluster) -> None:
    # On any node: which cpu node the scale-in before took away is the operator's choice.
    running = cluster.sbatch("--wrap 'sleep 300'")
    pending = cluster.sbatch("--hold --wrap true")
    try:
        wait_for(f"job {running} running", lambda: _squeue(cluster, running), lambda s: s.startswith("RUNNING"), 180,
                 cluster)  # fmt: skip
        old = cluster.pod("research-controller-0")["metadata"]["uid"]
        cluster.kubectl("delete", "pod", "-n", NS, "research-controller-0", timeout=180)
        wait_for(
            "a new slurmctld pod Ready",
            lambda: cluster.pod("research-controller-0"),
            lambda p: p["metadata"]["uid"] != old and _pod_ready(p),
            400,
            cluster,
        )
        queue = wait_for(
            "slurmctld answering",
            lambda: cluster.login("squeue -h -o '%i %T'", check=False).stdout,
            lambda text: running in text,
            180,
            cluster,
        )
        assert f"{running} RUNNING" in queue and f"{pending} PENDING" in queue
    finally:
        cluster.login(f"scancel {running} {pending}", check=False)


def test_a_slurmd_whose_registration_a_restored_state_forgot_is_replaced_and_registers_again(cluster: Cluster) -> None:
    """The set-back race: a new slurmd pod registered with a slurmctld whose state was then replaced
    by an older one (the upgrade drill's set-back restores its snapshot), so slurmctld holds the
    old pod's address and pings nobody, and slurmd -Z never registers again. Made here on purpose:
    node_state is copied, the node's pod replaced (it registers from a new address), then the old
    node_state put back under a slurmctld killed so it can't save over it. The operator must see the
    record is an earlier slurmd's (NOT_RESPONDING, another address, SlurmdStartTime before the pod's
    slurmd started) and replace the pod, whose slurmd registers afresh.

    What this can't model: a real set-back's snapshot differs from the live state in jobs too; here
    only node_state goes back, so the other tests' jobs are untouched."""
    idle = cluster.login("sinfo -h -N -p batch -t idle -o %N", check=False).stdout.split()
    node = next(n for n in idle if n.startswith("cpu-"))
    name = f"research-{node}"
    first = cluster.pod(name)
    cluster.sh(f"cp {STATE}/node_state /tmp/node_state.kept")
    cluster.kubectl("delete", "pod", "-n", NS, name, timeout=180)

    def address() -> tuple[str, str, str]:
        p = cluster.pod(name)
        shown = cluster.login(f"scontrol show node {node}", check=False).stdout
        addr = next((w.split("=", 1)[1] for w in shown.split() if w.startswith("NodeAddr=")), "")
        state = next((w.split("=", 1)[1] for w in shown.split() if w.startswith("State=")), "")
        return p["metadata"].get("uid", ""), f"{(p.get('status') or {}).get('podIP')}/{addr}", state

    uid, pair, _ = wait_for(
        f"{name} again, registered from its new address",
        address,
        lambda u: u[0] not in ("", first["metadata"]["uid"]) and len(set(u[1].split("/"))) == 1,
        400,
        cluster,
    )
    assert pair.split("/")[0] != first["status"]["podIP"]
    # Put the old record back under a slurmctld that can't save over it: SIGKILL, sent from the
    # host (slurmctld is its pod's PID 1, which ignores SIGKILL from inside its namespace); the
    # kubelet restarts the container and slurmctld reads the old node_state.
    cluster.sh(f"cp /tmp/node_state.kept {STATE}/node_state")
    assert _kill_slurmctld(cluster) == 1
    final = wait_for(
        f"{name} replaced by the operator and {node} idle at the new pod's address",
        address,
        lambda u: u[0] not in ("", uid) and len(set(u[1].split("/"))) == 1 and u[2].startswith("IDLE"),
        600,
        cluster,
    )
    assert final[1].split("/")[0] not in ("None", "")
    items = json.loads(cluster.kubectl("get", "events", "-n", NS, "-o", "json").stdout)["items"]
    said = [e["message"] for e in items if e["involvedObject"].get("name") == "research-cpu"]
    assert any(f"pod {name} (Slurm node {node})" in m and "registers afresh" in m for m in said), said


def _kill_slurmctld(cluster: Cluster) -> int:
    """SIGKILL this cluster's slurmctld processes from the host: those whose root is under the
    cluster's folder (other clusters on the machine are left alone). How many were killed."""
    mine = 0
    for proc in Path("/proc").iterdir():
        try:
            ours = proc.name.isdigit() and (proc / "comm").read_text().startswith("slurmctld")
            if ours and os.readlink(proc / "root").startswith(cluster.env["SUNK_LOCAL_DIR"]):
                os.kill(int(proc.name), 9)
                mine += 1
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return mine


def _pod_ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def test_crash_loops_count_restarts_and_an_unbuilt_image_says_so(cluster: Cluster) -> None:
    image = cluster.pod("research-controller-0")["spec"]["containers"][0]["image"]
    cluster.kubectl("run", "crash", "-n", "default", f"--image={image}", "--restart=Always", "--command", "--",
                    "sh", "-c", "echo crashing; exit 3")  # fmt: skip
    cluster.kubectl("run", "unbuilt", "-n", "default", "--image=ghcr.io/sunk-dev/nothing-such:1.0")
    try:
        crash = wait_for(
            "crash in CrashLoopBackOff after two restarts",
            lambda: cluster.pod("crash", "default"),
            lambda p: (
                _main_status(p).get("restartCount", 0) >= 2
                and (_main_status(p).get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"
            ),
            180,
            cluster,
        )
        assert _main_status(crash)["lastState"]["terminated"]["exitCode"] == 3
        # kubectl's table, read while a back-off lasts (the container restarts between two).
        wait_for(
            "kubectl's table showing CrashLoopBackOff",
            lambda: cluster.kubectl("get", "pod", "-n", "default", "crash", "--no-headers").stdout.split(),
            lambda table: table[2] == "CrashLoopBackOff" and int(table[3]) >= 2,
            120,
            cluster,
        )
        assert cluster.kubectl("logs", "-n", "default", "crash", "--previous").stdout == "crashing\n"
        unbuilt = wait_for(
            "unbuilt's pull error",
            lambda: cluster.pod("unbuilt", "default"),
            lambda p: (_main_status(p).get("state") or {}).get("waiting", {}).get("reason") == "ErrImagePull",
            120,
            cluster,
        )
        message = _main_status(unbuilt)["state"]["waiting"]["message"]
        assert "ghcr.io/sunk-dev/nothing-such:1.0" in message and "sunk images build" in message
    finally:
        cluster.kubectl("delete", "pod", "-n", "default", "crash", "unbuilt", "--grace-period=0", "--force",
                        check=False)  # fmt: skip


def _main_status(pod: dict[str, Any]) -> dict[str, Any]:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return dict(statuses[0])


def test_a_service_account_gets_403_for_what_its_roles_do_not_allow(cluster: Cluster, tmp_path: Path) -> None:
    """The syncer's own token (mounted in its pod) reads Nodes, as its ClusterRole allows, and is
    refused the Secrets of its namespace, which no binding of it allows: a 403 naming both."""
    syncer = ("exec", "-n", NS, "deploy/research-syncer", "--")
    token = cluster.kubectl(*syncer, "cat", "/var/run/secrets/kubernetes.io/serviceaccount/token").stdout.strip()
    config = token_kubeconfig(cluster.kubeconfig, token, tmp_path / "syncer.kubeconfig")
    assert kubectl_at(config, "get", "nodes").returncode == 0
    refused = kubectl_at(config, "get", "secrets", "-n", NS, check=False)
    assert refused.returncode == 1
    assert (
        f'secrets is forbidden: User "system:serviceaccount:{NS}:research-syncer" cannot list resource "secrets" '
        f'in API group "" in the namespace "{NS}"'
    ) in refused.stderr


def _slurmd_pods(cluster: Cluster) -> dict[str, tuple[str, int]]:
    """name -> (uid, slurmd's restart count) of every slurmd pod."""
    listed = cluster.kubectl("get", "pods", "-n", NS, "-l", "app.kubernetes.io/component=slurmd", "-o", "json")
    return {
        p["metadata"]["name"]: (p["metadata"]["uid"], _main_status(p).get("restartCount", 0))
        for p in json.loads(listed.stdout)["items"]
    }


def test_a_new_partition_applied_with_sunk_local_apply_reaches_slurmctld_and_no_slurmd_restarts(
    cluster: Cluster, tmp_path: Path
) -> None:
    stack = yaml.safe_load((ROOT / "stacks" / "Pulumi.acme-dev.yaml").read_text())
    stack["config"]["sunk:cluster"]["partitions"].append({"name": "debug", "nodesets": ["cpu"], "maxTime": "1:00:00"})
    changed = tmp_path / "Pulumi.acme-dev.yaml"
    changed.write_text(yaml.safe_dump(stack, sort_keys=False))
    before = _slurmd_pods(cluster)
    assert len(before) == 4
    done = sunk("local", "apply", str(changed), env=cluster.env)
    assert done.returncode == 0, done.stderr
    assert "configmap/research-slurm-conf configured" in done.stdout.splitlines()
    assert not any(line.startswith("nodeset.") for line in done.stdout.splitlines())  # no NodeSet changed
    wait_for(
        "partition debug in sinfo",
        lambda: cluster.login("sinfo -h -p debug -o '%P %T'", check=False).stdout.split(),
        lambda words: words == ["debug", "idle"],
        120,
        cluster,
    )
    assert _slurmd_pods(cluster) == before


PROBE = """
import socket, struct, sys
kind, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind == "tcp":
    try:
        socket.create_connection((host, port), timeout=4).close()
        print("open")
    except OSError:
        print("closed")
else:  # a DNS query for host, straight to resolv.conf's server (not /etc/hosts)
    server = next(line.split()[1] for line in open("/etc/resolv.conf") if line.startswith("nameserver"))
    labels = b"".join(bytes([len(part)]) + part.encode() for part in host.split("."))
    query = struct.pack(">6H", 0x5EED, 0x0100, 1, 0, 0, 0) + labels + b"\\0" + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.settimeout(4)
        udp.sendto(query, (server, port))
        reply = udp.recv(512)
    print("answered" if struct.unpack(">H", reply[6:8])[0] > 0 else "empty")
"""


def _probe_from(cluster: Cluster, target: tuple[str, ...], kind: str, host: str, port: int) -> str:
    done = cluster.kubectl("exec", "-n", NS, *target, "--", "python3", "-c", PROBE, kind, host, str(port), check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_network_policies_admit_the_tables_peers_to_slurmctld_and_no_other_pod(cluster: Cluster) -> None:
    """The render's NetworkPolicies, enforced on the bridge: a pod of the namespace without a role's
    labels (from the runtime image, as the operator's pods) reaches login's ssh but not slurmctld;
    slurmd, login and the syncer, which the role table lets in, reach it; DNS answers a pod that
    the policies isolate (the syncer: egress to DNS, the API and Slurm only)."""
    image = cluster.kubectl(
        "get", "deploy", "-n", NS, "research-syncer", "-o", "jsonpath={.spec.template.spec.containers[0].image}"
    ).stdout
    probe = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "namespace": NS, "labels": {"app": "probe"}},
        "spec": {"containers": [{"name": "probe", "image": image, "command": ["sleep", "infinity"]}]},
    }
    subprocess.run(
        ["kubectl", "--kubeconfig", cluster.kubeconfig, "apply", "-f", "-"],
        input=json.dumps(probe),
        text=True,
        check=True,
        capture_output=True,
    )
    try:
        cluster.kubectl("wait", "-n", NS, "--for=condition=Ready", "pod/probe", "--timeout=180s", timeout=200)
        assert _probe_from(cluster, ("probe",), "tcp", "research-controller", 6817) == "closed"
        assert _probe_from(cluster, ("probe",), "tcp", "research-login", 22) == "open"
        assert _probe_from(cluster, ("deploy/research-syncer",), "tcp", "research-controller", 6817) == "open"
        for target in (("deploy/research-login", "-c", "sshd"), ("research-cpu-0", "-c", "slurmd")):
            script = 'timeout 4 bash -c "exec 3<>/dev/tcp/research-controller/6817" && echo open || echo closed'
            reached = cluster.kubectl("exec", "-n", NS, *target, "--", "bash", "-c", script, check=False)
            assert reached.stdout.strip() == "open", (target, reached.stderr)
        name = f"research-controller.{NS}.svc.cluster.local"
        assert _probe_from(cluster, ("deploy/research-syncer",), "dns", name, 53) == "answered"
    finally:
        cluster.kubectl("delete", "pod", "-n", NS, "probe", "--grace-period=1", check=False)


def _apply(cluster: Cluster, *objects: dict[str, Any]) -> None:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", cluster.kubeconfig, "apply", "-f", "-"],
        input="---\n".join(yaml.safe_dump(o) for o in objects),
        text=True,
        capture_output=True,
    )
    assert done.returncode == 0, done.stderr


def _node(cluster: Cluster, name: str) -> dict[str, Any]:
    return dict(json.loads(cluster.kubectl("get", "node", name, "-o", "json").stdout))


def _node_ready(node: dict[str, Any]) -> str:
    conditions = (node.get("status") or {}).get("conditions") or []
    return str(next((c["status"] for c in conditions if c["type"] == "Ready"), "missing"))


def _slurm_node_state(cluster: Cluster, name: str) -> str:
    shown = cluster.login(f"scontrol show node {name} -o", check=False).stdout
    return next((word.removeprefix("State=") for word in shown.split() if word.startswith("State=")), "")


def _sinfo_states(cluster: Cluster, name: str) -> set[str]:
    """The node's states, one per partition it is in (a partition added by an earlier scenario too)."""
    return set(cluster.login(f"sinfo -h -N -n {name} -o '%T'", check=False).stdout.split())


UNREACHABLE, OUT_OF_SERVICE = "node.kubernetes.io/unreachable", "node.kubernetes.io/out-of-service"


def test_a_lost_node_turns_unknown_evicts_keeps_a_statefulset_pod_terminating_until_out_of_service(
    cluster: Cluster,
) -> None:
    """`sunk local node stop` of the Node under a cpu slurmd pod (its agent and containers stop, as a
    Node losing power): after the node-monitor grace (50 s) the Node is NotReady (Ready Unknown)
    with the unreachable NoSchedule and NoExecute taints; a pod tolerating that for 5 s is evicted
    and stays Terminating (no agent confirms it) until force-deleted; one tolerating it forever
    stays; a StatefulSet pod deleted there stays Terminating and is not replaced. Slurm marks that
    node NOT_RESPONDING or DOWN. The out-of-service taint lets pod GC force-delete the terminating pods:
    the StatefulSet makes its pod again on another Node, and the operator its slurmd pod, which
    registers it again. `sunk local node start` brings the Node back: Ready, untainted."""
    image = cluster.kubectl(
        "get", "deploy", "-n", NS, "research-syncer", "-o", "jsonpath={.spec.template.spec.containers[0].image}"
    ).stdout
    slurmd = _cpu_pods(cluster)[-1]  # which ones are left depends on the scale-in's victim
    slurm_node = slurmd.removeprefix("research-")
    lost = cluster.pod(slurmd)["spec"]["nodeName"]
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    pool = _node(cluster, lost)["metadata"]["labels"][keys.LOCAL_POOL]
    busy = {
        p["spec"].get("nodeName")
        for p in json.loads(cluster.kubectl("get", "pods", "-A", "-o", "json").stdout)["items"]
    }
    spare = next(
        n["metadata"]["name"]
        for n in nodes
        if n["metadata"]["labels"].get(keys.LOCAL_POOL) == pool and n["metadata"]["name"] not in busy
    )
    # the pool's own taints, tolerated by key (an Exists toleration without a key would tolerate
    # the unreachable taint too)
    own = [
        {"key": t["key"], "operator": "Exists", "effect": t["effect"]}
        for t in _node(cluster, lost)["spec"].get("taints") or []
        if not t["key"].startswith("node.kubernetes.io/")
    ]
    pool_taints = _node(cluster, lost)["spec"].get("taints")
    sleeper = {"name": "c", "image": image, "command": ["sleep", "infinity"]}

    def pinned(name: str, seconds: int | None) -> dict[str, Any]:
        toleration: dict[str, Any] = {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}
        if seconds is not None:
            toleration["tolerationSeconds"] = seconds
        spec = {"nodeName": lost, "containers": [sleeper], "tolerations": [*own, toleration],
                "terminationGracePeriodSeconds": 1}  # fmt: skip
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}

    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [lost, spare]}]}]}}}  # fmt: skip
    keeper = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "keeper", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "serviceName": "keeper",
            "selector": {"matchLabels": {"app": "keeper"}},
            "template": {
                "metadata": {"labels": {"app": "keeper"}},
                "spec": {"containers": [sleeper], "tolerations": own, "affinity": affinity,
                         "terminationGracePeriodSeconds": 1},
            },
        },
    }  # fmt: skip
    stopped = False
    cluster.kubectl("cordon", spare)  # keeper-0 starts on the Node to be lost
    try:
        _apply(cluster, pinned("short", 5), pinned("forever", None), keeper)
        cluster.kubectl("wait", "-n", "default", "--for=condition=Ready", "pod/short", "pod/forever", "pod/keeper-0",
                        "--timeout=180s", timeout=200)  # fmt: skip
        cluster.kubectl("uncordon", spare)
        first = cluster.pod("keeper-0", "default")
        assert first["spec"]["nodeName"] == lost
        assert {(t["key"], t.get("tolerationSeconds")) for t in first["spec"]["tolerations"]} >= {
            (UNREACHABLE, 300),
            ("node.kubernetes.io/not-ready", 300),
        }  # DefaultTolerationSeconds

        done = sunk("local", "node", "stop", lost, env=cluster.env)
        assert done.returncode == 0 and f"node {lost}: agent stopped" in done.stdout, done.stderr
        stopped = True
        unknown = wait_for(f"{lost} Ready Unknown", lambda: _node(cluster, lost), lambda n: _node_ready(n) == "Unknown",
                           120, cluster)  # fmt: skip
        taints = {(t["key"], t["effect"]) for t in unknown["spec"]["taints"]}
        assert {(UNREACHABLE, "NoSchedule"), (UNREACHABLE, "NoExecute")} <= taints
        assert cluster.kubectl("get", "node", lost, "--no-headers").stdout.split()[1] == "NotReady"
        short = wait_for("short evicted", lambda: cluster.pod("short", "default"),
                         lambda p: bool(p["metadata"].get("deletionTimestamp")), 60, cluster)  # fmt: skip
        assert any(c["type"] == "DisruptionTarget" for c in short["status"]["conditions"])
        assert not cluster.pod("forever", "default")["metadata"].get("deletionTimestamp")
        cluster.kubectl("delete", "pod", "-n", "default", "keeper-0", "--wait=false")
        time.sleep(10)  # the StatefulSet controller runs every second: it had its chances to replace it
        held = cluster.pod("keeper-0", "default")
        assert held["metadata"]["uid"] == first["metadata"]["uid"] and held["metadata"]["deletionTimestamp"]
        assert cluster.pod("short", "default")["metadata"].get("deletionTimestamp")  # still Terminating
        cluster.kubectl("delete", "pod", "-n", "default", "short", "--force", "--grace-period=0")
        assert cluster.pod("short", "default")["metadata"] == {}

        slurm = wait_for(f"{slurm_node} not responding in Slurm", lambda: _slurm_node_state(cluster, slurm_node),
                         lambda state: "NOT_RESPONDING" in state or state.startswith("DOWN"), 240, cluster)  # fmt: skip
        assert slurm

        cluster.kubectl("taint", "node", lost, f"{OUT_OF_SERVICE}=nodeshutdown:NoExecute")
        again = wait_for(
            "keeper-0 made again on another Node",
            lambda: cluster.pod("keeper-0", "default"),
            lambda p: p["metadata"].get("uid") not in (None, first["metadata"]["uid"]) and _pod_ready(p),
            180,
            cluster,
        )
        assert again["spec"]["nodeName"] == spare
        wait_for("forever force-deleted by pod GC", lambda: cluster.pod("forever", "default")["metadata"],
                 lambda meta: meta == {}, 60, cluster)  # fmt: skip
        wait_for(f"{slurm_node} idle again from a new slurmd pod",
                 lambda: ((cluster.pod(slurmd).get("spec") or {}).get("nodeName"), _sinfo_states(cluster, slurm_node)),
                 lambda seen: seen[0] not in (None, lost) and seen[1] == {"idle"}, 300, cluster)  # fmt: skip

        cluster.kubectl("taint", "node", lost, f"{OUT_OF_SERVICE}-")
        done = sunk("local", "node", "start", lost, env=cluster.env)
        assert done.returncode == 0 and f"node {lost}: agent started" in done.stdout, done.stderr
        stopped = False
        back = wait_for(f"{lost} Ready and untainted", lambda: _node(cluster, lost),
                        lambda n: _node_ready(n) == "True" and not any(
                            t["key"].startswith("node.kubernetes.io/") for t in n["spec"].get("taints") or []),
                        60, cluster)  # fmt: skip
        assert back["spec"].get("taints") == pool_taints  # as before it was lost
    finally:
        if stopped:
            cluster.kubectl("taint", "node", lost, f"{OUT_OF_SERVICE}-", check=False)
            sunk("local", "node", "start", lost, env=cluster.env)
        cluster.kubectl("uncordon", spare, check=False)
        cluster.kubectl("delete", "statefulset", "-n", "default", "keeper", "--wait=false", check=False)
        cluster.kubectl("delete", "pod", "-n", "default", "short", "forever", "keeper-0", "--force", "--grace-period=0",
                        "--ignore-not-found", check=False)  # fmt: skip


def test_node_stop_names_the_nodes_when_the_name_is_wrong(cluster: Cluster) -> None:
    done = sunk("local", "node", "stop", "no-such-node", env=cluster.env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert 'nodes "no-such-node" not found' in done.stderr and "local-research-cpu-0" in done.stderr


def test_a_second_up_says_one_is_running(cluster: Cluster) -> None:
    again = sunk("local", "up", "acme-dev", "--no-wait", env=cluster.env)
    assert again.returncode == 1 and "already running" in again.stderr and "sunk local down" in again.stderr
    assert "research-controller-0" in sunk("local", "status", env=cluster.env).stdout


def test_a_settled_cluster_gets_no_more_topology_reconfigures(cluster: Cluster) -> None:
    """Once its nodes have registered, the operator leaves slurmctld alone: the topology
    ConfigMap's reconfigured-key stays put for 40 s (four resyncs). Each reconfigure re-execs
    slurmctld and every slurmd; a key that moved with them reconfigured every 10 s for ever, and a
    job pended with reason None past 300 s."""
    history: list[tuple[float, str]] = []

    def settled() -> bool:
        cm = json.loads(cluster.kubectl("get", "configmap", "-n", NS, "research-topology", "-o", "json").stdout)
        history.append(
            (time.monotonic(), (cm["metadata"].get("annotations") or {}).get(keys.TOPOLOGY_RECONFIGURED, ""))
        )
        last = history[-1][0]
        recent = {key for at, key in history if at >= last - 40}
        return last - history[0][0] >= 40 and len(recent) == 1 and "" not in recent

    wait_for("no topology reconfigure for 40 s", lambda: settled(), lambda quiet: quiet, 400, cluster)
    distinct = [key for i, (_, key) in enumerate(history) if i == 0 or key != history[i - 1][1]]
    assert len(distinct) <= 8, distinct  # a few right after the lost-node test's re-registrations, no stream


ALICE, RESEARCH = 20001, 20000


@contextlib.contextmanager
def host_on_bridge(marker: str, last_octet: int) -> Iterator[tuple[str, str]]:
    """The host on the cluster's bridge a site's directory server stands for (bridgehost.py)."""
    (state,) = [json.loads(p.read_text()) for p in Path(marker).glob("*/state.json")]
    with bridgehost.host_on_bridge(state["bridge"], state["subnet"], last_octet, "ldap") as host:
        yield host


def test_a_directory_user_submits_over_ssh_and_the_job_runs_as_that_user(
    cluster: Cluster, marker: str, tmp_path: Path
) -> None:
    """The stack with auth.ldap, applied with `sunk local apply`: a real slapd (the identity
    tests' directory, TLS only) on a host of the cluster's network; alice logs in over
    `ssh -p PORT alice@127.0.0.1` (the login NodePort) with the key the directory serves,
    submits a job, and it runs as her: the uid and gid in its output are the directory's, and
    sacct names her."""
    key = tmp_path / "alice"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f", str(key)], check=True)
    alice = DirectoryUser("alice", ALICE, RESEARCH, (key.with_suffix(".pub").read_text().strip(),))
    with (
        host_on_bridge(marker, 253) as (netns, address),
        LocalLdap.start(
            [alice], [DirectoryGroup("research", RESEARCH, ("alice",))], address=address, netns=netns
        ) as ldap,
    ):
        stack = yaml.safe_load((ROOT / "stacks" / "Pulumi.acme-dev.yaml").read_text())
        config = stack["config"]["sunk:cluster"]
        config["login"]["serviceType"] = "NodePort"  # a port on 127.0.0.1, as a LoadBalancer gets
        config["accounts"] = [{"name": "research", "users": ["alice"]}]  # associations are enforced
        config["auth"] = {
            "ldap": {
                "uris": [ldap.address_uri],  # StartTLS, the server verified against the CA
                "baseDn": ldap.base_dn,
                "bindDn": ldap.service_dn,
                "bindPasswordSecret": {"name": "research-ldap", "key": "password"},
                "caSecret": {"name": "research-ldap", "key": "ca.crt"},
            }
        }
        changed = tmp_path / "Pulumi.acme-dev.yaml"
        changed.write_text(yaml.safe_dump(stack, sort_keys=False))
        done = sunk("local", "apply", str(changed), env=cluster.env)
        assert done.returncode == 0, done.stderr
        # The bind Secret is made after the stack, as a new user does once told: the pods that
        # mount it wait in ContainerCreating with the kubelet's FailedMount Event, and `sunk local
        # status` names each, with the command that makes the Secret and the keys it must hold.
        told = wait_for(
            "sunk local status naming the missing bind Secret",
            lambda: sunk("local", "status", env=cluster.env).stdout,
            lambda out: 'secret "research-ldap" not found' in out,
            300,
            cluster,
        )
        line = next(x for x in told.splitlines() if 'secret "research-ldap" not found' in x)
        assert "FailedMount: MountVolume.SetUp failed for volume" in line, line
        command = line.split("sunk never makes it): ", 1)[1]
        assert command.startswith(f"kubectl create secret generic research-ldap -n {NS} "), command
        assert "--from-literal=ca.crt=<value>" in command and "--from-literal=password=<value>" in command, command
        waiter = line.split(":", 1)[0].removeprefix("pod ").split("/")[1]
        described = cluster.kubectl("describe", "pod", "-n", NS, waiter).stdout
        assert "FailedMount" in described and 'secret "research-ldap" not found' in described, described
        # The command as told, the values filled in (through files: the CA is several lines).
        (tmp_path / "bind").write_text(ldap.bind_password)
        (tmp_path / "ca").write_text(ldap.tls.ca)
        filled = command.replace("--from-literal=ca.crt=<value>", f"--from-file=ca.crt={tmp_path / 'ca'}").replace(
            "--from-literal=password=<value>", f"--from-file=password={tmp_path / 'bind'}"
        )
        made = subprocess.run(
            ["sh", "-c", filled.replace("kubectl ", f"kubectl --kubeconfig {cluster.kubeconfig} ")],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr

        def with_sssd() -> list[str]:
            """Pods of the cluster's Slurm roles still without a ready sssd (the operator replaces
            the slurmd pods one by one), each with what it waits for."""
            pods = json.loads(cluster.kubectl("get", "pods", "-n", NS, "-o", "json").stdout)["items"]
            roles = {"controller", "login", "slurmd"}
            left = []
            for pod in pods:
                if pod["metadata"]["labels"].get(keys.APP_COMPONENT) not in roles:
                    continue
                status = pod.get("status") or {}
                sssd = [c for c in status.get("initContainerStatuses") or [] if c["name"] == "sssd"]
                ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
                if pod["metadata"].get("deletionTimestamp") or not ready or not sssd or not sssd[0].get("ready"):
                    left.append(f"{pod['metadata']['name']}: {stuck_why(pod, None)}")
            return left

        wait_for("every Slurm pod with a ready sssd", with_sssd, lambda left: not left, 300, cluster)
        service = json.loads(cluster.kubectl("get", "-n", NS, "service/research-login", "-o", "json").stdout)
        port = service["spec"]["ports"][0]["nodePort"]
        ssh = ["ssh", "-F", "/dev/null", "-i", str(key), "-p", str(port), "-o", "BatchMode=yes",
               "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
               "-o", "ConnectTimeout=10", "alice@127.0.0.1"]  # fmt: skip
        submit = "sbatch --parsable -D /tmp -p batch -N1 -o /tmp/ldap-%j.out --wrap 'id -u; id -g; id -un'"
        job = wait_for(
            "alice's sbatch over ssh",
            lambda: subprocess.run([*ssh, submit], capture_output=True, text=True, timeout=60),
            lambda d: d.returncode == 0 and d.stdout.strip().isdigit(),
            180,
            cluster,
        ).stdout.strip()
        line = wait_for(
            f"job {job} in sacct",
            lambda: cluster.login(
                f"sacct -n -X -P -j {job} -o State,User,UID,GID,NodeList", check=False
            ).stdout.strip(),
            lambda text: text.startswith(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL")),
            180,
            cluster,
        )
        state, user, uid, gid, node = line.split("|")
        assert (state, user, uid, gid) == ("COMPLETED", "alice", str(ALICE), str(RESEARCH)), line
        out = cluster.kubectl("exec", "-n", NS, f"research-{node}", "-c", "slurmd", "--", "cat", f"/tmp/ldap-{job}.out")
        assert out.stdout.split() == [str(ALICE), str(RESEARCH), "alice"], out.stdout


def test_down_leaves_nothing_behind(cluster: Cluster, marker: str, before: dict[str, int]) -> None:
    up = footprint(marker)  # the cluster is up: the counts see it
    assert up["processes"] > 0 and up["netns"] > 0 and up["bridges"] == 1 and up["veths"] > 0 and up["rules"] == 8
    assert up["chains"] == 3  # NetworkPolicy's
    down = sunk("local", "down", env=cluster.env)
    assert down.returncode == 0, down.stderr
    # Killed processes may take a moment to be reaped; a leak stays.
    deadline = time.monotonic() + 15
    while (after := footprint(marker)) != before and time.monotonic() < deadline:
        time.sleep(1)
    assert after == before, f"left behind: {after} (before {before}); in its namespaces: {_in_leftover_namespaces()}"
    assert sunk("local", "status", env=cluster.env).returncode == 1
