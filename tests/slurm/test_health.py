"""sunk's HealthCheckProgram on real Slurm 24.11: slurmd runs it, a failing check drains the node
with the `sunk-health:` reason, a recovered node is resumed, and a drain by anyone else is left
exactly as it was. The node runs the rendered program from the slurmd image's root, as in its pod."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator

import pytest
from sunk.runtime.harness import LocalSlurm

from sunk.render.health import render_health_files
from sunk.spec.cluster import ClusterSpec
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS

pytestmark = pytest.mark.slurm

INTERVAL = 10
"""HealthCheckInterval: the smallest the spec allows, so slurmd's own runs come quickly."""


def _spec() -> ClusterSpec:
    data = load_stack("acme-dev", FIXTURE_STACKS).spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    data["healthCheck"] = {
        "interval": INTERVAL,
        "disk": [{"path": "/tmp", "minFreeMib": 1}],
        "minAvailableMemoryMib": 1,
        "checks": [
            # A flag file per node makes the check fail on that node only; the quote and `;` in the
            # argv prove a word stays a word (the check passes only if it sees them verbatim).
            {
                "name": "flag",
                "command": [
                    "/bin/sh",
                    "-c",
                    'test "$1" = "it\'s; true" || exit 3; '
                    'if [ -e "/tmp/sick-$SLURMD_NODENAME" ]; then echo "flag file present"; exit 1; fi',
                    "sh",
                    "it's; true",
                ],
                "timeout": 5,
            },
            {"name": "gpu-only", "script": "#!/bin/sh\nexit 0\n", "nodesets": ["gpu"]},
        ],
    }
    return ClusterSpec.model_validate(data)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalSlurm]:
    with LocalSlurm.start(_spec(), accounting=False, restapi=False) as slurm:
        yield slurm


def _node(slurm: LocalSlurm, name: str) -> tuple[str, str]:
    out = slurm.run("scontrol", "show", "node", name, check=True).stdout
    state = re.search(r"\bState=(\S+)", out)
    reason = re.search(r"^\s*Reason=(.*?)(?: \[[^]]*\])?$", out, re.M)
    return (state.group(1) if state else "", reason.group(1) if reason else "")


