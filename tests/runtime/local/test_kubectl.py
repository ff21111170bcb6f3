"""The local API server driven by the real kubectl (v1.32 on every machine of ours): discovery,
client-side apply of a whole render twice (the second a strategic merge patch, JSON merge patch
for the NodeSets), printing, scale, delete and bearer-token authentication. No node agent runs:
pods stay Pending, which is all these requests need."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp.web
import pytest
import yaml
from sunk.runtime.local import pki, rbac
from sunk.runtime.local.api import ApiServer, tls_context
from sunk.runtime.local.cli import apply
from sunk.runtime.local.cluster import State
from sunk.runtime.local.controllers import Controllers
from sunk.runtime.local.inventory import node
from sunk.runtime.local.store import Store

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "manifests" / "acme-dev"


class Server:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.store = Store()
        self.token = pki.token()
        self.tokens = {self.token: rbac.ADMIN}
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def start(self) -> Server:
        threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True).start()
        assert self._ready.wait(30)
        return self

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        ca, cert, key = pki.make_certificates(self.folder / "pki", ["127.0.0.1"], ["localhost"])
        for name in ("default", "kube-system"):
            self.store.create(self.store.resource("v1/namespaces"), None, {"metadata": {"name": name}})
        self.store.create(self.store.resource("v1/nodes"), None, node("n1", {"cpu": "64", "memory": "256Gi"}))
        Controllers(self.store).start()
        runner = aiohttp.web.AppRunner(ApiServer(self.store, self.tokens).app, access_log=None)
        await runner.setup()
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        await aiohttp.web.TCPSite(runner, "127.0.0.1", self.port, ssl_context=tls_context(cert, key)).start()
        (self.folder / "kubeconfig").write_text(pki.kubeconfig(f"https://127.0.0.1:{self.port}", ca, self.token))
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)

    @property
    def state(self) -> State:
        return State(0, self.port, "", "", str(self.folder / "kubeconfig"), "")

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.folder / "kubeconfig"), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if check:
            assert done.returncode == 0, done.stderr
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if shutil.which("kubectl") is None:
        pytest.fail("kubectl is not on the PATH (it is in every machine image of ours)")
    running = Server(tmp_path_factory.mktemp("api")).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def applied(server: Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    render = tmp_path_factory.mktemp("render")
    for path in GOLDEN.rglob("*.yaml"):  # crds/ included
        (render / path.relative_to(GOLDEN)).parent.mkdir(exist_ok=True)
        shutil.copy(path, render / path.relative_to(GOLDEN))
    out = apply(server.state, render)
    assert "statefulset.apps/research-controller created" in out
    assert "nodeset.slurm.sunk.dev/research-cpu created" in out
    return render


def test_a_render_applies_twice_and_the_second_time_changes_nothing(server: Server, applied: Path) -> None:
    """kubectl reports every object unchanged but the PodDisruptionBudget: its selector's patch
    strategy is `replace`, so kubectl sends it again every time; the server writes nothing."""
    before = server.json("pdb", "-A")["items"][0]["metadata"]["resourceVersion"]
    second = apply(server.state, applied)
    changed = [line for line in second.splitlines() if not line.endswith(" unchanged")]
    assert changed == ["poddisruptionbudget.policy/research-controller configured"]
    assert server.json("pdb", "-A")["items"][0]["metadata"]["resourceVersion"] == before
    names = {i["metadata"]["name"] for i in server.json("statefulsets", "-A")["items"]}
    assert names == {"research-controller", "research-mariadb"}


def test_a_changed_render_applies_as_patches(server: Server, applied: Path) -> None:
    """The second apply of a changed object is client-side apply's patch: strategic merge for a
    Deployment (one container's env changes, the rest stays) and a ConfigMap, JSON merge for a
    NodeSet (a custom resource)."""
    dep_file = next(applied.glob("07-deployment-*-research-restapi.yaml"))
    dep = yaml.safe_load(dep_file.read_text())
    container = dep["spec"]["template"]["spec"]["containers"][0]
    container.setdefault("env", []).append({"name": "SUNK_LOCAL_TEST", "value": "1"})
    dep_file.write_text(yaml.safe_dump(dep))
    ns_file = next(applied.glob("09-nodeset-*-research-cpu.yaml"))
    nodeset = yaml.safe_load(ns_file.read_text())
    nodeset["spec"]["replicas"] = 3
    ns_file.write_text(yaml.safe_dump(nodeset))
    out = server.kubectl("apply", "-f", str(dep_file), "-f", str(ns_file), "-v=6").stderr
    assert "PATCH" in out and "deployment.apps/research-restapi configured" in server.kubectl(
        "apply", "-f", str(dep_file)
    ).stdout.replace("unchanged", "configured")
    live = server.json("deployment", "-n", "acme-research", "research-restapi")
    env = live["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "SUNK_LOCAL_TEST", "value": "1"} in env
    assert live["spec"]["template"]["spec"]["containers"][0]["image"] == container["image"]
    assert live["metadata"]["generation"] == 2
    assert server.json("nodeset", "-n", "acme-research", "research-cpu")["spec"]["replicas"] == 3


def test_discovery_printing_scale_and_delete(server: Server, applied: Path) -> None:
    resources = server.kubectl("api-resources").stdout
    assert "nodesets" in resources and "slurm.sunk.dev/v1alpha1" in resources
    table = server.kubectl("get", "nodesets", "-n", "acme-research").stdout
    assert table.split("\n")[0].split() == ["NAME", "DESIRED", "READY", "IDLE", "ALLOCATED", "DRAINED", "AGE"]
    assert "research-controller-0" in server.kubectl("get", "pods", "-n", "acme-research").stdout
    server.kubectl("scale", "statefulset", "-n", "acme-research", "research-mariadb", "--replicas=0")
    assert server.json("statefulset", "-n", "acme-research", "research-mariadb")["spec"]["replicas"] == 0
    server.kubectl("delete", "configmap", "-n", "acme-research", "research-login")
    gone = server.kubectl("get", "configmap", "-n", "acme-research", "research-login", check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_a_request_without_a_known_token_is_refused(server: Server) -> None:
    done = server.kubectl("--token", "not-a-token", "get", "pods", check=False)
    assert done.returncode != 0 and "Unauthorized" in done.stderr
    # a token issued later (a pod's ServiceAccount token) is known from then on: authenticated,
    # then authorized by RBAC like any other (test_rbac_refuses_what_no_binding_allows)
    server.tokens["issued-later"] = "system:serviceaccount:default:sa"
    refused = server.kubectl("--token", "issued-later", "get", "pods", check=False)
    assert refused.returncode != 0 and "Unauthorized" not in refused.stderr and "forbidden" in refused.stderr


def test_rbac_refuses_what_no_binding_allows(server: Server, tmp_path: Path) -> None:
    """A ServiceAccount may do what a Role or ClusterRole bound to it allows, in the binding's
    namespace; anything else is a 403 naming the user, verb, resource and scope, as kubectl
    prints a real API server's."""
    server.tokens["reader"] = "system:serviceaccount:default:reader"
    as_reader = ("--token", "reader")
    refused = server.kubectl(*as_reader, "get", "pods", "-n", "default", check=False)
    assert refused.returncode == 1
    assert (
        'pods is forbidden: User "system:serviceaccount:default:reader" cannot list resource "pods" in API group "" '
        'in the namespace "default"'
    ) in refused.stderr
    rbac_objects = tmp_path / "rbac.yaml"
    rbac_objects.write_text(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: read-pods, namespace: default}\n"
        "rules: [{apiGroups: [''], resources: [pods, pods/log], verbs: [get, list, watch]}]\n---\n"
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: reader, namespace: default}\n"
        "roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: read-pods}\n"
        "subjects: [{kind: ServiceAccount, name: reader, namespace: default}]\n"
    )
    server.kubectl("apply", "-f", str(rbac_objects))
    assert server.kubectl(*as_reader, "get", "pods", "-n", "default").returncode == 0
    elsewhere = server.kubectl(*as_reader, "get", "pods", "-n", "kube-system", check=False)
    assert 'cannot list resource "pods" in API group "" in the namespace "kube-system"' in elsewhere.stderr
    delete = server.kubectl(*as_reader, "delete", "pod", "-n", "default", "nothing", check=False)
    assert 'cannot delete resource "pods" in API group ""' in delete.stderr
    nodes = server.kubectl(*as_reader, "get", "nodes", check=False)
    assert 'cannot list resource "nodes" in API group "" at the cluster scope' in nodes.stderr
    scale = server.kubectl(*as_reader, "scale", "nodeset", "-n", "default", "x", "--replicas=1", check=False)
    assert "forbidden" in scale.stderr and "slurm.sunk.dev" in scale.stderr


