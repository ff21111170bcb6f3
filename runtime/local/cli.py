"""`sunk local up [STACK] | apply [STACK] | status | kubeconfig | node stop|start NAME | down`: one
local cluster per project folder.

`up` renders the stack the way `sunk render` does (the same command, in a child process: the
render runs the Pulumi program, which the runtime layer never imports), starts the cluster's
process (cluster.py) in the background, applies the render with the real kubectl (the
CustomResourceDefinitions first, so their kinds are known when the rest goes), waits until every
pod is Ready (a slurmctld backup: running beside its Ready primary), every Job complete and every registered Slurm node in slurmctld's topology (a
multi-node job then runs at once), and prints the pods. `down` stops the process, which stops
every pod and removes the bridge, its veths and firewall rules, then deletes the cluster's folder.
`node stop NAME` stops one Node's agent as if the Node lost power (its heartbeats and containers
stop; kube-controller-manager then marks it Unknown, taints it and evicts); with
`--keep-containers` only the agent stops, as a kubelet that crashed: the containers run on, and
what the API did to their pods meanwhile reaches them when `node start NAME` brings it back.

The cluster's folder is ~/.cache/sunk/local/<hash of the project folder> ($SUNK_LOCAL_DIR instead of
~/.cache/sunk/local when set): the same project folder always finds its cluster, two projects get two.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from sunk import keys
from sunk.hostlist import expand

from . import inventory, kubebuild, net, provisioner, stuck
from .cluster import NODES_FILE, State, release_host_settings
from .container import ConfigError
from .controlplane import Settings
from .offcluster import override_render

STOP_TIMEOUT = 120.0
"""Seconds `down` gives the cluster's process to stop every pod (their grace periods) before SIGKILL."""


