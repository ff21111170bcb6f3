"""What Slurm 26.05 gives that sunk renders, on real 26.05 daemons: slurmctld's own metrics
endpoints (controller.metrics). One small cluster for the module, on 26.05 whatever release the
run defaults to (the spec names it), without accounting or slurmrestd: it boots in a few seconds."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from sunk.runtime.harness import LocalSlurm

from sunk.spec import load_spec
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slurm

ENDPOINTS = ("jobs", "nodes", "partitions", "scheduler", "jobs-users-accts")
HOLD = "#!/bin/sh\ntrue\n"


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    spec = load_spec(
        {
            "name": "r2605",
            "tenant": "test",
            "slurm": {"version": "26.05"},
            "accounting": {"enabled": False},
            "scheduling": {"preemptType": "none", "preemptMode": "off"},
            "controller": {"metrics": True},
            "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 2, "memoryMib": 1024}],
            "partitions": [{"name": "all", "nodesets": ["cpu"], "default": True}],
        }
    )
    with LocalSlurm.start(spec, accounting=False, restapi=False) as cluster:
        yield cluster


def _get(slurm: LocalSlurm, path: str) -> tuple[int, str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{slurm.ports.slurmctld}{path}", timeout=30) as reply:
        return reply.status, reply.headers.get("Content-Type", ""), reply.read().decode()


def _sample(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return None


def test_metrics_type_is_rendered(slurm: LocalSlurm) -> None:
    assert "MetricsType=metrics/openmetrics" in slurm.files["slurm.conf"].splitlines()


def test_slurmctld_lists_and_serves_its_endpoints(slurm: LocalSlurm) -> None:
    status, _, index = _get(slurm, "/metrics")
    assert status == 200
    assert {f"/metrics/{e}" for e in ENDPOINTS} <= {w.strip("':") for w in index.split()}
    for endpoint in ("jobs", "nodes", "partitions", "scheduler"):
        status, kind, text = _get(slurm, f"/metrics/{endpoint}")
        assert status == 200 and kind.startswith("text/plain"), (endpoint, status, kind)
        assert "# TYPE " in text, (endpoint, text[:200])
    _, _, nodes = _get(slurm, "/metrics/nodes")
    assert _sample(nodes, "slurm_nodes") == 1, nodes


def test_job_metrics_follow_the_queue(slurm: LocalSlurm) -> None:
    ids = {slurm.sbatch(HOLD, "-H") for _ in range(3)}
    try:

        def pending() -> float | None:
            value = _sample(_get(slurm, "/metrics/jobs")[2], "slurm_jobs_pending")
            return value if value == len(ids) else None

        assert wait_for("3 held jobs in /metrics/jobs", pending, timeout=60, interval=0.5) == 3
    finally:
        slurm.cancel_all(timeout=60)
