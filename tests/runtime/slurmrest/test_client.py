"""SlurmRestClient against httpx.MockTransport: replies shaped like slurmrestd 24.11's."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sunk.runtime.slurmrest import (
    JobSubmit,
    JwtMinter,
    SlurmApiError,
    SlurmRestClient,
    SlurmUnavailable,
    StaticToken,
    mint_hs256,
    versions,
)
from sunk.runtime.slurmrest.connect import SlurmAccess

Handler = Callable[[httpx.Request], httpx.Response]


def slurm_error(code: int, description: str) -> dict[str, Any]:
    return {"errors": [{"error_number": code, "error": "x", "description": description, "source": "s"}], "warnings": []}


def make(handler: Handler, **kw: Any) -> tuple[SlurmRestClient, list[float]]:
    sleeps: list[float] = []
    client = SlurmRestClient(
        "http://slurm",
        user="slurm",
        token=StaticToken("tok"),
        transport=httpx.MockTransport(handler),
        sleep=sleeps.append,
        **{"api": "v0.0.42", **kw},  # the replies below are v0.0.42's; discovery has its own tests
    )
    return client, sleeps


NODE = {
    "name": "cpu-0",
    "state": ["IDLE", "DRAIN"],
    "reason": "sunk: cordoned",
    "reason_set_by_user": "slurm",
    "reason_changed_at": {"set": True, "infinite": False, "number": 1700000000},
    "free_mem": {"set": True, "infinite": False, "number": 1234},
    "cpu_load": 7,
    "partitions": ["cpu"],
    "cpus": 4,
    "alloc_cpus": 0,
}


def test_list_nodes_parses_and_sends_auth_headers() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"nodes": [NODE], "errors": [], "warnings": []})

    client, _ = make(handler)
    (node,) = client.list_nodes(future=True)
    assert node.name == "cpu-0"
    assert node.drain and node.base_state == "IDLE" and node.flags == {"DRAIN"}
    assert node.reason_changed_at == 1700000000
    assert node.partitions == ("cpu",)
    req = seen[0]
    assert req.url.path == "/slurm/v0.0.42/nodes/"
    assert req.url.params["flags"] == "FUTURE"
    assert req.headers["X-SLURM-USER-NAME"] == "slurm"
    assert req.headers["X-SLURM-USER-TOKEN"] == "tok"
    assert client.requests == 1


def test_user_error_in_http_500_is_typed_and_not_retried() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(500, json=slurm_error(2018, "Invalid node name specified"))

    client, sleeps = make(handler)
    with pytest.raises(SlurmApiError) as info:
        client.update_node("nope", state="DRAIN", reason="x")
    assert info.value.code == 2018
    assert info.value.not_found
    assert "Invalid node name" in info.value.description
    assert len(calls) == 1 and sleeps == []


def test_connection_errors_are_retried_with_bounded_backoff() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) < 3:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={"nodes": [], "errors": []})

    client, sleeps = make(handler, backoff=0.5, max_backoff=0.8)
    assert client.list_nodes() == []
    assert sleeps == [0.5, 0.8]
    assert client.requests == 3


def test_gives_up_as_unavailable_after_retries() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, text="upstream down")

    client, sleeps = make(handler, retries=2, backoff=0.1)
    with pytest.raises(SlurmUnavailable) as info:
        client.list_nodes()
    assert "503" in info.value.detail
    assert sleeps == [0.1, 0.2]
    assert client.requests == 3


def test_unreachable_controller_behind_restd_is_transient() -> None:
    replies = [
        httpx.Response(500, json=slurm_error(1800, "Unable to contact slurm controller (connect failure)")),
        httpx.Response(200, json={"pings": [{"hostname": "h", "responding": True, "pinged": "UP"}], "errors": []}),
    ]
    client, sleeps = make(lambda r: replies.pop(0))
    (ping,) = client.ping()
    assert ping.responding
    assert len(sleeps) == 1


def test_500_without_body_is_transient() -> None:
    replies = [httpx.Response(500, text=""), httpx.Response(200, json={"nodes": []})]
    client, _ = make(lambda r: replies.pop(0))
    assert client.list_nodes() == []


def test_submit_is_not_retried_after_the_request_may_have_arrived() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        raise httpx.ReadTimeout("slow", request=request)

    client, _ = make(handler)
    with pytest.raises(SlurmUnavailable):
        client.submit_job(JobSubmit(script="#!/bin/sh\ntrue\n"))
    assert len(calls) == 1


def test_submit_is_retried_when_it_never_connected() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json={"job_id": 42, "errors": []})

    client, _ = make(handler)
    assert client.submit_job(JobSubmit(script="#!/bin/sh\ntrue\n", time_limit=5, partition="cpu")) == 42
    body = json.loads(calls[1].content)
    assert body["job"]["time_limit"] == {"set": True, "infinite": False, "number": 5}
    assert body["job"]["partition"] == "cpu"
    assert body["job"]["environment"]
    assert "qos" not in body["job"]


def test_cancel_unknown_job_reads_status_error_in_a_200() -> None:
    reply = {
        "status": [{"error": {"string": "Invalid job id specified", "code": 2017, "message": "x"}, "job_id": 9}],
        "errors": [],
    }
    client, _ = make(lambda r: httpx.Response(200, json=reply))
    with pytest.raises(SlurmApiError) as info:
        client.cancel_job(9)
    assert info.value.code == 2017 and info.value.not_found


def test_cancel_ok() -> None:
    reply = {"status": [{"error": {"string": "No error", "code": 0, "message": ""}, "job_id": 9}], "errors": []}
    client, _ = make(lambda r: httpx.Response(200, json=reply))
    client.cancel_job(9)


def test_batch_update_sends_sorted_names() -> None:
    bodies: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        assert request.url.path == "/slurm/v0.0.42/nodes/"
        return httpx.Response(200, json={"errors": [], "warnings": []})

    client, _ = make(handler)
    client.update_nodes(["b", "a", "b"], state="RESUME")
    client.update_nodes([], state="RESUME")  # nothing to do, no request
    assert bodies == [{"state": ["RESUME"], "name": ["a", "b"]}]


def test_update_without_fields_is_a_bug() -> None:
    client, _ = make(lambda r: httpx.Response(200, json={}))
    with pytest.raises(ValueError):
        client.update_node("a")


def test_db_jobs_parse_nested_fields() -> None:
    job = {
        "job_id": 3,
        "name": "j",
        "comment": {"administrator": None, "job": "hello", "system": None},
        "state": {"current": ["COMPLETED"], "reason": "None"},
        "time": {"start": 5, "end": 6, "limit": {"set": True, "infinite": False, "number": 5}},
        "priority": {"set": False, "infinite": False, "number": 0},
    }
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"jobs": [job]})

    client, _ = make(handler)
    (dbjob,) = client.db_jobs(job_name="j", start_time="now-1hour")
    assert dbjob.comment.job == "hello"
    assert dbjob.state.current == ("COMPLETED",)
    assert dbjob.time.limit == 5 and dbjob.priority is None
    assert seen[0].url.path == "/slurmdb/v0.0.42/jobs/"
    assert seen[0].url.params["job_name"] == "j"


def _b64decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def test_minted_token_is_a_valid_hs256_jwt() -> None:
    key = b"k" * 32
    token = mint_hs256(key, "slurm", now=1000, lifespan=60)
    header, claims, signature = token.split(".")
    assert json.loads(_b64decode(header)) == {"alg": "HS256", "typ": "JWT"}
    assert json.loads(_b64decode(claims)) == {"iat": 1000, "exp": 1060, "sun": "slurm"}
    expected = hmac.new(key, f"{header}.{claims}".encode(), hashlib.sha256).digest()
    assert _b64decode(signature) == expected


def test_minter_renews_before_expiry() -> None:
    now = [1000.0]
    minter = JwtMinter(b"k" * 32, "slurm", lifespan=100, clock=lambda: now[0])
    first = minter.token()
    now[0] = 1070.0
    assert minter.token() == first  # 30 s left of 100: still good
    now[0] = 1081.0
    assert minter.token() != first  # under a fifth left: renewed
    assert "k" * 32 not in repr(minter)


def test_short_key_is_refused() -> None:
    with pytest.raises(ValueError):
        JwtMinter(b"short", "slurm")


@pytest.mark.parametrize("body", [{}, {"nodes": None}, {"nodes": {}}, {"errors": [], "warnings": []}])
def test_a_reply_without_the_node_list_is_unavailable_never_empty(body: dict[str, Any]) -> None:
    """Runtime trust: `200 {}` or `"nodes": null` read as "no Slurm nodes" would let the
    operator delete busy slurmd pods without draining. It fails closed instead."""
    client, _ = make(lambda request: httpx.Response(200, json=body), retries=0)
    with pytest.raises(SlurmUnavailable, match="the reply has no 'nodes' list"):
        client.list_nodes()


def test_an_auth_failure_is_an_error_not_an_unknown_node() -> None:
    """An error numbered 0 that is not slurmrestd's "Failure to query node" (a proxy's 401 page)
    must not read as "node not found"."""
    client, _ = make(lambda request: httpx.Response(401, text="<html>401 Authorization Required</html>"))
    with pytest.raises(SlurmApiError) as info:
        client.get_node("cpu-0")
    assert info.value.status == 401 and not info.value.not_found


def test_slurmrestds_unknown_node_quirk_is_still_not_found() -> None:
    body = {"nodes": [], **slurm_error(0, "Failure to query node cpu-9")}
    client, _ = make(lambda request: httpx.Response(200, json=body))
    with pytest.raises(SlurmApiError) as info:
        client.get_node("cpu-9")
    assert info.value.not_found and info.value.code == 2018


def test_partitions_and_diag_parse_their_replies_and_a_reply_without_statistics_fails_closed() -> None:
    replies = {
        "/slurm/v0.0.42/partitions/": {
            "partitions": [{"name": "batch", "partition": {"state": ["UP"]}, "nodes": {"configured": "cpu-[0-1]"}}]
        },
        "/slurm/v0.0.42/diag/": {
            "statistics": {"jobs_submitted": 5, "bf_when_last_cycle": {"set": True, "infinite": False, "number": 9}}
        },
    }
    client, _ = make(lambda request: httpx.Response(200, json=replies[request.url.path]))
    (batch,) = client.list_partitions()
    assert batch.name == "batch" and batch.up and batch.nodes.configured == "cpu-[0-1]"
    diag = client.diag()
    assert diag.jobs_submitted == 5 and diag.bf_when_last_cycle == 9
    replies["/slurm/v0.0.42/diag/"] = {"errors": [], "warnings": []}
    with pytest.raises(SlurmUnavailable, match="statistics"):
        client.diag()


def test_node_states_read_only_the_syncers_fields_and_fail_the_same_way() -> None:
    """The msgspec path (node_states) agrees with the pydantic one (list_nodes) on what it reads,
    and refuses what list_nodes refuses: Slurm errors, unreachable controllers, no node list."""
    other = {**NODE, "name": "cpu-1", "state": ["IDLE"], "reason": "", "extra": '{"sunk.dev/pod":"ns/p/u"}'}
    client, _ = make(lambda request: httpx.Response(200, json={"nodes": [NODE, other], "errors": []}))
    states = client.node_states(future=True)
    full = client.list_nodes(future=True)
    assert [(s.name, s.state, s.reason, s.extra) for s in states] == [
        (n.name, n.state, n.reason, n.extra) for n in full
    ]
    assert states[0].drain and states[0].base_state == "IDLE" and states[0].flags == {"DRAIN"}
    assert states[1] == type(states[1])("cpu-1", ("IDLE",), "", '{"sunk.dev/pod":"ns/p/u"}')  # compares by value
    bodies: list[dict[str, Any]] = [{}, {"nodes": None}, {"nodes": {}}]
    for body in bodies:
        bad, _ = make(lambda request, body=body: httpx.Response(200, json=body), retries=0)  # type: ignore[misc]
        with pytest.raises(SlurmUnavailable, match="the reply has no 'nodes' list"):
            bad.node_states()
    denied, _ = make(lambda request: httpx.Response(200, json=slurm_error(1007, "Protocol authentication error")))
    with pytest.raises(SlurmApiError, match="authentication"):
        denied.node_states()
    calls: list[int] = []

    def unreachable(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return httpx.Response(200, json=slurm_error(1001, "Unable to contact slurm controller"))

    down, sleeps = make(unreachable, retries=2)
    with pytest.raises(SlurmUnavailable):
        down.node_states()
    assert len(calls) == 3 and len(sleeps) == 2  # retried like any read


def _openapi(*versions: str) -> dict[str, Any]:
    paths: dict[str, Any] = {f"/slurm/{v}/nodes/": {} for v in versions}
    paths |= {f"/slurmdb/{v}/jobs/": {} for v in versions}
    return {"openapi": "3.0.2", "paths": {**paths, "/openapi/v3": {}}}


@pytest.mark.parametrize(
    ("served", "used"),
    [
        (("v0.0.40", "v0.0.41", "v0.0.42"), "v0.0.42"),  # Slurm 24.11
        (("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"), "v0.0.45"),  # Slurm 26.05
    ],
)
def test_the_data_parser_version_is_the_newest_both_speak_read_from_the_servers_document(
    served: tuple[str, ...], used: str
) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path == "/openapi/v3":
            assert request.headers["X-SLURM-USER-TOKEN"] == "tok"
            return httpx.Response(200, json=_openapi(*served))
        return httpx.Response(200, json={"nodes": [NODE], "errors": [], "warnings": []})

    client, _ = make(handler, api=None)
    client.list_nodes()
    client.list_nodes()
    assert seen == ["/openapi/v3", f"/slurm/{used}/nodes/", f"/slurm/{used}/nodes/"]  # asked once
    assert client.api == used and client.requests == 2


def test_a_server_without_a_version_in_common_is_named_and_an_unreadable_document_falls_back() -> None:
    def newer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=_openapi("v0.0.46", "v0.0.47"))

    client, _ = make(newer, api=None)
    with pytest.raises(versions.NoCommonVersion) as err:
        client.list_nodes()
    assert str(err.value) == (
        "slurmrestd serves data_parser v0.0.47, v0.0.46; this sunk speaks v0.0.45, v0.0.42: "
        "run a Slurm release sunk supports"
    )
    asked: list[str] = []

    def missing(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        if request.url.path == "/openapi/v3":
            return httpx.Response(404, text="not here")
        return httpx.Response(200, json={"nodes": [NODE], "errors": [], "warnings": []})

    client, _ = make(missing, api=None)
    client.list_nodes()
    client.list_nodes()
    # The version both supported releases serve; the document is asked for again later, not per call.
    assert asked == ["/openapi/v3", "/slurm/v0.0.42/nodes/", "/slurm/v0.0.42/nodes/"]
    client._fallback_until = 0.0  # REDISCOVER seconds later
    client.list_nodes()
    assert asked[3:] == ["/openapi/v3", "/slurm/v0.0.42/nodes/"]


def test_served_versions_sort_by_number_not_text() -> None:
    doc = _openapi("v0.0.9", "v0.0.10", "v0.0.42")
    assert versions.served_versions(doc) == ["v0.0.42", "v0.0.10", "v0.0.9"]
    assert versions.served_versions({"paths": None}) == []
    assert versions.choose(["v0.0.42", "v0.0.45"], ["v0.0.42"]) == "v0.0.42"


def test_after_a_set_back_the_client_renegotiates_on_the_first_404_without_a_restart() -> None:
    # slurmrestd 26.05 served v0.0.45; the stack set back to 24.11 brings a slurmrestd that serves
    # v0.0.40-v0.0.42 at the same address. The cached version answers 404 (no handler, so nothing
    # ran): the client reads the document again and sends the request once more, in v0.0.42.
    served = ["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"]
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        if request.url.path == "/openapi/v3":
            return httpx.Response(200, json=_openapi(*served))
        if request.url.path.split("/")[2] not in served:
            return httpx.Response(404, text="Unable to find handler")
        if request.method == "POST":
            return httpx.Response(200, json={"job_id": 7, "errors": [], "warnings": []})
        return httpx.Response(200, json={"nodes": [NODE], "errors": [], "warnings": []})

    client, _ = make(handler, api=None)
    client.list_nodes()
    assert client.api == "v0.0.45"
    served[:] = ["v0.0.40", "v0.0.41", "v0.0.42"]
    seen.clear()
    assert [n.name for n in client.list_nodes()] == [NODE["name"]]
    assert seen == ["GET /slurm/v0.0.45/nodes/", "GET /openapi/v3", "GET /slurm/v0.0.42/nodes/"]
    assert client.api == "v0.0.42"
    # A submission too: a 404 means no handler took it, so sending it again can't run it twice.
    served[:] = ["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"]
    client._api = "v0.0.40"  # as if discovered from an older server
    seen.clear()
    assert client.submit_job(JobSubmit(script="#!/bin/sh\ntrue\n")) == 7
    assert seen == ["POST /slurm/v0.0.40/job/submit", "GET /openapi/v3", "POST /slurm/v0.0.45/job/submit"]


def test_clients_of_one_server_share_what_the_first_found_and_a_stale_finding_is_cleared() -> None:
    # A controller makes a client per submitting thread: only the first reads the document (a
    # 26.05 document costs slurmrestd ~45 ms to write); the others start from what it found.
    served = ["v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"]
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path == "/openapi/v3":
            return httpx.Response(200, json=_openapi(*served))
        if request.url.path.split("/")[2] not in served:
            return httpx.Response(404, text="Unable to find handler")
        return httpx.Response(200, json={"nodes": [NODE], "errors": [], "warnings": []})

    shared = versions.Discovered()
    first, _ = make(handler, api=None, discovered=shared)
    first.list_nodes()
    assert shared.api == "v0.0.45"
    others = [make(handler, api=None, discovered=shared)[0] for _ in range(3)]
    for client in others:
        client.list_nodes()
    assert seen.count("/openapi/v3") == 1 and seen[-3:] == ["/slurm/v0.0.45/nodes/"] * 3
    # A set-back: the next client to meet the 404 reads the document again and says so for all;
    # a client made after it starts from the new finding.
    served[:] = ["v0.0.40", "v0.0.41", "v0.0.42"]
    seen.clear()
    others[0].list_nodes()
    assert seen == ["/slurm/v0.0.45/nodes/", "/openapi/v3", "/slurm/v0.0.42/nodes/"] and shared.api == "v0.0.42"
    seen.clear()
    make(handler, api=None, discovered=shared)[0].list_nodes()
    assert seen == ["/slurm/v0.0.42/nodes/"]
    # One still on the old version meets its own 404 and takes the new finding, without a read.
    seen.clear()
    others[1].list_nodes()
    assert seen == ["/slurm/v0.0.45/nodes/", "/slurm/v0.0.42/nodes/"] and shared.api == "v0.0.42"


def test_access_hands_every_client_it_makes_the_same_finding() -> None:
    access = SlurmAccess.from_key("http://slurm", "slurm", b"k" * 32)
    one, two = access.client(), access.client()
    try:
        assert one._discovered is two._discovered is access.discovered
    finally:
        one.close()
        two.close()


def test_a_404_of_a_missing_job_or_a_pinned_version_is_an_answer_not_a_renegotiation() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path == "/openapi/v3":
            return httpx.Response(200, json=_openapi("v0.0.42"))
        return httpx.Response(404, json=slurm_error(2017, "Invalid job id specified"))

    client, _ = make(handler, api=None)
    with pytest.raises(SlurmApiError) as err:
        client.get_job(99)
    assert err.value.not_found and seen == ["/openapi/v3", "/slurm/v0.0.42/job/99"]  # no second read
    pinned, _ = make(lambda request: httpx.Response(404, text="Unable to find handler"))
    with pytest.raises(SlurmApiError):
        pinned.list_nodes()  # the version the caller gave is kept: nothing to renegotiate