def project_dir(start: Path | None = None) -> Path:
    """The folder of the Pulumi.yaml around `start` (the current folder), else `start` itself."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "Pulumi.yaml").is_file():
            return folder
    return here


BASE_ENV = "SUNK_LOCAL_DIR"
"""Where the clusters' folders go instead of ~/.cache/sunk/local (a test's own folder)."""


def workdir(project: Path) -> Path:
    base = Path(os.environ.get(BASE_ENV) or Path.home() / ".cache" / "sunk" / "local")
    return base / hashlib.sha256(str(project).encode()).hexdigest()[:12]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    cmdline = Path(f"/proc/{pid}/cmdline")
    return cmdline.exists() and b"sunk.runtime.local" in cmdline.read_bytes()


def running(folder: Path) -> State | None:
    state = State.read(folder)
    return state if state is not None and _alive(state.pid) else None


def _kubectl(state: State, *args: str, check: bool = True, quiet: bool = False) -> subprocess.CompletedProcess[str]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        raise SystemExit("sunk local: kubectl is not on the PATH (the local cluster is driven with the real kubectl)")
    done = subprocess.run(
        [kubectl, "--kubeconfig", state.kubeconfig, *args], capture_output=True, text=True, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
    return done


START_TIMEOUT = 240.0
"""Seconds for the cluster's process to serve: Kubernetes' API server installs its bootstrap RBAC and
priority levels into an empty etcd first (tens of seconds on 2 loaded cores)."""


def _control(state: State, path: str, body: Any) -> dict[str, Any]:
    """POST to the cluster process's own socket (cluster.control_app); its answer, or RuntimeError
    with its message."""
    with httpx.Client(transport=httpx.HTTPTransport(uds=state.control), timeout=120) as client:
        answer = client.post(f"http://local{path}", json=body)
    said: dict[str, Any] = answer.json()
    if answer.status_code != 200:
        raise RuntimeError(str(said.get("message")))
    return said


def _start(folder: Path, project: Path, timeout: float = START_TIMEOUT, settings: Settings | None = None) -> State:
    folder.mkdir(parents=True, exist_ok=True)
    log = (folder / "cluster.log").open("ab")
    settings = settings or Settings()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sunk.runtime.local",
            "serve",
            "--workdir",
            str(folder),
            "--project",
            str(project),
            "--node-monitor-grace-period",
            str(settings.node_monitor_grace),
            "--default-toleration-seconds",
            str(settings.unreachable_toleration),
            "--node-startup-grace-period",
            str(settings.node_startup_grace),
            "--node-eviction-rate",
            str(settings.eviction_rate),
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # it outlives this command
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = State.read(folder)
        if state is not None and state.pid == proc.pid:
            return state
        if proc.poll() is not None:
            tail = (folder / "cluster.log").read_text(errors="replace").splitlines()[-15:]
            raise SystemExit("sunk local: the cluster's process failed to start:\n  " + "\n  ".join(tail))
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"sunk local: the cluster's process did not start within {timeout:.0f} s")


def _built_control_plane() -> Path:
    """The control plane's binaries, built first when this machine has none of these pins (cold:
    minutes to tens of minutes and about 1 GB of Go modules; `make bootstrap` does it beforehand)."""
    try:
        return kubebuild.locate()
    except kubebuild.BuildError:
        print("sunk local up: building the control plane from the pinned Go modules (once per machine)", flush=True)
    try:
        built = kubebuild.build(log=lambda line: print(line, file=sys.stderr, flush=True))
    except kubebuild.BuildError as err:
        raise SystemExit(f"sunk local up: the control plane can't be built: {err}") from None
    print(f"control plane built in {built.seconds:.0f} s: {built.bin}")
    return built.bin


def render(stack: str, out: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sunk", "render", stack, "--out", str(out), "--show-secrets"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"sunk local: rendering {stack} failed:\n{done.stderr.strip() or done.stdout.strip()}")


def outside_namespaces(objects: list[dict[str, Any]]) -> list[str]:
    """Namespaces the render places objects in without creating them: on a real cluster they are
    there already (the teams' opted-in inference namespaces, where the scheduler gets its Role)."""
    made = {(o.get("metadata") or {}).get("name") for o in objects if o.get("kind") == "Namespace"}
    named = {(o.get("metadata") or {}).get("namespace") for o in objects}
    return sorted(n for n in named if isinstance(n, str) and n and n not in made)


def apply(state: State, rendered: Path) -> str:
    crds = sorted(str(p) for p in rendered.glob("crds/*.yaml"))  # the render's CRD folder, first
    if crds:
        _kubectl(state, "apply", *(arg for path in crds for arg in ("-f", path)))
    outside = outside_namespaces(inventory.read_render(rendered))
    if outside:
        made = rendered.parent / f"{rendered.name}-namespaces.yaml"
        # YAML documents: kubectl reads a file that starts with "{" as one JSON object.
        made.write_text(
            "".join(f"---\napiVersion: v1\nkind: Namespace\nmetadata: {{name: {json.dumps(n)}}}\n" for n in outside)
        )
        _kubectl(state, "apply", "-f", str(made))
    # A claim waits for the provisioner its class names.
    classes = provisioner.storage_classes(provisioner.claim_classes(inventory.read_render(rendered)))
    made = rendered.parent / f"{rendered.name}-storageclasses.json"
    made.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": classes}))
    _kubectl(state, "apply", "-f", str(made))
    # The keys are made in the cluster by the render's key generator Job, as on any cluster.
    return _kubectl(state, "apply", "-f", str(rendered)).stdout


def _pod_ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in pod.get("status", {}).get("conditions") or []
    )


def standing_by(pod: dict[str, Any], pods: list[dict[str, Any]]) -> bool:
    """A slurmctld backup: a controller pod that is not Ready (with backups the readiness probe
    passes only on the primary) but runs every container, beside a Ready pod of its StatefulSet."""
    meta = pod["metadata"]
    if (meta.get("labels") or {}).get(keys.APP_COMPONENT) != "controller" or _pod_ready(pod):
        return False
    statuses = pod.get("status", {}).get("containerStatuses") or []
    if not statuses or not all("running" in (c.get("state") or {}) for c in statuses):
        return False
    owners = {o.get("uid") for o in meta.get("ownerReferences") or []}
    return any(
        _pod_ready(p) and owners & {o.get("uid") for o in p["metadata"].get("ownerReferences") or []} for p in pods
    )