def test_the_in_cluster_python_client_is_served(server: Server, tmp_path: Path) -> None:
    """What the operator, syncer and scheduler do in their pods: load_incluster_config's token
    file, CA and KUBERNETES_SERVICE_* (it sends the scheme as `bearer`, lower case)."""
    from kubernetes import client
    from kubernetes.config.incluster_config import InClusterConfigLoader

    (tmp_path / "token").write_text(server.token)
    (tmp_path / "ca.crt").write_bytes((server.folder / "pki" / "ca.crt").read_bytes())
    environ = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(server.port)}
    configuration = client.Configuration()
    token, ca = str(tmp_path / "token"), str(tmp_path / "ca.crt")
    loader = InClusterConfigLoader(token, ca, environ=environ)  # type: ignore[no-untyped-call]
    loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    api = client.CoreV1Api(client.ApiClient(configuration))
    assert "default" in [n.metadata.name for n in api.list_namespace().items if n.metadata is not None]


def test_kubectl_create_verbs_are_refused_with_the_way_round_that_works(server: Server) -> None:
    """kubectl sends built-in types as protobuf, which the local API server doesn't read: it answers
    415 (as kube-apiserver answers a media type it doesn't serve) naming the way round, and that way
    (`--dry-run=client -o yaml | kubectl apply -f -`, what `sunk local up` tells a user to run for a
    Secret the stack names) works for each kind a new user creates first. The real control plane
    (issue 37) reads protobuf itself."""
    refused = server.kubectl("create", "namespace", "created", check=False)
    assert refused.returncode != 0
    assert (
        "UnsupportedMediaType" in refused.stderr and "--dry-run=client -o yaml | kubectl apply -f -" in refused.stderr
    )
    ns = "created"
    image = "--image=ghcr.io/sunk-dev/sunk-runtime:0.1.0"
    for create in (
        ["namespace", ns],
        ["configmap", "settings", "-n", ns, "--from-literal=mode=fast"],
        ["secret", "generic", "bind", "-n", ns, "--from-literal=password=s3cret"],
        ["deployment", "web", "-n", ns, image],
        ["job", "once", "-n", ns, image],
        ["serviceaccount", "robot", "-n", ns],
    ):
        manifest = server.kubectl("create", *create, "--dry-run=client", "-o", "yaml").stdout
        path = server.folder / f"{create[0]}.yaml"
        path.write_text(manifest)
        server.kubectl("apply", "-f", str(path))
    assert server.json("configmap", "settings", "-n", ns)["data"] == {"mode": "fast"}
    assert base64.b64decode(server.json("secret", "bind", "-n", ns)["data"]["password"]) == b"s3cret"
    assert server.json("deployment", "web", "-n", ns)["spec"]["replicas"] == 1
    assert server.json("job", "once", "-n", ns)["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert server.json("serviceaccount", "robot", "-n", ns)["metadata"]["namespace"] == ns
