"""Accounting through sacct and slurmrestd's slurmdb API; slurmrestd speaks our API version."""

from __future__ import annotations

import httpx
import pytest
from sunk.runtime.harness import LocalSlurm

from sunk import naming

pytestmark = pytest.mark.slurm

API = naming.SLURMRESTD_API


def _headers(slurm: LocalSlurm, user: str = "slurm") -> dict[str, str]:
    return {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": slurm.token(user, lifespan=300)}


@pytest.fixture(scope="module")
def finished_job(acme_cluster: LocalSlurm) -> int:
    job = acme_cluster.sbatch("#!/bin/sh\necho accounted\n", "-J", "acct-probe", "-C", "cpu", "-o", "/dev/null")
    acme_cluster.wait_job(job)
    acme_cluster.wait_accounted(job)
    return job


def test_sacct_records_the_job_with_its_comment(acme: LocalSlurm, finished_job: int) -> None:
    out = acme.run(
        "sacct", "-X", "-n", "-P", "-j", str(finished_job), "-o", "JobID,JobName,State,Comment,Cluster", check=True
    )
    assert out.stdout.strip().split("|") == [
        str(finished_job),
        "acct-probe",
        "COMPLETED",
        "submitted-via-sunk",  # set by the stack's job_submit.lua, stored by AccountingStoreFlags
        acme.spec.name,
    ]


def test_slurmdb_rest_api_lists_the_job(acme: LocalSlurm, finished_job: int) -> None:
    resp = httpx.get(
        f"{acme.rest_url}/slurmdb/{API}/jobs",
        params={"job_name": "acct-probe"},
        headers=_headers(acme),
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["errors"] == []
    jobs = {j["job_id"]: j for j in body["jobs"]}
    assert jobs[finished_job]["state"]["current"] == ["COMPLETED"]
    assert jobs[finished_job]["comment"]["job"] == "submitted-via-sunk"
    assert body["meta"]["plugin"]["data_parser"] == f"data_parser/{API}"


def test_slurmrestd_pings_with_our_api_version(acme: LocalSlurm) -> None:
    resp = httpx.get(f"{acme.rest_url}/slurm/{API}/ping", headers=_headers(acme), timeout=30)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [p["pinged"] for p in body["pings"]] == ["UP"]
    version = body["meta"]["slurm"]["version"]
    assert f"{version['major']}.{version['minor']:0>2}" == acme.spec.slurm.version


def test_openapi_document_serves_our_api_version(acme: LocalSlurm) -> None:
    resp = httpx.get(f"{acme.rest_url}/openapi/v3", headers=_headers(acme), timeout=30)
    assert resp.status_code == 200, resp.text
    paths = resp.json()["paths"]
    assert f"/slurm/{API}/ping/" in paths
    assert f"/slurmdb/{API}/jobs/" in paths
    assert f"/slurm/{API}/node/{{node_name}}" in paths


def test_rest_without_a_token_is_refused(acme: LocalSlurm) -> None:
    resp = httpx.get(f"{acme.rest_url}/slurm/{API}/ping", timeout=30)
    assert resp.status_code == 401


def test_slurmrestd_restarts_on_the_same_url(acme: LocalSlurm) -> None:
    acme.stop_slurmrestd()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{acme.rest_url}/slurm/{API}/ping", timeout=5)
    acme.start_slurmrestd()
    resp = httpx.get(f"{acme.rest_url}/slurm/{API}/ping", headers=_headers(acme), timeout=30)
    assert resp.status_code == 200
