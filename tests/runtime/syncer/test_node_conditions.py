"""Selected Node conditions (Node Problem Detector's and the like) drain the tenant's Slurm nodes on
that Node with the condition's words, and the syncer resumes only its own drain once the condition
clears; settings and the Deployment carry the list."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from sunk.runtime.common.settings import SettingsError
from sunk.runtime.slurmrest import Node, PodRef, write_pod_ref
from sunk.runtime.syncer.kube import parse_node, parse_pod
from sunk.runtime.syncer.model import Observed
from sunk.runtime.syncer.plan import Drain, Resume, SetPodRef, plan
from sunk.runtime.syncer.settings import Settings

from sunk.manifests.auth import auth_refs
from sunk.manifests.runtime import deployment
from sunk.spec import load_spec
from sunk.stackfile import load_stack
from tests.support.fakes.syncer import node_object, pod_object
from tests.support.stacks import FIXTURE_STACKS

NS = "tenant"
NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
SELECTED = frozenset({"KernelDeadlock", "ReadonlyFilesystem"})


def condition(kind: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2025-01-01T00:00:00Z"}  # fmt: skip


def observe(*conditions: dict[str, Any], reason: str = "", drained: bool = False) -> Observed:
    node = node_object("k1")
    node["status"]["conditions"] += list(conditions)
    extra = write_pod_ref("", PodRef(NS, "cpu-0", f"uid-{NS}-cpu-0"))
    state = ("IDLE", "DRAIN") if drained else ("IDLE",)
    pod = parse_pod(pod_object(NS, "cpu-0", nodeset="cpu", node_name="k1"), NS)
    assert pod is not None
    return Observed(
        slurm_nodes={"cpu-0": Node(name="cpu-0", state=state, reason=reason, extra=extra)},
        kube_nodes={"k1": parse_node(node)},
        pods=[pod],
        namespace=NS,
        drain_conditions=SELECTED,
    )


def slurm_actions(obs: Observed) -> list[Any]:
    return [a for a in plan(obs, NOW) if isinstance(a, Drain | Resume | SetPodRef)]


def test_a_selected_condition_true_drains_with_its_message() -> None:
    obs = observe(condition("KernelDeadlock", "True", "DockerHung", "task docker:7 blocked for more than 300 seconds"))
    assert slurm_actions(obs) == [
        Drain("cpu-0", "sunk: Node k1 condition KernelDeadlock (task docker:7 blocked for more than 300 seconds)")
    ]


def test_two_conditions_are_named_together_and_the_reason_only_when_no_message() -> None:
    obs = observe(condition("ReadonlyFilesystem", "True", "FilesystemIsReadOnly"), condition("KernelDeadlock", "True"))
    assert slurm_actions(obs) == [
        Drain("cpu-0", "sunk: Node k1 condition KernelDeadlock, ReadonlyFilesystem (FilesystemIsReadOnly)")
    ]


def test_unselected_false_or_unknown_conditions_do_not_drain() -> None:
    obs = observe(
        condition("FrequentKubeletRestart", "True", "x", "y"),
        condition("KernelDeadlock", "False", "KernelHasNoDeadlock", "kernel has no deadlock"),
        condition("ReadonlyFilesystem", "Unknown"),
    )
    assert slurm_actions(obs) == []
    assert slurm_actions(replace(obs, drain_conditions=frozenset())) == []


def test_the_condition_clearing_resumes_our_drain_only() -> None:
    clear = condition("KernelDeadlock", "False", "KernelHasNoDeadlock")
    ours = "sunk: Node k1 condition KernelDeadlock (task blocked)"
    assert slurm_actions(observe(clear, reason=ours, drained=True)) == [Resume("cpu-0")]
    assert slurm_actions(observe(clear, reason="admin: bad DIMM", drained=True)) == []
    # Still True, already drained by us with the same words: nothing to do; an admin's drain stays.
    still = condition("KernelDeadlock", "True", "", "task blocked")
    assert slurm_actions(observe(still, reason=ours, drained=True)) == []
    assert slurm_actions(observe(still, reason="admin: bad DIMM", drained=True)) == []


def test_a_changed_message_rewrites_our_reason() -> None:
    now = condition("KernelDeadlock", "True", "", "task kworker blocked")
    old = "sunk: Node k1 condition KernelDeadlock (task docker blocked)"
    assert slurm_actions(observe(now, reason=old, drained=True)) == [
        Drain("cpu-0", "sunk: Node k1 condition KernelDeadlock (task kworker blocked)")
    ]


BASE = {"SUNK_CLUSTER": "c", "SUNK_NAMESPACE": "n", "SUNK_SLURMRESTD_URL": "http://r", "SUNK_JWT_KEY_FILE": "/k"}


def test_settings_read_a_comma_list() -> None:
    s = Settings.from_env({**BASE, "SUNK_DRAIN_CONDITIONS": "KernelDeadlock, ReadonlyFilesystem,"})
    assert s.drain_conditions == ("KernelDeadlock", "ReadonlyFilesystem")
    assert Settings.from_env(BASE).drain_conditions == ()
    with pytest.raises(SettingsError, match="SUNK_SYNC_INTERVAL"):
        Settings.from_env({**BASE, "SUNK_SYNC_INTERVAL": "0"})


def test_the_syncer_deployment_carries_the_stack_list() -> None:
    data = load_stack("acme-dev", FIXTURE_STACKS).spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    data["healthCheck"] = {"enabled": False, "nodeConditions": ["KernelDeadlock", "example.com/GPUXid"]}
    spec = load_spec(data)
    env = deployment(spec, auth_refs(spec), "syncer")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "SUNK_DRAIN_CONDITIONS", "value": "KernelDeadlock,example.com/GPUXid"} in env
    plain = load_stack("acme-dev", FIXTURE_STACKS).spec
    env = deployment(plain, auth_refs(plain), "syncer")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert "SUNK_DRAIN_CONDITIONS" not in {e["name"] for e in env}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["Ready"], "nodeConditions: Ready is the syncer's already"),
        (["Kernel Deadlock"], r"nodeConditions\[0\]: 'Kernel Deadlock' is not valid"),
        (["a,b"], r"nodeConditions\[0\]: 'a,b' is not valid"),
    ],
)
def test_bad_condition_types_name_the_field(value: list[str], message: str) -> None:
    data = load_stack("acme-dev", FIXTURE_STACKS).spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    data["healthCheck"] = {"nodeConditions": value}
    with pytest.raises(Exception, match=message):
        load_spec(data)
