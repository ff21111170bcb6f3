"""A release upgrade's rolling update waits for slurmctld: while Slurm answers at an older release
than the NodeSet's slurmVersion, no outdated slurmd pod is drained or deleted (a slurmd newer than
slurmctld can't register, and slurmctld's pod may wait on slurmdbd's conversion, which may fail
and be set back). Seen in the local upgrade drill: at `kubectl apply` of 24.11 -> 26.05, the
operator still read Slurm through the old slurmrestd and replaced an idle slurmd before slurmctld
moved; the new pod could not register."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sunk.runtime.operator.model import Observed
from sunk.runtime.operator.plan import UPDATE, behind
from sunk.runtime.slurmrest import SlurmRestClient, StaticToken

from sunk import keys

from .test_plan import acts, cpu, node, observe, pod, summary
from .test_reconcile import NS, World

OLD = "template-of-24.11"


def _observed(answered: str | None, **spec: object) -> Observed:
    observed = observe([pod(i, h=OLD) for i in range(3)], [node(i) for i in range(3)], spec=cpu(replicas=3, **spec))
    return observed.__class__(**{**observed.__dict__, "slurm_release": answered})


@pytest.mark.parametrize("spec", [{}, {"updateStrategy": {"force": True}}, {"updateStrategy": {"maxUnavailable": 3}}])
def test_outdated_pods_wait_while_slurm_answers_at_an_older_release(spec: dict[str, object]) -> None:
    assert cpu().slurm_version == "26.05"
    assert summary(acts(_observed("24.11", **spec))) == []


def test_the_roll_goes_on_once_slurm_answers_at_the_nodesets_release_or_a_later_one() -> None:
    assert summary(acts(_observed("26.05"))) == [("Drain", "cpu-2")]
    assert summary(acts(_observed("26.11"))) == [("Drain", "cpu-2")]
    # Unknown (a slurmrestd reply without meta): as before the hold existed.
    assert summary(acts(_observed(None))) == [("Drain", "cpu-2")]


def test_a_drain_the_update_left_is_resumed_while_it_waits() -> None:
    base = observe(
        [pod(i, h=OLD) for i in range(3)],
        [node(0), node(1), node(2, "IDLE", "DRAIN", reason=UPDATE)],
        spec=cpu(replicas=3),
    )
    held = base.__class__(**{**base.__dict__, "slurm_release": "24.11"})
    (resume,) = acts(held)
    assert summary([resume]) == [("Resume", "cpu-2")]
    assert "slurmctld answers at 24.11" in resume.why


@pytest.mark.parametrize(
    ("answered", "release", "held"),
    [("24.11", "26.05", True), ("26.05", "26.05", False), ("26.05", "24.11", False), (None, "26.05", False)],
)
def test_behind(answered: str | None, release: str, held: bool) -> None:
    assert behind(answered, release) is held


def test_the_reconciler_holds_the_update_until_slurm_answers_at_the_new_release() -> None:
    w = World(replicas=3)
    w.slurm.answers_at = "26.05"
    w.settle()
    w.kube.nodesets[(NS, "research-cpu")]["spec"]["configHash"] = "v2"
    w.slurm.answers_at = "24.11"  # slurmctld has not moved yet: the old slurmrestd answers
    w.settle()
    hashes = {p["metadata"]["annotations"][keys.CONFIG_HASH] for p in w.kube.pods.values()}
    assert hashes != {"v2"} and len(w.kube.pods) == 3
    assert not any(n.drain for n in w.slurm.nodes.values())
    w.slurm.answers_at = "26.05"
    for _ in range(30):
        w.settle(rounds=1)
        w.now += timedelta(seconds=1)
    assert {p["metadata"]["annotations"][keys.CONFIG_HASH] for p in w.kube.pods.values()} == {"v2"}


@pytest.mark.parametrize(
    ("meta", "release"),
    [
        ({"slurm": {"version": {"major": "24", "minor": "11", "micro": "5"}}}, "24.11"),
        ({"slurm": {"version": {"major": 26, "minor": 5, "micro": 5}}}, "26.05"),
        ({}, None),
        ({"slurm": {"version": {"major": "x"}}}, None),
    ],
)
def test_the_rest_client_knows_the_release_that_answered(meta: dict[str, object], release: str | None) -> None:
    """From each reply's meta.slurm.version (slurmrestd's own release), as 24.11 and 26.05 send it."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"nodes": [], "meta": meta, "errors": [], "warnings": []})

    client = SlurmRestClient(
        "http://slurm", user="slurm", token=StaticToken("t"), transport=httpx.MockTransport(handler), api="v0.0.42"
    )
    assert client.release is None
    assert client.list_nodes() == []
    assert client.release == release
