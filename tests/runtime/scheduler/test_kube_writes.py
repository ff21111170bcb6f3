"""The scheduler's writes (a Binding, its Event, the PodScheduled condition) go through the
official client's ApiClient without its generated methods (kube.py `_write`): against kubesim,
what an API server does with them; against a recording server, what goes over the wire (the
token the configuration holds, the content types, one connection for many writes).

What kubesim can't model: admission and RBAC (test_local_inference.py binds on the real
kube-apiserver), and a strategic merge beyond the conditions list merged by type."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from sunk.runtime.scheduler.kube import Conflict, OfficialKube
from sunk.runtime.slurmrest.podref import PodRef

from tests.support.kubesim import KubeSim

NS = "team"


@pytest.fixture(scope="module")
def sim() -> Iterator[KubeSim]:
    with KubeSim() as sim:
        sim.add_namespace(NS)
        yield sim


def _pod(api: client.CoreV1Api, name: str) -> PodRef:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"schedulerName": "sunk", "containers": [{"name": "c", "image": "busybox"}]},
    }
    reply: Any = api.create_namespaced_pod(NS, body, _preload_content=False)  # type: ignore[arg-type]
    created = json.loads(reply.data)
    return PodRef(NS, name, created["metadata"]["uid"])


def test_a_binding_sets_node_and_annotations_once_and_its_event_and_condition_land(sim: KubeSim) -> None:
    api = client.CoreV1Api(sim.api_client())
    kube = OfficialKube(api, component="sunk-scheduler")
    ref = _pod(api, "web-0")
    kube.set_scheduled(ref, "False", "WaitingForSlurm", "job 7 pending")
    kube.bind(ref, "node-a", {"slurm.sunk.dev/job-id": "7"})
    reply: Any = api.read_namespaced_pod("web-0", NS, _preload_content=False)
    pod = json.loads(reply.data)
    assert pod["spec"]["nodeName"] == "node-a"
    assert pod["metadata"]["annotations"]["slurm.sunk.dev/job-id"] == "7"
    with pytest.raises(Conflict, match="already bound"):
        kube.bind(ref, "node-b", {})
    with pytest.raises(Conflict, match="gone"):
        kube.bind(PodRef(NS, "never-made", "u0"), "node-a", {})
    kube.set_scheduled(PodRef(NS, "never-made", "u0"), "False", "X", "gone: no error")  # 404 is fine
    kube.event(ref, "Normal", "Scheduled", "Successfully assigned team/web-0 to node-a")
    reply = api.list_namespaced_event(NS, _preload_content=False)
    events = json.loads(reply.data)["items"]
    mine = [e for e in events if e["involvedObject"].get("uid") == ref.uid]
    assert [(e["reason"], e["type"], e["source"]["component"]) for e in mine] == [
        ("Scheduled", "Normal", "sunk-scheduler")
    ]


class Recorder(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[dict[str, Any]] = []
    status = 201

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append(
            {
                "method": self.command,
                "path": self.path,
                "auth": self.headers.get("Authorization"),
                "type": self.headers.get("Content-Type"),
                "body": json.loads(body),
                "port": self.client_address[1],
            }
        )
        reply = json.dumps({"kind": "Status", "code": self.status, "reason": "Conflict"}).encode()
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    do_POST = do_PATCH = _answer

    def log_message(self, *args: Any) -> None:
        pass


def test_the_wire_carries_the_configured_token_the_content_types_and_reuses_one_connection() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
        config.api_key = {"BearerToken": "the-token"}
        config.api_key_prefix = {"BearerToken": "Bearer"}
        kube = OfficialKube(client.CoreV1Api(client.ApiClient(config)), component="sunk-scheduler")
        ref = PodRef("a b", "p/1", "u1")  # quoted in the path
        Recorder.seen.clear()
        kube.bind(ref, "n1", {"k": "v"})
        kube.event(ref, "Warning", "FailedScheduling", "m")
        kube.set_scheduled(ref, "False", "R", "m")
        Recorder.status = 409
        with pytest.raises(Conflict):
            kube.bind(ref, "n1", {})
    finally:
        Recorder.status = 201
        server.shutdown()
    seen = Recorder.seen
    assert [(s["method"], s["path"]) for s in seen] == [
        ("POST", "/api/v1/namespaces/a%20b/pods/p%2F1/binding"),
        ("POST", "/api/v1/namespaces/a%20b/events"),
        ("PATCH", "/api/v1/namespaces/a%20b/pods/p%2F1/status"),
        ("POST", "/api/v1/namespaces/a%20b/pods/p%2F1/binding"),
    ]
    assert {s["auth"] for s in seen} == {"Bearer the-token"}
    assert [s["type"] for s in seen] == [
        "application/json",
        "application/json",
        "application/strategic-merge-patch+json",
        "application/json",
    ]
    assert seen[0]["body"]["target"] == {"apiVersion": "v1", "kind": "Node", "name": "n1"}
    assert seen[0]["body"]["metadata"] == {"name": "p/1", "namespace": "a b", "uid": "u1", "annotations": {"k": "v"}}
    assert seen[2]["body"]["status"]["conditions"][0]["type"] == "PodScheduled"
    assert len({s["port"] for s in seen}) == 1  # every reply read to its end: one pooled connection
