"""Our node agent as the kubelet of the real control plane (runtime/local/nodeagents.py): it registers a
Node as that Node (its own certificate, held by the Node authorizer and NodeRestriction), renews its
Lease, and runs a pod from our slurmctld image that the real scheduler bound to it, with the
ServiceAccount token the real admission asked for, until the pod is Ready; projected tokens are
bound to the pod with their audience and lifetime and renewed before they expire; a deletion ends
with the agent's final delete. On demand (marker `controlplane`, `make test-controlplane`)."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sunk.runtime.local import inventory
from sunk.runtime.local.controlplane import KUBERNETES_SERVICE_IP, ControlPlane
from sunk.runtime.local.nodeagents import NodeAgents, close_network, open_network

from sunk.images import ROLES, tag_for
from tests.support import jwts
from tests.support.controlplane import Loop, get, kubectl, wait_for

pytestmark = pytest.mark.controlplane

NODE = "cp-node-1"


class Clock:
    """The clock token rotation reads: the real one, moved on by the test."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.time() + self.ahead


CLOCK = Clock()


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ControlPlane, Path]]:
    folder = tmp_path_factory.mktemp("kubelet")
    network = open_network(folder / "agent")
    try:
        with ControlPlane.for_pods(folder / "plane", network.gateway) as cp:
            loop = Loop()
            # A short sync period: the rotation test waits for one after moving the clock on.
            agents = NodeAgents(cp, folder / "agent", network, clock=CLOCK, sync_seconds=2)
            try:
                # node-role.kubernetes.io is a label only an administrator may set (NodeRestriction).
                node = inventory.node(NODE, {"cpu": "4", "memory": "8Gi"}, {"node-role.kubernetes.io/slurm": ""})
                loop.run(agents.start([node]))
                yield cp, folder
            finally:
                loop.run(agents.close())
                loop.close()
    finally:
        close_network(network)


def test_the_agent_registers_its_node_and_renews_the_lease(plane: tuple[ControlPlane, Path]) -> None:
    cp, _ = plane
    node = get(cp, "node", NODE)
    assert node["metadata"]["labels"]["node-role.kubernetes.io/slurm"] == ""  # set by the administrator
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == NODE
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


def as_node(cp: ControlPlane, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """kubectl with the certificate the agent presents for NODE (nothing else is asked)."""
    cert, key = cp.node_credentials(NODE)
    ca = cp.folder / "pki" / "ca.crt"
    argv = ["kubectl", f"--server={cp.server}", f"--certificate-authority={ca}"]
    argv += [f"--client-certificate={cert}", f"--client-key={key}", *args]
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120, check=False)


def test_the_node_s_credentials_are_held_by_the_node_authorizer_and_node_restriction(
    plane: tuple[ControlPlane, Path],
) -> None:
    cp, _ = plane
    who = json.loads(as_node(cp, "auth", "whoami", "-o", "json").stdout)["status"]["userInfo"]
    assert who["username"] == f"system:node:{NODE}" and "system:nodes" in who["groups"]
    kubectl(cp, "create", "secret", "generic", "unnamed", "--from-literal=k=v")
    other = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "someone-else"}}
    kubectl(cp, "apply", "-f", "-", stdin=json.dumps(other))
    # The Node authorizer: no Secret its pods don't name, no list of every pod or of other Nodes.
    refused = as_node(cp, "get", "secret", "unnamed")
    assert refused.returncode != 0 and "Forbidden" in refused.stderr
    assert "can only list/watch pods with spec.nodeName" in as_node(cp, "get", "pods", "-A").stderr
    assert as_node(cp, "get", "nodes", "-o", "name").returncode != 0
    # NodeRestriction: no other Node's object, no label outside the kubelet's own.
    # (kubectl would read the Node first, which the Node authorizer already refuses: a bare PATCH.)
    cert, key = cp.node_credentials(NODE)
    context = ssl.create_default_context(cafile=str(cp.folder / "pki" / "ca.crt"))
    context.load_cert_chain(str(cert), str(key))
    with httpx.Client(base_url=cp.server, verify=context) as client:
        label = client.patch(
            "/api/v1/nodes/someone-else",
            content=json.dumps({"metadata": {"labels": {"x": "y"}}}),
            headers={"Content-Type": "application/merge-patch+json"},
        )
    assert label.status_code == 403 and 'is not allowed to modify node "someone-else"' in label.json()["message"]
    relabel = as_node(cp, "label", "node", NODE, "node-role.kubernetes.io/other=")
    assert "is not allowed to modify labels: node-role.kubernetes.io/other" in relabel.stderr
    # A token for an account none of its pods runs as (a Node's TokenRequests are for its pods').
    unbound = as_node(cp, "create", "token", "default")
    assert unbound.returncode != 0 and "forbidden" in unbound.stderr.lower()