def _unready(state: State) -> list[str]:
    pods = json.loads(_kubectl(state, "get", "pods", "-A", "-o", "json").stdout)["items"]
    jobs = json.loads(_kubectl(state, "get", "jobs", "-A", "-o", "json").stdout)["items"]
    warnings = stuck.latest_warnings(json.loads(_kubectl(state, "get", "events", "-A", "-o", "json").stdout)["items"])
    statefulsets = json.loads(_kubectl(state, "get", "statefulsets", "-A", "-o", "json").stdout)["items"]
    made = stuck.made_in_cluster(jobs, statefulsets)
    waiting = []
    for pod in pods:
        phase = pod.get("status", {}).get("phase")
        owners = [o.get("kind") for o in pod["metadata"].get("ownerReferences") or []]
        if "Job" in owners and phase == "Succeeded":
            continue
        if not _pod_ready(pod) and not standing_by(pod, pods):
            why = stuck.why(pod, warnings.get(pod["metadata"].get("uid", "")), made)
            waiting.append(f"pod {pod['metadata']['namespace']}/{pod['metadata']['name']}: {why}")
    for job in jobs:
        done = any(
            c.get("type") == "Complete" and c.get("status") == "True"
            for c in job.get("status", {}).get("conditions") or []
        )
        if not done:
            waiting.append(f"job {job['metadata']['namespace']}/{job['metadata']['name']}: not complete")
    return waiting


def _tell_once(waiting: list[str], told: set[str]) -> None:
    """Say at once, and once, each wait only the user can end (a Secret, ConfigMap or claim the
    stack names and sunk doesn't make): `up` keeps waiting, so it can be created meanwhile."""
    for line in waiting:
        if "kubectl " in line and line not in told:
            told.add(line)
            print(f"waiting on you: {line}", file=sys.stderr, flush=True)


def _unbound(state: State) -> list[str]:
    """Slurm nodes that a controller's slurmctld runs with a topology/tree but has bound into no
    switch yet: until the operator's reconfigure, slurmctld refuses any multi-node job that needs
    one of them (topology/block leaves nodes out of blocks on purpose, so only a tree is checked)."""
    pods = json.loads(
        _kubectl(state, "get", "pods", "-A", "-l", f"{keys.APP_COMPONENT}=controller", "-o", "json").stdout
    )["items"]
    waiting = []
    for pod in pods:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        done = _kubectl(
            state, "exec", "-n", ns, name, "-c", "slurmctld", "--", "sh", "-c",
            "scontrol show topology; echo ==; sinfo -h -N -o %N",
            check=False, quiet=True,
        )  # fmt: skip
        topology, _, registered = done.stdout.partition("\n==\n")
        if done.returncode != 0 or "SwitchName=" not in topology:
            continue  # no tree (or slurmctld not answering, which its readiness probe reports)
        bound = {n for word in topology.split() if word.startswith("Nodes=") for n in expand(word[6:])}
        if left := sorted(set(registered.split()) - bound):
            waiting.append(
                f"slurmctld {ns}/{name}: nodes in no switch yet (the operator reconfigures): {' '.join(left)}"
            )
    return waiting


def node_inventory(rendered: Path, nodes_file: Path | None) -> list[dict[str, Any]]:
    """The cluster's Nodes: the file's, else derived from the render (inventory.py)."""
    try:
        if nodes_file is not None:
            return inventory.from_file(nodes_file)
        return inventory.derive(inventory.read_render(rendered))
    except ConfigError as err:
        raise SystemExit(f"sunk local: {err}") from None


