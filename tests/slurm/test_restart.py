"""A slurmctld restart keeps queued and running jobs (state from StateSaveLocation)."""

from __future__ import annotations

import pytest
from sunk.runtime.harness import LocalSlurm

pytestmark = pytest.mark.slurm


def test_restart_keeps_running_and_queued_jobs(acme: LocalSlurm) -> None:
    cpu = str(len([n for n in acme.nodes if n.nodeset == "cpu"]))
    running = acme.sbatch("#!/bin/sh\nsleep 300\n", "-C", "cpu", "-N", cpu)
    acme.wait_job(running, {"RUNNING"})
    queued = acme.sbatch("#!/bin/sh\necho after\n", "-C", "cpu", "-N", cpu, "-o", "/tmp/%j.out")
    assert acme.job_state(queued) == "PENDING"
    before = acme.jail.processes["slurmctld"].pid

    acme.restart_slurmctld()

    assert acme.jail.processes["slurmctld"].pid != before
    assert acme.job_state(running) == "RUNNING"
    assert acme.job_state(queued) == "PENDING"
    # The restarted controller still drives them: the running job's steps are alive, and the
    # queued one starts once it is gone.
    acme.run("scancel", str(running), check=True)
    acme.wait_job(queued, timeout=60)
    assert (acme.root / f"tmp/{queued}.out").read_text() == "after\n"
