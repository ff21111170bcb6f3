"""`scontrol show nodes` read with a JWT (ScontrolNodes) against REAL slurmctld 24.11: it reports
every node exactly as slurmrestd does, across the states the syncer acts on, and it runs from the
runtime image as its unprivileged user with nothing but slurm.conf and a token."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.harness.image_process import RuntimeImage
from sunk.runtime.slurmrest import JwtMinter, SlurmRestClient
from sunk.runtime.slurmrest.nodestate import NodeState
from sunk.runtime.slurmrest.nodetext import ScontrolError, ScontrolNodes

from sunk.spec.cluster import ClusterSpec

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]

SPEC = ClusterSpec.model_validate(
    {
        "name": "txt",
        "tenant": "acme",
        "nodesets": [
            {"name": "cpu", "replicas": 2, "cpus": 2, "memoryMib": 1024},
            # CLOUD nodes Slurm keeps powered down (no slurmd): IDLE+CLOUD+POWERED_DOWN.
            {"name": "pw", "maxNodes": 2, "cpus": 1, "memoryMib": 512, "power": {"minNodes": 0}},
        ],
        "partitions": [{"name": "batch", "nodesets": ["cpu", "pw"], "default": True}],
        "login": {"enabled": False},
    }
)
EXTRA = '{"sunk": "pod x y"}  '
REASON = "sunk: cordoned [k@node] Extra=q"


@pytest.fixture(scope="module", params=["munge", "slurm"])
def slurm(request: pytest.FixtureRequest) -> Iterator[LocalSlurm]:
    """Both auth types: scontrol loads the cluster's AuthType plugin (auth/munge, auth/slurm) even
    when SLURM_JWT makes it authenticate with auth/jwt, and the runtime image has neither key."""
    spec = SPEC.model_copy(update={"auth": SPEC.auth.model_copy(update={"type": request.param})})
    nodes = [SimNode("cpu-0", "cpu"), SimNode("cpu-1", "cpu")]
    with LocalSlurm.start(spec, accounting=False, nodes=nodes) as cluster:
        # A job on one of cpu-0's two CPUs, then a drain: MIXED+DRAIN (draining).
        job = cluster.sbatch("#!/bin/sh\nexec sleep 600\n", "-w", "cpu-0", "-n", "1")
        deadline = time.monotonic() + 60
        while cluster.job_state(job) != "RUNNING" and time.monotonic() < deadline:
            time.sleep(0.2)
        cluster.run("scontrol", "update", "NodeName=cpu-0", "State=DRAIN", "Reason=admin: disk", check=True)
        # A drain whose reason looks like a stamp and a field, and an Extra with spaces: IDLE+DRAIN.
        cluster.run("scontrol", "update", "NodeName=cpu-1", "State=DRAIN", f"Reason={REASON}", check=True)
        cluster.run("scontrol", "update", "NodeName=cpu-1", f"Extra={EXTRA}", check=True)
        cluster.run(
            "scontrol", "create", "reservation", "ReservationName=maint", "Nodes=cpu-1", "StartTime=now",
            "Duration=60", "Users=root", "Flags=MAINT", check=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60  # the reservation marks its node on slurmctld's next pass
        while (
            "MAINTENANCE" not in cluster.run("scontrol", "show", "node", "cpu-1").stdout and time.monotonic() < deadline
        ):
            time.sleep(0.5)
        # Declared, never registered (FUTURE), and one of them set DOWN with a reason.
        cluster.run("scontrol", "create", "NodeName=fut-[0-1]", "State=FUTURE", "CPUs=1", "RealMemory=100", check=True)
        cluster.run("scontrol", "update", "NodeName=fut-1", "State=DOWN", "Reason=gone away", check=True)
        # A node only in a hidden partition (an admin's): listed all the same.
        cluster.run("scontrol", "create", "NodeName=hid-0", "State=FUTURE", "CPUs=1", "RealMemory=100", check=True)
        cluster.run("scontrol", "update", "NodeName=hid-0", "State=DOWN", "Reason=hidden", check=True)
        cluster.run("scontrol", "create", "PartitionName=secret", "Nodes=hid-0", "Hidden=YES", check=True)
        yield cluster


@pytest.fixture(scope="module")
def rest(slurm: LocalSlurm) -> Iterator[SlurmRestClient]:
    with SlurmRestClient(
        slurm.rest_url, user="slurm", token=JwtMinter.from_file(slurm.jwt_key_path, "slurm")
    ) as client:
        yield client


def by_name(states: list[NodeState]) -> dict[str, NodeState]:
    return {n.name: n for n in states}


def seen(states: list[NodeState]) -> dict[str, tuple[str, frozenset[str], str, str]]:
    """What the syncer reads of a node. The flags' order differs between the two (nodetext.py)."""
    return {n.name: (n.base_state, n.flags, n.reason, n.extra) for n in states}