def cmd_up(args: argparse.Namespace) -> int:
    project = project_dir()
    folder = workdir(project)
    state = running(folder)
    if state is not None:
        print(
            f"sunk local: a local cluster is already running for {project} (pid {state.pid}, "
            f"{state.url}); `sunk local down` stops it",
            file=sys.stderr,
        )
        return 1
    started = time.monotonic()
    rendered = folder / "render"
    shutil.rmtree(rendered, ignore_errors=True)
    render(args.stack, rendered)
    for name in override_render(rendered):
        print(f"off-cluster override (runtime/local/offcluster.py): {name}")
    nodes = node_inventory(rendered, args.nodes)
    (folder / NODES_FILE).write_text(json.dumps(nodes))
    if args.nodes:  # `sunk local apply` then leaves the Nodes as the file says
        (folder / NODES_FILE).with_suffix(".from-file").write_text(str(args.nodes))
    print(f"nodes ({'from ' + str(args.nodes) if args.nodes else 'derived from the render'}):")
    print("  " + "\n  ".join(inventory.summary(nodes)))
    seconds = getattr(args, "default_toleration_seconds", Settings.unreachable_toleration)
    settings = Settings(
        getattr(args, "node_monitor_grace_period", Settings.node_monitor_grace),
        not_ready_toleration=seconds,
        unreachable_toleration=seconds,
        node_startup_grace=getattr(args, "node_startup_grace_period", Settings.node_startup_grace),
        eviction_rate=getattr(args, "node_eviction_rate", Settings.eviction_rate),
    )
    _built_control_plane()
    state = _start(folder, project, settings=settings)
    print(f"local cluster up: {state.url} (pods on {state.subnet}, bridge {state.bridge})")
    print(apply(state, rendered).rstrip())
    if args.no_wait:
        return 0
    deadline = time.monotonic() + args.timeout
    waiting = _unready(state) or _unbound(state)
    told: set[str] = set()
    while waiting and time.monotonic() < deadline:
        _tell_once(waiting, told)
        time.sleep(2)
        waiting = _unready(state) or _unbound(state)
    print(_kubectl(state, "get", "pods", "-A", "-o", "wide").stdout.rstrip())
    print(f"KUBECONFIG={state.kubeconfig}")
    if waiting:
        print(f"not ready after {args.timeout:.0f} s:\n  " + "\n  ".join(waiting), file=sys.stderr)
        return 1
    print(f"every pod Ready, every Job complete, every Slurm node usable in {time.monotonic() - started:.0f} s")
    return 0


def _identities(rendered: Path) -> set[tuple[str, str, str]]:
    """(apiVersion/kind, namespace, name) of every object of a render."""
    return {
        (
            f"{o.get('apiVersion')}/{o.get('kind')}",
            (o.get("metadata") or {}).get("namespace", ""),
            o["metadata"]["name"],
        )
        for o in inventory.read_render(rendered)
        if (o.get("metadata") or {}).get("name")
    }


