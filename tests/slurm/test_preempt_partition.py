"""globex-dev: no accounting, preemption by partition PriorityTier (preempt/partition_prio)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from sunk.runtime.harness import LocalSlurm

from sunk import naming
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def globex() -> Iterator[LocalSlurm]:
    spec = load_stack("globex-dev", FIXTURE_STACKS).spec
    assert not spec.accounting.enabled
    with LocalSlurm.start(spec) as slurm:
        yield slurm


def test_no_slurmdbd_runs_without_accounting(globex: LocalSlurm) -> None:
    assert "slurmdbd" not in globex.jail.processes
    assert "slurmdbd.conf" not in globex.files
    config = globex.run("scontrol", "show", "config", check=True).stdout
    assert re.search(r"^AccountingStorageType\s+= \(null\)$", config, re.M), config


def test_slurmrestd_serves_without_accounting(globex: LocalSlurm) -> None:
    # Started with only openapi/slurmctld: the default plugin set fails without slurmdbd.
    headers = {"X-SLURM-USER-NAME": "slurm", "X-SLURM-USER-TOKEN": globex.token()}
    resp = httpx.get(f"{globex.rest_url}/slurm/{naming.SLURMRESTD_API}/ping", headers=headers, timeout=30)
    assert resp.status_code == 200, resp.text
    assert resp.json()["pings"][0]["pinged"] == "UP"


def test_higher_tier_partition_preempts_and_requeues(globex: LocalSlurm) -> None:
    nodes = str(len(globex.nodes))
    # Whole nodes: without --exclusive both jobs fit side by side (DefMemPerCPU) and nothing is preempted.
    low = globex.sbatch("#!/bin/sh\nsleep 300\n", "-p", "normal", "-N", nodes, "--exclusive")
    globex.wait_job(low, {"RUNNING"})
    urgent = globex.sbatch("#!/bin/sh\nsleep 1\n", "-p", "urgent", "-N", nodes)
    globex.wait_job(urgent, {"RUNNING", "COMPLETED"}, timeout=120)
    info = globex.run("scontrol", "show", "job", "-o", str(low), check=True).stdout
    assert "JobState=PENDING" in info
    assert "Restarts=0" not in info
    globex.wait_job(urgent, {"COMPLETED"}, timeout=120)
    globex.cancel_all()