def _tokened(name: str) -> dict[str, Any]:
    """A pod whose container prints, every second, its projected token for audience `slurm` (ten
    minutes, the shortest a TokenRequest may ask) and a key of a Secret and a ConfigMap it mounts."""
    pod = _pod(name)
    pod["spec"]["volumes"] = [
        {
            "name": "slurm-token",
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"audience": "slurm", "expirationSeconds": 600, "path": "token"}},
                    {"secret": {"name": "mounted", "items": [{"key": "password", "path": "password"}]}},
                    {"configMap": {"name": "settings"}},
                ]
            },
        }
    ]
    container = pod["spec"]["containers"][0]
    container["volumeMounts"] = [{"name": "slurm-token", "mountPath": "/run/slurm", "readOnly": True}]
    show = "echo $(cat /run/slurm/password) $(cat /run/slurm/mode) $(cat /run/slurm/token)"
    loop = f"while true; do {show}; sleep 1; done"
    container["command"] = ["sh", "-c", loop]
    return pod


def test_projected_tokens_are_bound_to_the_pod_with_their_audience_and_renewed(
    plane: tuple[ControlPlane, Path],
) -> None:
    cp, _ = plane
    wait_for("default ServiceAccount", lambda: "default" in kubectl(cp, "get", "serviceaccounts", "-o", "name"), 60)
    kubectl(cp, "create", "secret", "generic", "mounted", "--from-literal=password=hunter2")
    kubectl(cp, "create", "configmap", "settings", "--from-literal=mode=fast")
    kubectl(cp, "apply", "-f", "-", stdin=json.dumps(_tokened("tokened")))

    def printed() -> list[str] | None:
        done = subprocess.run(
            ["kubectl", f"--kubeconfig={cp.kubeconfig}", "logs", "tokened", "--tail=1"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        words = done.stdout.split()
        return words if done.returncode == 0 and len(words) == 3 else None

    password, mode, first = wait_for("the pod's token", printed)
    # Read as the pod's Node through the Node authorizer's graph (its pod names them).
    assert (password, mode) == ("hunter2", "fast")
    pod = get(cp, "pod", "tokened")
    claims = jwts.claims(first)
    assert claims["aud"] == ["slurm"] and claims["exp"] - claims["iat"] == 600
    bound = claims["kubernetes.io"]
    assert bound["pod"] == {"name": "tokened", "uid": pod["metadata"]["uid"]}
    assert bound["node"]["name"] == NODE and bound["serviceaccount"]["name"] == "default"
    assert jwts.verifies(first, cp.folder / "pki" / "sa.pub")
    # 80 % of its life on, the next sync asks for a new token, which the container then reads.
    CLOCK.ahead = 0.8 * 600

    def renewed_token() -> str | None:
        words = printed()
        return words[2] if words and words[2] != first else None

    try:
        renewed = wait_for("a renewed token", renewed_token, 60)
    finally:
        CLOCK.ahead = 0
    again = jwts.claims(renewed)
    assert again["aud"] == ["slurm"] and again["exp"] - again["iat"] == 600
    assert again["jti"] != claims["jti"] and again["kubernetes.io"]["pod"] == bound["pod"]
    assert jwts.verifies(renewed, cp.folder / "pki" / "sa.pub")
    kubectl(cp, "delete", "pod", "tokened", "--wait=false")


IN_CLUSTER = """
import json, os, ssl, urllib.request
folder = "/var/run/secrets/kubernetes.io/serviceaccount"
token = open(folder + "/token").read()
context = ssl.create_default_context(cafile=folder + "/ca.crt")  # checks the address is in the certificate
review = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).encode()
for host in (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["BRIDGE"]):
    url = f"https://{host}:{os.environ['KUBERNETES_SERVICE_PORT']}/apis/authentication.k8s.io/v1/selfsubjectreviews"
    request = urllib.request.Request(url, review, {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, context=context, timeout=20) as answer:
        print(host, json.load(answer)["status"]["userInfo"]["username"], flush=True)
"""


def test_a_pod_s_in_cluster_client_reaches_the_api_server_at_the_kubernetes_service(
    plane: tuple[ControlPlane, Path],
) -> None:
    cp, _ = plane
    wait_for("default ServiceAccount", lambda: "default" in kubectl(cp, "get", "serviceaccounts", "-o", "name"), 60)
    pod = _pod("in-cluster")
    container = pod["spec"]["containers"][0]
    container["command"] = ["sh", "-c", 'python3 -c "$PROGRAM" && exec sleep infinity']
    container["env"] = [{"name": "PROGRAM", "value": IN_CLUSTER}, {"name": "BRIDGE", "value": cp.address}]
    kubectl(cp, "apply", "-f", "-", stdin=json.dumps(pod))

    def answered() -> list[str] | None:
        lines = kubectl(cp, "logs", "in-cluster").splitlines() if _running(cp, "in-cluster") else []
        return lines if len(lines) == 2 else None

    lines = wait_for("the in-cluster client's answers", answered)
    account = "system:serviceaccount:default:default"
    # The ClusterIP a kubelet names in KUBERNETES_SERVICE_HOST, then the bridge address it is translated to.
    assert lines == [f"{KUBERNETES_SERVICE_IP} {account}", f"{cp.address} {account}"]
    assert get(cp, "service", "kubernetes")["spec"]["clusterIP"] == KUBERNETES_SERVICE_IP
    kubectl(cp, "delete", "pod", "in-cluster", "--wait=false")


def _running(cp: ControlPlane, name: str) -> bool:
    return bool(get(cp, "pod", name)["status"].get("containerStatuses", [{}])[0].get("state", {}).get("running"))


def test_kubectl_exec_attach_and_logs_follow_go_through_the_kubelet_api(plane: tuple[ControlPlane, Path]) -> None:
    cp, _ = plane
    pod = _pod("streams")
    pod["spec"]["containers"][0]["command"] = [
        "sh",
        "-c",
        "i=0; while true; do i=$((i+1)); echo tick $i; sleep 1; done",
    ]
    wait_for("default ServiceAccount", lambda: "default" in kubectl(cp, "get", "serviceaccounts", "-o", "name"), 60)
    kubectl(cp, "apply", "-f", "-", stdin=json.dumps(pod))
    wait_for("a running container", lambda: _running(cp, "streams"))
    # exec over WebSocket, proxied by the API server to the kubelet: stdout, stderr, the exit code, stdin.
    argv = ["kubectl", f"--kubeconfig={cp.kubeconfig}", "exec", "streams", "--"]
    done = subprocess.run(
        [*argv, "sh", "-c", "echo out; echo err >&2; exit 3"], capture_output=True, text=True, timeout=60
    )
    assert (done.stdout, done.stderr.splitlines()[0], done.returncode) == ("out\n", "err", 3)
    fed = subprocess.run(
        ["kubectl", f"--kubeconfig={cp.kubeconfig}", "exec", "-i", "streams", "--", "tr", "a-z", "A-Z"],
        input="hello\n", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert fed.returncode == 0 and fed.stdout == "HELLO\n", fed.stderr
    # logs -f and attach: new lines keep coming while they run.
    for verb in (["logs", "-f", "--tail=1"], ["attach"]):
        follow = subprocess.Popen(
            ["kubectl", f"--kubeconfig={cp.kubeconfig}", *verb, "streams"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        watchdog = threading.Timer(60, follow.kill)  # a stream that stops ends the reads below
        watchdog.start()
        try:
            assert follow.stdout is not None
            seen = [follow.stdout.readline() for _ in range(4)]
        finally:
            watchdog.cancel()
            follow.kill()
            follow.wait()
        ticks = [int(line.split()[1]) for line in seen if line.startswith("tick ")]
        assert len(ticks) >= 3 and ticks == sorted(ticks) and ticks[-1] > ticks[0], (verb, seen)
    # The API server called the kubelet with its client certificate; SPDY is refused by name.
    answer = subprocess.run(
        ["curl", "-sk", f"https://{cp.address}:10250/containerLogs/default/streams/c"], capture_output=True, timeout=30
    )
    assert answer.returncode != 0  # no client certificate of the cluster's CA: the handshake fails
    kubectl(cp, "delete", "pod", "streams", "--wait=false")


def test_kubectl_port_forward_reaches_a_port_on_the_pod_s_own_loopback(plane: tuple[ControlPlane, Path]) -> None:
    cp, _ = plane
    pod = _pod("served")
    script = "mkdir -p /tmp/www && echo forwarded > /tmp/www/hello && exec python3 -m http.server 8080 --bind 127.0.0.1 --directory /tmp/www"
    pod["spec"]["containers"][0]["command"] = ["sh", "-c", script]
    wait_for("default ServiceAccount", lambda: "default" in kubectl(cp, "get", "serviceaccounts", "-o", "name"), 60)
    kubectl(cp, "apply", "-f", "-", stdin=json.dumps(pod))
    wait_for("a running container", lambda: _running(cp, "served"))
    forward = subprocess.Popen(
        ["kubectl", f"--kubeconfig={cp.kubeconfig}", "port-forward", "pod/served", ":8080"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    watchdog = threading.Timer(90, forward.kill)
    watchdog.start()
    try:
        assert forward.stdout is not None
        line = forward.stdout.readline()  # Forwarding from 127.0.0.1:PORT -> 8080
        assert "-> 8080" in line, line
        local = line.split("->")[0].rsplit(":", 1)[1].strip()
        # Bound to the pod's loopback only: reached inside its network namespace, as a kubelet does.
        for _ in range(2):  # two connections, each its own pair of streams
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/hello", timeout=30) as answer:
                assert answer.read() == b"forwarded\n"
    finally:
        watchdog.cancel()
        forward.kill()
        forward.wait()
    kubectl(cp, "delete", "pod", "served", "--wait=false")


def _events(cp: ControlPlane, pod: str) -> dict[str, dict[str, Any]]:
    """reason/container -> the Event, of the Events about `pod`."""
    out: dict[str, dict[str, Any]] = {}
    for e in get(cp, "events", f"--field-selector=involvedObject.name={pod}")["items"]:
        out[f"{e['reason']}/{e['involvedObject'].get('fieldPath', '')}"] = e
    return out


def test_the_kubelet_s_events_reach_the_api_counted_as_a_kubelet_posts_them(plane: tuple[ControlPlane, Path]) -> None:
    cp, _ = plane
    pod = _pod("crashing")
    crashing, steady = pod["spec"]["containers"][0], dict(pod["spec"]["containers"][0], name="steady")
    crashing["command"] = ["sh", "-c", "echo once; exit 1"]
    del crashing["readinessProbe"]
    steady["command"] = ["sleep", "infinity"]
    steady["volumeMounts"] = [{"name": "later", "mountPath": "/later"}]
    pod["spec"]["containers"].append(steady)
    pod["spec"]["volumes"] = [{"name": "later", "configMap": {"name": "later"}}]
    wait_for("default ServiceAccount", lambda: "default" in kubectl(cp, "get", "serviceaccounts", "-o", "name"), 60)
    kubectl(cp, "apply", "-f", "-", stdin=json.dumps(pod))
    # Its ConfigMap missing: the kubelet's FailedMount, a Warning about the pod, from kubelet on NODE.
    mount = wait_for("FailedMount", lambda: _events(cp, "crashing").get("FailedMount/"), 60)
    assert mount["type"] == "Warning" and 'configmap "later" not found' in mount["message"]
    assert mount["source"] == {"component": "kubelet", "host": NODE}
    assert mount["involvedObject"]["uid"] == get(cp, "pod", "crashing")["metadata"]["uid"]
    kubectl(cp, "create", "configmap", "later", "--from-literal=k=v")
    # Then the container crashes and restarts: one Event per (reason, container) counted up, and
    # the back-off the kubelet waits between restarts told as BackOff.
    crash_path, steady_path = "spec.containers{c}", "spec.containers{steady}"

    def backed_off() -> dict[str, dict[str, Any]] | None:
        seen = _events(cp, "crashing")
        return seen if seen.get(f"BackOff/{crash_path}", {}).get("count", 0) >= 2 else None

    seen = backed_off() or wait_for("two BackOff counts", backed_off, 120)
    assert seen[f"Started/{crash_path}"]["count"] >= 3
    assert seen[f"Created/{crash_path}"]["message"] == "Created container: c"
    assert seen[f"Started/{steady_path}"]["count"] == 1
    assert seen[f"Pulled/{steady_path}"]["message"].startswith('Container image "ghcr.io/sunk-dev/')
    backoff = seen[f"BackOff/{crash_path}"]
    assert backoff["type"] == "Warning" and backoff["firstTimestamp"] < backoff["lastTimestamp"]
    assert backoff["message"].startswith("Back-off restarting failed container c in pod crashing_default(")
    described = kubectl(cp, "describe", "pod", "crashing")
    assert "Back-off restarting failed container c" in described and "FailedMount" in described, described
    # A deletion stops the running container: Killing.
    kubectl(cp, "delete", "pod", "crashing", "--wait=false")
    killing = wait_for("Killing", lambda: _events(cp, "crashing").get(f"Killing/{steady_path}"), 60)
    assert killing["message"] == "Stopping container steady"
    kubectl(cp, "delete", "configmap", "later")


CLIENT = """
import socket, time, urllib.request
while True:
    try:
        address = socket.gethostbyname("web")
    except OSError as err:
        print("unresolved", err, flush=True)
        time.sleep(1)
        continue
    try:
        with urllib.request.urlopen("http://web:8080/hello", timeout=3) as answer:
            print("reached", address, answer.read().decode().strip(), flush=True)
    except OSError as err:
        print("refused", address, type(err).__name__, flush=True)
    time.sleep(1)
"""


def test_a_pod_resolves_a_service_by_name_and_a_network_policy_refuses_it(plane: tuple[ControlPlane, Path]) -> None:
    cp, _ = plane
    web = _pod("web")
    web["metadata"]["labels"] = {"app": "web"}
    serve = "mkdir -p /tmp/www && echo served > /tmp/www/hello && exec python3 -m http.server 8080 --directory /tmp/www"
    web["spec"]["containers"][0]["command"] = ["sh", "-c", serve]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "web"}, "ports": [{"port": 8080, "targetPort": 8080}]},
    }
    client = _pod("client")
    del client["spec"]["containers"][0]["readinessProbe"]
    client["spec"]["containers"][0]["command"] = ["python3", "-c", CLIENT]
    wait_for("default ServiceAccount", lambda: "default" in kubectl(cp, "get", "serviceaccounts", "-o", "name"), 60)
    kubectl(cp, "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [web, service]}))
    kubectl(cp, "apply", "-f", "-", stdin=json.dumps(client))

    def last(prefix: str) -> str | None:
        lines = kubectl(cp, "logs", "client").splitlines() if _running(cp, "client") else []
        return lines[-1] if lines and lines[-1].startswith(prefix) else None

    # The cluster's DNS answers the Service's name (the client's search path) with its Ready pod.
    reached = wait_for("the client reaching web by name", lambda: last("reached"))
    assert reached == f"reached {get(cp, 'pod', 'web')['status']['podIP']} served"
    # The LoadBalancer: the API server allocated its nodePort, the agent relays it on 127.0.0.1
    # and wrote the ingress into the Service's status (as the network user: a Node may not).
    lb = wait_for(
        "the LoadBalancer's ingress", lambda: get(cp, "service", "web")["status"]["loadBalancer"].get("ingress")
    )
    assert [i["ip"] for i in lb] == ["127.0.0.1"]
    node_port = get(cp, "service", "web")["spec"]["ports"][0]["nodePort"]
    with urllib.request.urlopen(f"http://127.0.0.1:{node_port}/hello", timeout=30) as answer:
        assert answer.read() == b"served\n"
    # A NetworkPolicy read from the real API: web admits only pods labelled role=friend.
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "friends-only", "namespace": "default"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "web"}},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "friend"}}}], "ports": [{"port": 8080}]}],
        },
    }
    kubectl(cp, "apply", "-f", "-", stdin=json.dumps(policy))
    refused = wait_for("the client refused", lambda: last("refused"), 60)
    assert refused.startswith(f"refused {get(cp, 'pod', 'web')['status']['podIP']} ")
    kubectl(cp, "label", "pod", "client", "role=friend")
    wait_for("the friend admitted", lambda: last("reached"), 60)
    # A Node's own credentials may read no NetworkPolicy: the network parts act as their own user.
    assert as_node(cp, "get", "networkpolicies", "-A").returncode != 0
    kubectl(cp, "delete", "networkpolicy", "friends-only")
    kubectl(cp, "delete", "service", "web")
    kubectl(cp, "delete", "pod", "web", "client", "--wait=false")