def same_as_rest(reader: ScontrolNodes, rest: SlurmRestClient) -> dict[str, NodeState]:
    """Both reads, retried if a node changed between them (a power-save pass, a ping)."""
    for _ in range(20):
        text, json = reader.node_states(future=True), rest.node_states(future=True)
        if seen(text) == seen(json):
            return by_name(text)
        time.sleep(1)
    assert seen(text) == seen(json)
    return by_name(text)


def test_every_state_reads_as_slurmrestd_reports_it(slurm: LocalSlurm, rest: SlurmRestClient) -> None:
    # scontrol from the slurmrestd image's root (the Slurm clients), authenticated only by SLURM_JWT.
    reader = ScontrolNodes(
        JwtMinter.from_file(slurm.jwt_key_path, "slurm"),
        "/etc/slurm/slurm.conf",
        command=slurm.jail.command(["scontrol"], role="slurmrestd", inherit=True),
    )
    nodes = same_as_rest(reader, rest)
    assert set(nodes) == {"cpu-0", "cpu-1", "pw-0", "pw-1", "fut-0", "fut-1", "hid-0"}
    # One of two CPUs busy: scontrol prints MIXED, slurmrestd (and so the reader) ALLOCATED.
    assert nodes["cpu-0"].state[:2] == ("ALLOCATED", "DRAIN") and nodes["cpu-0"].reason == "admin: disk"
    assert {"IDLE", "DRAIN", "MAINTENANCE"} <= set(nodes["cpu-1"].state), nodes["cpu-1"]
    assert (nodes["cpu-1"].reason, nodes["cpu-1"].extra) == (REASON, EXTRA)
    assert {"IDLE", "CLOUD", "POWERED_DOWN"} <= set(nodes["pw-0"].state)
    assert nodes["fut-0"].base_state == "FUTURE"
    assert (nodes["fut-1"].base_state, nodes["fut-1"].reason) == ("DOWN", "gone away")
    # Without --future, FUTURE nodes are left out, as slurmrestd leaves them out without ?flags=FUTURE.
    assert "fut-0" not in by_name(reader.node_states()) and "fut-0" not in by_name(rest.node_states())
    assert "fut-1" in by_name(reader.node_states())


def test_from_the_runtime_image_with_a_token_only(
    slurm: LocalSlurm, rest: SlurmRestClient, runtime_image: RuntimeImage
) -> None:
    """The syncer's container: the runtime image's scontrol as its user (no Slurm or munge key in
    the image), slurm.conf as the Deployment mounts it, SLURM_JWT minted from the JWT key."""
    assert f"AuthType=auth/{slurm.spec.auth.type}\n" in (slurm.etc / "slurm.conf").read_text()
    conf = runtime_image.secret_file(slurm.etc / "slurm.conf")
    command = runtime_image.jail.command(["scontrol"], role="runtime", user=runtime_image.user, inherit=True)
    assert not (runtime_image.jail.root("runtime") / "etc/munge/munge.key").exists()
    reader = ScontrolNodes(JwtMinter.from_file(slurm.jwt_key_path, "slurm"), conf, command=command)
    assert set(same_as_rest(reader, rest)) == {"cpu-0", "cpu-1", "pw-0", "pw-1", "fut-0", "fut-1", "hid-0"}
    # A token slurmctld can't verify is refused: the read fails (and the syncer falls back).
    forged = ScontrolNodes(JwtMinter(b"x" * 32, "slurm"), conf, command=command)
    with pytest.raises(ScontrolError, match=r"exit 1: .*authentication"):
        forged.node_states()
