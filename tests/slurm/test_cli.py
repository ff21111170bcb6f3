"""`sunk demo` and `sunk slurm-up` end to end (real daemons)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sunk.cli import main

pytestmark = pytest.mark.slurm


def test_demo_boots_runs_a_multi_node_job_and_tears_down(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "acme-dev"]) == 0
    out = capsys.readouterr().out
    assert "✓ acme-dev: valid" in out
    assert "sample job 1: COMPLETED" in out
    tasks = [line for line in out.splitlines() if ": task " in line]
    assert len(tasks) == 2 and len({t.split(" on ")[1].split()[0] for t in tasks}) == 2
    assert "submitted-via-sunk" in out  # sacct shows job_submit.lua's comment
    assert "SwitchName=spine-0 " in out
    roots = next(line.split(": ", 1)[1] for line in out.splitlines() if "  roots:" in line)
    # Every daemon ran from its role's image; the roots are gone after the demo.
    assert roots.endswith("(slurmctld, slurmd, login, mariadb, slurmdbd, slurmrestd)"), roots
    assert not Path(roots.split()[0]).exists()


def test_demo_of_an_unknown_stack_fails(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "no-such-stack"]) == 1
    assert "no-such-stack" in capsys.readouterr().err


def test_slurm_up_serves_until_terminated() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sunk", "slurm-up", "globex-dev", "--no-accounting"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        clients = [line.split()[3] for line in lines if "run Slurm clients:" in line]
        assert clients, "".join(lines)
        client = clients[0]
        sinfo = subprocess.run([client, "sinfo", "-h", "-o", "%P %D %T"], capture_output=True, text=True, timeout=30)
        assert sinfo.stdout.split("\n")[0].split() == ["normal*", "2", "idle"], sinfo
        os.kill(proc.pid, signal.SIGTERM)
        rest = proc.stdout.read()
        assert proc.wait(30) == 0
        assert "torn down" in rest
        assert not Path(client).exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
