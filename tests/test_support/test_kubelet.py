"""The kubelet and eviction rules kubesim applies, table-driven on literal objects.

What the model leaves out is listed in tests.support.kubesim's docstring (no CPU manager,
no device IDs, no pressure eviction, no PDB status); these tests pin what it does model."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from tests.support import kubelet


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("1.5", Fraction(3, 2)),
        ("1Ki", Fraction(1024)),
        ("1Mi", Fraction(2**20)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("1k", Fraction(1000)),
        ("2M", Fraction(2_000_000)),
        ("1G", Fraction(10**9)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),  # an exponent, not exa
        ("1E", Fraction(10**18)),  # exa
        ("12e-3", Fraction(12, 1000)),
        (".5", Fraction(1, 2)),
        (3, Fraction(3)),
    ],
)
def test_quantities(text: str | int, value: Fraction) -> None:
    assert kubelet.quantity(text) == value


@pytest.mark.parametrize("bad", ["", "1.2.3", "5 Gi", "1mi", "Gi", "1KiB"])
def test_bad_quantities_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match=r"resource\.Quantity"):
        kubelet.quantity(bad)


def c(
    name: str = "c", restart: str | None = None, limits: dict[str, str] | None = None, **requests: str
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": name,
        "resources": {"requests": {k.replace("_", "-"): v for k, v in requests.items()}},
    }
    if limits:
        out["resources"]["limits"] = limits
    if restart:
        out["restartPolicy"] = restart
    return out


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"containers": [c(cpu="500m", memory="1Gi"), c(cpu="1500m")]}, {"cpu": 2000, "memory": 2**30}),
        # A plain init container counts only if larger than all containers together.
        ({"containers": [c(cpu="1")], "initContainers": [c(cpu="3")]}, {"cpu": 3000}),
        ({"containers": [c(cpu="2")], "initContainers": [c(cpu="1")]}, {"cpu": 2000}),
        # A native sidecar adds to the containers and runs beside later init containers.
        (
            {"containers": [c(cpu="1")], "initContainers": [c("side", "Always", cpu="500m"), c("late", cpu="2")]},
            {"cpu": 2500},
        ),
        ({"containers": [c(cpu="1")], "initContainers": [c("side", "Always", cpu="500m")]}, {"cpu": 1500}),
        # Overhead on top; a limit stands in for a missing request (API server defaulting).
        ({"containers": [c(cpu="1")], "overhead": {"cpu": "250m"}}, {"cpu": 1250}),
        ({"containers": [c(limits={"nvidia.com/gpu": "2"})]}, {"nvidia.com/gpu": 2}),
        ({"containers": [c(ephemeral_storage="1G")]}, {"ephemeral-storage": 10**9}),
        # Millicores round up, as Quantity.MilliValue does.
        ({"containers": [c(cpu="0.0001")]}, {"cpu": 1}),
    ],
)
def test_pod_requests(spec: dict[str, Any], want: dict[str, int]) -> None:
    assert {k: v for k, v in kubelet.pod_requests(spec).items() if v} == want


def node(**alloc: str) -> dict[str, Any]:
    return {"metadata": {"name": "n1"}, "status": {"allocatable": {"pods": "110", **alloc}}}


def pod(phase: str = "Running", **requests: str) -> dict[str, Any]:
    # limits named: otherwise **requests (str values) could fill it, as far as mypy knows.
    return {"spec": {"containers": [c(limits=None, **requests)]}, "status": {"phase": phase}}


NODE = node(cpu="8", memory="32Gi", **{"ephemeral-storage": "100Gi", "nvidia.com/gpu": "8"})


@pytest.mark.parametrize(
    ("new", "node", "others", "reason", "message"),
    [
        (pod(cpu="1"), NODE, [pod(cpu="7")], None, None),
        (
            pod(cpu="2"),
            NODE,
            [pod(cpu="7")],
            "OutOfcpu",
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 7000, capacity: 8000",
        ),
        # Terminated pods free their requests; Pending (admitted, starting) ones do not.
        (pod(cpu="2"), NODE, [pod("Succeeded", cpu="7")], None, None),
        (pod(cpu="2"), NODE, [pod("Pending", cpu="7")], "OutOfcpu", None),
        (pod(cpu="2"), NODE, [pod("Failed", cpu="7")], None, None),
        (
            pod(memory="1Gi"),
            NODE,
            [pod(memory="31.5Gi")],
            "OutOfmemory",
            "Pod was rejected: Node didn't have enough resource: memory, requested: 1073741824, "
            "used: 33822867456, capacity: 34359738368",
        ),
        (pod(ephemeral_storage="1Gi"), NODE, [pod(ephemeral_storage="100Gi")], "OutOfephemeral-storage", None),
        (
            pod(**{"nvidia.com/gpu": "1"}),
            NODE,
            [pod(**{"nvidia.com/gpu": "8"})],
            "OutOfnvidia.com/gpu",
            "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 8, capacity: 8",
        ),
        # An extended resource the Node does not advertise is dropped by the kubelet.
        (pod(**{"example.com/fpga": "1"}), NODE, [], None, None),
        # The pod count: allocatable "pods".
        (
            pod(),
            node(cpu="8", memory="1Gi", pods="2"),
            [pod(), pod()],
            "OutOfpods",
            "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2",
        ),
        # Pods count before cpu (the kubelet reports the first failure only).
        (pod(cpu="9"), node(cpu="8", memory="1Gi", pods="1"), [pod()], "OutOfpods", None),
        (pod(cpu="9", memory="64Gi"), NODE, [], "OutOfcpu", None),
    ],
)
def test_admission(
    new: dict[str, Any], node: dict[str, Any], others: list[dict[str, Any]], reason: str | None, message: str | None
) -> None:
    verdict = kubelet.admit(new, node, others)
    assert (verdict.reason if verdict else None) == reason
    if message is not None:
        assert verdict is not None and verdict.message == message


def labelled(name: str, ready: bool = True, phase: str = "Running", **labels: str) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "conditions": [{"type": "Ready", "status": str(ready)}]}
    return {"metadata": {"name": name, "labels": labels or {"app": "x"}}, "status": status}


def pdb(name: str = "budget", selector: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    sel = {"matchLabels": {"app": "x"}} if selector is None else selector
    return {"metadata": {"name": name}, "spec": {"selector": sel, **spec}}


THREE = [labelled("a"), labelled("b"), labelled("c")]


@pytest.mark.parametrize(
    ("target", "pdbs", "pods", "code"),
    [
        (THREE[0], [], THREE, None),
        (THREE[0], [pdb(minAvailable=2)], THREE, None),
        (THREE[0], [pdb(minAvailable=3)], THREE, 429),
        (THREE[0], [pdb(minAvailable="67%")], THREE, 429),  # ceil(2.01) = 3 must stay
        (THREE[0], [pdb(minAvailable="66%")], THREE, None),  # ceil(1.98) = 2
        (THREE[0], [pdb(maxUnavailable=1)], THREE, None),
        (THREE[0], [pdb(maxUnavailable=0)], THREE, 429),
        (THREE[0], [pdb(maxUnavailable="34%")], THREE, None),  # rounds up to 2 unavailable
        # One of three already unready: the budget is spent.
        (THREE[0], [pdb(maxUnavailable=1)], [*THREE[:2], labelled("c", ready=False)], 429),
        # ...but the unready one itself may go while the budget holds (IfHealthyBudget).
        (labelled("c", ready=False), [pdb(minAvailable=2)], [*THREE[:2], labelled("c", ready=False)], None),
        (labelled("c", ready=False), [pdb(minAvailable=3)], [*THREE[:2], labelled("c", ready=False)], 429),
        (
            labelled("c", ready=False),
            [pdb(minAvailable=3, unhealthyPodEvictionPolicy="AlwaysAllow")],
            [*THREE[:2], labelled("c", ready=False)],
            None,
        ),
        # Pending pods skip the PDB check; selectors that do not match leave the pod unprotected.
        (labelled("p", phase="Pending"), [pdb(minAvailable=3)], THREE, None),
        (THREE[0], [pdb(minAvailable=3, selector={"matchLabels": {"app": "y"}})], THREE, None),
        (
            THREE[0],
            [pdb(minAvailable=3, selector={"matchExpressions": [{"key": "app", "operator": "In", "values": ["x"]}]})],
            THREE,
            429,
        ),
        (THREE[0], [pdb(minAvailable=3, selector={})], THREE, 429),  # empty selector: every pod
        (THREE[0], [pdb("one", minAvailable=1), pdb("two", minAvailable=1)], THREE, 500),
    ],
)
def test_eviction(
    target: dict[str, Any], pdbs: list[dict[str, Any]], pods: list[dict[str, Any]], code: int | None
) -> None:
    refusal = kubelet.eviction(target, pdbs, pods)
    assert (refusal.code if refusal else None) == code
    if code == 429:
        assert (
            refusal is not None
            and refusal.message == "Cannot evict pod as it would violate the pod's disruption budget."
        )
