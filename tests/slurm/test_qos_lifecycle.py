"""QOS lifecycle on real slurmdbd (issue 12, class "accounting"): the rendered setup script applies
edits, clears fields the spec clears, removes the QOS it created that the spec dropped, leaves
`normal` and an administrator's own QOS alone, and fails loudly when it can't do its job."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sunk.runtime.harness import LocalSlurm, daemons

from sunk.render import render_sacctmgr_script
from sunk.spec.cluster import ClusterSpec
from sunk.spec.scheduling import QosSpec
from sunk.stackfile import load_stack

pytestmark = pytest.mark.slurm

ACME = load_stack("acme-dev").spec


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    with LocalSlurm.start(ACME, nodes=[], restapi=False) as cluster:
        yield cluster


def _with_qos(**changes: Any) -> ClusterSpec:
    """acme-dev with its QOS changed: name -> field updates, or None to drop, or a new QosSpec."""
    qos = []
    for q in ACME.qos:
        change = changes.pop(q.name, {})
        if change is not None:
            qos.append(q.model_copy(update=change))
    qos += [v for v in changes.values() if isinstance(v, QosSpec)]
    return ACME.model_copy(update={"qos": qos})


def _apply(slurm: LocalSlurm, spec: ClusterSpec) -> None:
    (slurm.root / "tmp/qos.sh").write_text(render_sacctmgr_script(spec))
    done = slurm.run("sh", "/tmp/qos.sh", role="slurmdbd", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def _qos(slurm: LocalSlurm) -> dict[str, dict[str, str]]:
    out = slurm.run(
        "sacctmgr", "-n", "-P", "show", "qos", "format=name,priority,preempt,preemptmode,maxwall,usagefactor,description",
        check=True,
    ).stdout  # fmt: skip
    rows = [line.split("|") for line in out.splitlines() if line]
    keys = ("priority", "preempt", "preemptmode", "maxwall", "usagefactor", "description")
    return {r[0]: dict(zip(keys, r[1:], strict=True)) for r in rows}


def test_the_boot_created_the_spec_qos_marked_as_sunks(slurm: LocalSlurm) -> None:
    qos = _qos(slurm)
    assert qos["low"]["description"] == qos["high"]["description"] == "sunk-managed"
    assert qos["high"]["preempt"] == "low" and qos["low"]["preemptmode"] == "requeue"
    assert qos["normal"]["description"] != "sunk-managed"


def test_edits_clears_and_removals_reach_slurmdbd(slurm: LocalSlurm) -> None:
    slurm.run("sacctmgr", "-i", "add", "qos", "admins-own", check=True)
    _apply(slurm, _with_qos(temp=QosSpec(name="temp", priority=5)))
    assert _qos(slurm)["temp"]["description"] == "sunk-managed"

    # Edited priority and a new MaxWall; high's preempt list cleared; temp dropped from the spec.
    _apply(slurm, _with_qos(low={"priority": 20, "max_wall": "1:00:00"}, high={"preempt": []}))
    qos = _qos(slurm)
    assert (qos["low"]["priority"], qos["low"]["maxwall"]) == ("20", "01:00:00")
    assert qos["high"]["preempt"] == ""
    assert "temp" not in qos
    assert "admins-own" in qos and "normal" in qos  # not sunk's: never touched

    # A field the spec no longer sets goes back to Slurm's default.
    _apply(slurm, _with_qos(low={"priority": 20}, high={"preempt": []}))
    assert _qos(slurm)["low"]["maxwall"] == ""
    _apply(slurm, ACME)
    assert _qos(slurm)["high"]["preempt"] == "low"


def test_the_script_fails_loudly_when_slurmdbd_is_gone(slurm: LocalSlurm) -> None:
    slurm.jail.stop("slurmdbd")
    try:
        (slurm.root / "tmp/qos.sh").write_text(render_sacctmgr_script(ACME))
        done = slurm.run("sh", "/tmp/qos.sh", role="slurmdbd", timeout=120)
        assert done.returncode != 0
    finally:
        password = (slurm.role_root("slurmdbd") / "etc/slurm-db/password").read_text()
        daemons.start_slurmdbd(slurm.jail, slurm.ports.slurmdbd, password)
