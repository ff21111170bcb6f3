"""Pure plan tests for NodeSets with `power` (scale to zero through Slurm power saving): Slurm's
power state of the NodeSet's CLOUD nodes decides the members."""

from __future__ import annotations

from typing import Any

from sunk.runtime.operator.model import Pod, WriteStatus
from sunk.runtime.operator.plan import members, plan
from sunk.runtime.slurmrest import Node as SlurmNode

from sunk.manifests.nodeset_pod import slurmd_command, template_hash
from tests.support.fakes.operator import slurm_node

from .test_plan import KEYS, NOW, acts, cpu, observe, summary
from .test_plan import pod as plain_pod


def power(**kw: Any) -> Any:
    return cpu(replicas=None, maxNodes=4, power={"minNodes": 0, "suspendTime": 60, **kw})


def pod(n: int, **kw: Any) -> Pod:
    """A pod up to date with power()'s template."""
    return plain_pod(n, h=template_hash(power(), KEYS), **kw)


def slurmd_part(command: list[str]) -> list[str]:
    """The slurmd command, without the sunk-init wrapper acme-dev's s6 one-shot adds."""
    return command[command.index("slurmd") :]


def cloud(n: int, *state: str, features: tuple[str, ...] = ("cpu", "x86")) -> SlurmNode:
    return slurm_node(f"cpu-{n}", *state, "CLOUD", features=list(features))


def down(n: int) -> SlurmNode:
    return cloud(n, "IDLE", "POWERED_DOWN")


def test_all_powered_down_means_no_pod() -> None:
    out = acts(observe([], [down(i) for i in range(4)], spec=power()))
    assert summary(out) == []


def test_a_node_slurm_powers_up_gets_its_pod() -> None:
    slurm = [cloud(0, "ALLOCATED", "NOT_RESPONDING", "POWERING_UP"), down(1), cloud(2, "IDLE", "POWERING_UP"), down(3)]
    out = acts(observe([], slurm, spec=power()))
    assert summary(out) == [("CreatePod", "cpu-0"), ("CreatePod", "cpu-2")]
    # The CLOUD node of slurm.conf registers without -Z/--conf, reporting its start as its boot.
    command = slurmd_part(out[0].pod["spec"]["containers"][0]["command"])
    assert command == ["slurmd", "-D", "-b", "-N", "cpu-0"]


def test_min_nodes_run_even_when_slurm_has_them_powered_down() -> None:
    out = acts(observe([], [down(i) for i in range(4)], spec=power(minNodes=2)))
    assert summary(out) == [("CreatePod", "cpu-0"), ("CreatePod", "cpu-1")]


def test_a_pod_whose_node_slurm_powers_down_is_deleted_without_a_drain() -> None:
    pods = [pod(0), pod(1)]
    slurm = [cloud(0, "IDLE", "POWERING_DOWN"), cloud(1, "IDLE"), down(2), down(3)]
    out = acts(observe(pods, slurm, spec=power()))
    assert summary(out) == [("DeletePod", "cpu-0")]
    assert "powered its node down" in out[0].why


def test_a_busy_node_keeps_its_pod() -> None:
    pods = [pod(0)]
    out = acts(observe(pods, [cloud(0, "ALLOCATED"), down(1), down(2), down(3)], spec=power()))
    assert summary(out) == []


def test_cloud_nodes_are_never_removed_from_slurm() -> None:
    # A dynamic-node NodeSet removes the Slurm node of a gone pod; CLOUD nodes stay in slurm.conf.
    out = acts(observe([], [cloud(0, "IDLE"), down(1), down(2), down(3)], spec=power()))
    assert summary(out) == [("CreatePod", "cpu-0")]


def test_slurm_unreadable_keeps_every_pod() -> None:
    pods = [pod(0), pod(3)]
    want, victims = members(observe(pods, None, spec=power(minNodes=1)))
    assert sorted(want) == ["cpu-0", "cpu-3"] and victims == []
    assert summary(acts(observe(pods, None, spec=power(minNodes=1)))) == []


def test_nodes_of_other_nodesets_and_beyond_max_nodes_are_ignored() -> None:
    slurm = [cloud(0, "IDLE", "POWERING_UP", features=("gpu",)), cloud(9, "IDLE", "POWERING_UP"), down(1)]
    want, _ = members(observe([], slurm, spec=power()))
    assert want == {}


def test_a_pod_beyond_max_nodes_is_scaled_in_by_drain() -> None:
    pods = [pod(5)]
    slurm = [slurm_node("cpu-5", "IDLE", "CLOUD", features=["cpu", "x86"]), down(0)]
    out = acts(observe(pods, slurm, spec=power()))
    assert summary(out) == [("Drain", "cpu-5")]


def test_status_counts_what_slurm_wants() -> None:
    slurm = [cloud(0, "IDLE"), cloud(1, "IDLE", "POWERING_UP"), down(2), down(3)]
    (status,) = [a for a in plan(observe([pod(0)], slurm, spec=power()), NOW) if isinstance(a, WriteStatus)]
    assert status.status["desired"] == 2


def test_slurmd_args_follow_the_cloud_command() -> None:
    spec = cpu(replicas=None, maxNodes=4, power={}, slurmdArgs=["-v"])
    assert slurmd_part(slurmd_command(spec, "cpu-1")) == ["slurmd", "-D", "-b", "-N", "cpu-1", "-v"]