def _wait(slurm: LocalSlurm, name: str, want: str, timeout: float = 12 * INTERVAL) -> tuple[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        state, reason = _node(slurm, name)
        drained = "DRAIN" in state
        if (want == "drained") == drained or time.monotonic() > deadline:
            return state, reason
        time.sleep(0.5)


def _run_program(slurm: LocalSlurm, name: str) -> str:
    """The program as slurmd starts it: root, SLURMD_NODENAME, nothing else."""
    done = slurm.jail.run(
        ["/etc/slurm/health.d/sunk-health.sh"], role="slurmd", env={"SLURMD_NODENAME": name}, check=True
    )
    return done.stdout


def test_a_failing_check_drains_with_the_owned_reason_and_recovery_resumes(cluster: LocalSlurm) -> None:
    node = cluster.nodes[0].name
    flag = cluster.root / f"tmp/sick-{node}"
    assert "DRAIN" not in _node(cluster, node)[0]
    flag.write_text("")
    try:
        state, reason = _wait(cluster, node, "drained")  # slurmd's own run, within an interval or two
        assert "DRAIN" in state
        assert reason == "sunk-health: flag: flag file present"
        others = [n.name for n in cluster.nodes if n.name != node]
        assert all("DRAIN" not in _node(cluster, n)[0] for n in others)
    finally:
        flag.unlink()
    state, reason = _wait(cluster, node, "resumed")
    assert "DRAIN" not in state, (state, reason)


def test_an_admin_drain_is_left_alone_by_passing_and_failing_runs(cluster: LocalSlurm) -> None:
    node = cluster.nodes[1].name
    cluster.run("scontrol", "update", f"nodename={node}", "state=drain", "reason=admin: bad DIMM", check=True)
    try:
        assert _run_program(cluster, node) == ""  # every check passes: nothing to resume of its own
        assert _node(cluster, node) == (_node(cluster, node)[0], "admin: bad DIMM")
        assert "DRAIN" in _node(cluster, node)[0]
        flag = cluster.root / f"tmp/sick-{node}"
        flag.write_text("")
        try:
            out = _run_program(cluster, node)  # fails, but the node is someone else's drain
        finally:
            flag.unlink()
        assert out.strip() == "sunk-health: flag: flag file present"
        assert _node(cluster, node)[1] == "admin: bad DIMM"
        time.sleep(INTERVAL + 2)  # and slurmd's own runs meanwhile did not resume it
        state, reason = _node(cluster, node)
        assert "DRAIN" in state and reason == "admin: bad DIMM"
    finally:
        cluster.run("scontrol", "update", f"nodename={node}", "state=resume", check=True)


def test_the_gpus_check_drains_a_node_missing_a_device_file(cluster: LocalSlurm) -> None:
    gpu = next(n.name for n in cluster.nodes if n.nodeset == "gpu")
    device = cluster.role_root("slurmd") / "dev/nvidia1"
    assert device.exists()  # the harness made the NodeSet's two fake GPUs
    saved = device.stat()
    device.unlink()
    try:
        out = _run_program(cluster, gpu)
        assert out.strip() == "sunk-health: gpus: 1 of 2 GPU device files /dev/nvidiaN present"
        assert _node(cluster, gpu)[1] == "sunk-health: gpus: 1 of 2 GPU device files /dev/nvidiaN present"
    finally:
        os.mknod(device, saved.st_mode, saved.st_rdev)
    assert _run_program(cluster, gpu).strip() == f"sunk-health: all checks pass; resumed {gpu}"
    assert "DRAIN" not in _node(cluster, gpu)[0]


def test_the_syncers_drain_is_not_resumed(cluster: LocalSlurm) -> None:
    node = cluster.nodes[0].name
    cluster.run("scontrol", "update", f"nodename={node}", "state=drain", "reason=sunk: node cordoned", check=True)
    try:
        assert _run_program(cluster, node) == ""
        assert _node(cluster, node)[1] == "sunk: node cordoned"
    finally:
        cluster.run("scontrol", "update", f"nodename={node}", "state=resume", check=True)


def test_a_disk_path_with_a_space_is_one_path(cluster: LocalSlurm) -> None:
    """The program rendered for a disk check on `/tmp/scratch dir` (the last field of its line),
    run in the slurmd root as slurmd runs it: the path reaches df whole."""
    node = cluster.nodes[0].name
    (cluster.root / "tmp/scratch dir").mkdir(exist_ok=True)
    data = _spec().model_dump(mode="json", by_alias=True, exclude_defaults=True)
    data["healthCheck"] = {"disk": [{"path": "/tmp/scratch dir", "minFreeMib": 1_000_000_000}], "gpus": False}
    program = render_health_files(ClusterSpec.model_validate(data))["health.d/sunk-health.sh"]
    path = cluster.role_root("slurmd") / "tmp/sunk-health-space.sh"
    path.write_text(program)
    path.chmod(0o755)
    try:
        # slurmd's own run (every INTERVAL, all checks passing) resumes a sunk-health drain: if one
        # falls between this drain and the read of the reason, the node reads resumed; drain again.
        for _ in range(5):
            done = cluster.jail.run(
                ["/tmp/sunk-health-space.sh"], role="slurmd", env={"SLURMD_NODENAME": node}, check=True
            )
            assert re.fullmatch(
                r"sunk-health: disk: /tmp/scratch dir has \d+ MiB free, below 1000000000", done.stdout.strip()
            ), done.stdout
            state, reason = _node(cluster, node)
            if "DRAIN" in state:
                break
        assert reason == done.stdout.strip(), (state, reason)
    finally:
        path.unlink()
    # The rendered program resumes it, unless slurmd's own run (the same program) did so first.
    out = _run_program(cluster, node).strip()
    assert out in (f"sunk-health: all checks pass; resumed {node}", ""), out
    assert "DRAIN" not in _node(cluster, node)[0]