def test_a_failing_liveness_probe_is_told_as_unhealthy_then_killing(plane: tuple[ControlPlane, Path]) -> None:
    cp, _ = plane
    pod = _pod("unwell")
    container = pod["spec"]["containers"][0]
    # Alive for its first seconds, then its probe fails.
    container["command"] = ["sh", "-c", "sleep 4; touch /tmp/unwell; exec sleep infinity"]
    del container["readinessProbe"]
    probe = {"exec": {"command": ["test", "!", "-e", "/tmp/unwell"]}, "periodSeconds": 2, "failureThreshold": 2}
    container["livenessProbe"] = probe
    wait_for("default ServiceAccount", lambda: "default" in kubectl(cp, "get", "serviceaccounts", "-o", "name"), 60)
    kubectl(cp, "apply", "-f", "-", stdin=json.dumps(pod))
    path = "spec.containers{c}"
    killing = wait_for("Killing", lambda: _events(cp, "unwell").get(f"Killing/{path}"), 120)
    assert (killing["type"], killing["message"]) == ("Normal", "Container c failed liveness probe, will be restarted")
    unhealthy = _events(cp, "unwell")[f"Unhealthy/{path}"]
    assert unhealthy["type"] == "Warning" and unhealthy["message"] == "Liveness probe failed"
    assert unhealthy["count"] >= 2 and unhealthy["source"] == {"component": "kubelet", "host": NODE}
    kubectl(cp, "delete", "pod", "unwell", "--wait=false")
