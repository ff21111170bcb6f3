"""SlurmRestClient against REAL slurmrestd (26.05, and 24.11 in `make test-compat`) from the harness,
with tokens it mints itself, in the data_parser version it finds the server serves."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.slurmrest import (
    JobSubmit,
    JwtMinter,
    SlurmApiError,
    SlurmRestClient,
    SlurmUnavailable,
    StaticToken,
    mint_hs256,
)

from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    nodes = [SimNode("cpu-0", "cpu"), SimNode("cpu-1", "cpu")]
    with LocalSlurm.start(load_stack("acme-dev", FIXTURE_STACKS).spec, nodes=nodes) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def rest(slurm: LocalSlurm) -> Iterator[SlurmRestClient]:
    with SlurmRestClient(
        slurm.rest_url, user="slurm", token=JwtMinter.from_file(slurm.jwt_key_path, "slurm")
    ) as client:
        yield client


def test_minted_token_is_accepted_and_a_wrong_key_is_not(slurm: LocalSlurm, rest: SlurmRestClient) -> None:
    assert any(p.responding for p in rest.ping())
    forged = mint_hs256(b"x" * 32, "slurm", now=int(time.time()), lifespan=60)
    with (
        SlurmRestClient(slurm.rest_url, user="slurm", token=StaticToken(forged)) as bad,
        pytest.raises(SlurmApiError) as info,
    ):
        bad.list_nodes()
    assert info.value.code == 1007  # SLURM_PROTOCOL_AUTHENTICATION_ERROR
    # A token from `scontrol token` works the same way.
    with SlurmRestClient(slurm.rest_url, user="slurm", token=StaticToken(slurm.token())) as other:
        assert {n.name for n in other.list_nodes()} == {"cpu-0", "cpu-1"}


def test_nodes_drain_resume_and_extra(rest: SlurmRestClient) -> None:
    nodes = {n.name: n for n in rest.list_nodes()}
    assert set(nodes) == {"cpu-0", "cpu-1"}
    assert nodes["cpu-0"].base_state == "IDLE" and nodes["cpu-0"].partitions == ("batch",)
    assert nodes["cpu-0"].cpus == 4
    rest.update_node("cpu-0", state="DRAIN", reason="sunk: test", extra='{"k":"v"}', comment="note")
    node = rest.get_node("cpu-0")
    assert node.drain and node.reason == "sunk: test" and node.reason_set_by_user == "slurm"
    rest.update_node("cpu-0", state="RESUME")
    node = rest.get_node("cpu-0")
    assert not node.drain and node.reason == ""
    assert (node.extra, node.comment) == ('{"k":"v"}', "note")  # free text survives a resume


def test_batch_update(rest: SlurmRestClient) -> None:
    rest.update_nodes(["cpu-0", "cpu-1"], state="DRAIN", reason="sunk: batch")
    assert all(n.drain and n.reason == "sunk: batch" for n in rest.list_nodes())
    rest.update_nodes(["cpu-0", "cpu-1"], state="RESUME")
    assert not any(n.drain for n in rest.list_nodes())


def test_unknown_node_errors_are_typed(rest: SlurmRestClient) -> None:
    with pytest.raises(SlurmApiError) as info:
        rest.update_node("nope", state="DRAIN", reason="x")
    # 24.11 answers HTTP 500, 26.05 422: the error code is what the client goes by.
    assert info.value.code == 2018 and info.value.status in (500, 422) and info.value.not_found
    with pytest.raises(SlurmApiError) as info:
        rest.get_node("nope")
    assert info.value.not_found


def test_future_nodes_are_listed_only_when_asked(slurm: LocalSlurm, rest: SlurmRestClient) -> None:
    # acme-dev's MaxNodeCount is 512 (maxNodes 256 per NodeSet): slots are free.
    slurm.run("scontrol", "create", "NodeName=fut-0", "State=FUTURE", "CPUs=1", "RealMemory=100", check=True)
    assert "fut-0" not in {n.name for n in rest.list_nodes()}
    future = {n.name: n for n in rest.list_nodes(future=True)}
    assert future["fut-0"].base_state == "FUTURE"
    assert rest.get_node("fut-0").name == "fut-0"
    rest.update_node("fut-0", state="DOWN", reason="remove")
    rest.delete_node("fut-0")
    assert "fut-0" not in {n.name for n in rest.list_nodes(future=True)}


def test_jobs_submit_read_cancel_and_accounting(slurm: LocalSlurm, rest: SlurmRestClient) -> None:
    job_id = rest.submit_job(
        JobSubmit(
            script="#!/bin/sh\nsleep 60\n", name="rest-probe", comment="from-rest", time_limit=5, partition="batch"
        )
    )
    slurm.wait_job(job_id, states={"RUNNING"}, timeout=120)
    job = rest.get_job(job_id)
    assert (job.name, job.comment, job.state, job.partition, job.time_limit) == (
        "rest-probe",
        "from-rest",
        "RUNNING",
        "batch",
        5,
    )
    assert job.node_names and set(job.node_names) <= {"cpu-0", "cpu-1"}
    assert job_id in {j.job_id for j in rest.list_jobs()}
    rest.cancel_job(job_id)
    slurm.wait_job(job_id, states={"CANCELLED"}, timeout=120)
    with pytest.raises(SlurmApiError) as info:
        rest.cancel_job(999_999)
    assert info.value.code == 2017
    with pytest.raises(SlurmApiError) as info:
        rest.get_job(999_999)
    assert info.value.not_found
    deadline = time.monotonic() + 120
    while not (found := rest.db_jobs(job_name="rest-probe")) and time.monotonic() < deadline:
        time.sleep(0.5)  # slurmdbd receives the record asynchronously
    assert found and found[0].job_id == job_id and found[0].comment.job == "from-rest"
    assert found[0].state.current == ("CANCELLED",)


def test_slurmrestd_down_is_unavailable_then_recovers(slurm: LocalSlurm) -> None:
    sleeps: list[float] = []
    client = SlurmRestClient(
        slurm.rest_url,
        user="slurm",
        token=JwtMinter.from_file(slurm.jwt_key_path, "slurm"),
        retries=2,
        backoff=0.05,
        sleep=sleeps.append,
    )
    slurm.stop_slurmrestd()
    try:
        with pytest.raises(SlurmUnavailable):
            client.list_nodes()
        assert client.requests == 3 and sleeps == [0.05, 0.1]
    finally:
        slurm.start_slurmrestd()
    assert {n.name for n in client.list_nodes()} == {"cpu-0", "cpu-1"}


def test_the_client_speaks_the_newest_version_the_servers_document_lists(
    slurm: LocalSlurm, rest: SlurmRestClient
) -> None:
    """26.05 serves v0.0.42-v0.0.45, 24.11 v0.0.40-v0.0.42: the client takes the newest it speaks,
    and every other test here runs in it (nodes, jobs, accounting, errors)."""
    assert rest.api == {"26.05": "v0.0.45", "24.11": "v0.0.42"}[slurm.spec.slurm.version]
    assert {n.name for n in rest.list_nodes()} >= {"cpu-0", "cpu-1"}
    assert any(p.responding for p in rest.ping())


def test_a_version_the_server_no_longer_serves_is_renegotiated_at_the_first_404(slurm: LocalSlurm) -> None:
    """A set-back (26.05 to 24.11) leaves a client that chose v0.0.45 talking to a slurmrestd that
    serves v0.0.40-v0.0.42 at the same address: the real slurmrestd answers the old version's path
    with 404, and the client reads the document again and goes on in the version served now, with
    no restart. (Run on 24.11 by `make test-compat`, v0.0.45 is that very case; on 26.05, v0.0.41.)"""
    release = slurm.spec.slurm.version
    gone, now = {"26.05": ("v0.0.41", "v0.0.45"), "24.11": ("v0.0.45", "v0.0.42")}[release]
    with SlurmRestClient(slurm.rest_url, user="slurm", token=JwtMinter.from_file(slurm.jwt_key_path, "slurm")) as c:
        c._api = gone  # what it had discovered from the release before
        assert {n.name for n in c.list_nodes()} >= {"cpu-0", "cpu-1"}
        assert c.api == now