def cmd_apply(args: argparse.Namespace) -> int:
    """Re-render STACK and apply the difference to this project's running cluster, as `pulumi up`
    would: changed objects are patched (kubectl's client-side apply), new ones created, those the
    render no longer has deleted, and Nodes a new NodeSet needs added (when the inventory was
    derived, not read from a file)."""
    project = project_dir()
    folder = workdir(project)
    state = running(folder)
    if state is None:
        print(f"sunk local: no local cluster for {project}; `sunk local up` starts one", file=sys.stderr)
        return 1
    current, following = folder / "render", folder / "render.next"
    shutil.rmtree(following, ignore_errors=True)
    render(args.stack, following)
    override_render(following)
    if not (folder / NODES_FILE).with_suffix(".from-file").exists():
        have = {
            n["metadata"]["name"] for n in json.loads(_kubectl(state, "get", "nodes", "-o", "json").stdout)["items"]
        }
        new = [n for n in inventory.derive(inventory.read_render(following)) if n["metadata"]["name"] not in have]
        if new:
            # each registers as its own kubelet would, with its own certificate
            print(_control(state, "/nodes", new)["message"])
    out = apply(state, following)
    changed = [line for line in out.splitlines() if line and not line.endswith(" unchanged")]
    gone = sorted(_identities(current) - _identities(following)) if current.is_dir() else []
    for api_kind, namespace, name in gone:
        kind = api_kind.rsplit("/", 1)[1]
        group = api_kind.rsplit("/", 2)[0] if api_kind.count("/") == 2 else ""
        target = f"{kind.lower()}.{group.split('/')[0]}" if group else kind.lower()
        scope = ["-n", namespace] if namespace else []
        done = _kubectl(state, "delete", target, name, *scope, "--ignore-not-found", "--wait=false", check=False)
        changed.append(done.stdout.strip() or f"{target}/{name}: {done.stderr.strip()}")
    shutil.rmtree(current, ignore_errors=True)
    following.rename(current)
    print("\n".join(changed) if changed else "no change")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    project = project_dir()
    state = running(workdir(project))
    if state is None:
        print(f"no local cluster for {project}")
        return 1
    print(f"local cluster for {project}: pid {state.pid}, {state.url}, pods on {state.subnet}")
    print(_kubectl(state, "get", "pods", "-A", "-o", "wide").stdout.rstrip())
    waiting = _unready(state)
    if waiting:
        print("waiting:\n  " + "\n  ".join(waiting))
    return 0


def cmd_node(args: argparse.Namespace) -> int:
    """`sunk local node stop|start NAME [--keep-containers]`: one Node's agent stops (the Node as if it
    lost power, or with --keep-containers only its kubelet) or starts again."""
    state = running(workdir(project_dir()))
    if state is None:
        print("no local cluster for this project; `sunk local up` starts one", file=sys.stderr)
        return 1
    verb = "stop-keep-containers" if args.action == "stop" and getattr(args, "keep_containers", False) else args.action
    try:
        print(_control(state, f"/nodes/{args.name}/{verb}", {})["message"])
    except RuntimeError as err:
        listed = _kubectl(state, "get", "nodes", "-o", "name", check=False).stdout.split()
        names = ", ".join(n.removeprefix("node/") for n in listed)
        print(f"sunk local node {args.action}: {err} (the Nodes: {names})", file=sys.stderr)
        return 1
    return 0


def cmd_kubeconfig(args: argparse.Namespace) -> int:
    state = running(workdir(project_dir()))
    if state is None:
        print("no local cluster for this project; `sunk local up` starts one", file=sys.stderr)
        return 1
    print(state.kubeconfig)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    project = project_dir()
    folder = workdir(project)
    state = State.read(folder)
    if state is not None and _alive(state.pid):
        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while _alive(state.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _alive(state.pid):
            os.kill(state.pid, signal.SIGKILL)
    leftovers(folder)
    shutil.rmtree(folder, ignore_errors=True)
    print(f"local cluster for {project}: down")
    return 0


def leftovers(folder: Path) -> None:
    """What a killed cluster process could not remove: its pods' processes (by the cluster's
    folder in their command lines), the holders of their namespaces (by the PIDs it wrote), its
    veths, bridge and firewall rules."""
    marker = str(folder).encode()
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
    for note in folder.glob("pods/*/holder.pid"):
        with contextlib.suppress(OSError, ValueError):
            pid = int(note.read_text())
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0infinity"):
                os.kill(pid, signal.SIGKILL)
    stale = net.Network(net.bridge_name(str(folder)), ipaddress.IPv4Network("10.233.0.0/24"))
    net.remove_rules(stale)
    net.run([["ip", "link", "del", veth] for veth in net.veths(stale)], check=False)
    if stale.bridge in net.bridges():
        net.run(net.bridge_down(stale), check=False)
    release_host_settings(stale.bridge)
