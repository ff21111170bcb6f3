"""Accounting on real slurmdbd (the "accounting" defect class): the rendered setup script applies QOS
edits, clears fields the spec clears, removes the QOS it created that the spec dropped, leaves
`normal` and an administrator's own QOS alone, and fails loudly when it can't do its job; accounts
and users follow the spec the same way; AccountingStorageEnforce makes the limits hold (a job
over a QOS's MaxWall is refused, a user without an association can't submit)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sunk.runtime.harness import LocalSlurm, daemons

from sunk.render.sacctmgr import render_sacctmgr_script
from sunk.spec.cluster import ClusterSpec
from sunk.spec.scheduling import AccountSpec, QosSpec
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS
from tests.support.waiting import wait_for

pytestmark = pytest.mark.slurm

ACME = load_stack("acme-dev", FIXTURE_STACKS).spec


@pytest.fixture(scope="module")
def slurm() -> Iterator[LocalSlurm]:
    with LocalSlurm.start(ACME, restapi=False) as cluster:
        yield cluster


def _with_qos(accounts: list[AccountSpec] | None = None, **changes: Any) -> ClusterSpec:
    """acme-dev with its QOS changed: name -> field updates, or None to drop, or a new QosSpec;
    and with `accounts` when given."""
    qos = []
    for q in ACME.qos:
        change = changes.pop(q.name, {})
        if change is not None:
            qos.append(q.model_copy(update=change))
    qos += [v for v in changes.values() if isinstance(v, QosSpec)]
    return ACME.model_copy(update={"qos": qos, "accounts": accounts if accounts is not None else ACME.accounts})


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


USER = "games"
"""An unprivileged user every image has. Not `nobody`: Slurm 26.05 resolves no user of that name
("User 65534 not found" at submit, measured), where 24.11 did."""


def _as_user(slurm: LocalSlurm, *sbatch: str) -> tuple[int, str]:
    done = slurm.run("su", "-s", "/bin/sh", USER, "-c", "cd /tmp && sbatch " + " ".join(sbatch))
    return done.returncode, done.stdout + done.stderr


def _assocs(slurm: LocalSlurm) -> dict[tuple[str, str], dict[str, str]]:
    out = slurm.run(
        "sacctmgr", "-n", "-P", "show", "assoc", "where", f"cluster={ACME.name}",
        "format=account,user,parentname,fairshare,qos,defaultqos", check=True,
    ).stdout  # fmt: skip
    rows = [line.split("|") for line in out.splitlines() if line]
    keys = ("parent", "fairshare", "qos", "defaultqos")
    return {(r[0], r[1]): dict(zip(keys, r[2:], strict=True)) for r in rows}


def _default_account(slurm: LocalSlurm, user: str) -> str:
    out = slurm.run("sacctmgr", "-n", "-P", "show", "user", user, "format=defaultaccount", check=True).stdout
    return out.strip()


def test_enforcement_refuses_users_without_an_association(slurm: LocalSlurm) -> None:
    assert "AccountingStorageEnforce=associations,limits,qos,safe" in (slurm.root / "etc/slurm/slurm.conf").read_text()
    code, out = _as_user(slurm, "--wrap true")
    assert code != 0 and "Invalid account" in out
    # The runtime's Slurm user (placeholder jobs) always has one, on root.
    assert ("root", "slurm") in _assocs(slurm)
    # The partition's AllowQos names QOS the setup created after slurmctld started: they hold.
    done = slurm.run("sbatch", "-p", "gpu", "-q", "high", "-t", "1", "--wrap", "true")
    assert done.returncode == 0, done.stderr


def _pending_reason(slurm: LocalSlurm, job: int) -> str:
    """A pending job's reason once the scheduler has given it one (squeue says None until then)."""

    def given() -> str | None:
        reason = slurm.run("squeue", "-h", "-j", str(job), "-o", "%r", check=True).stdout.strip()
        return reason if reason != "None" else None

    return wait_for(f"a reason for pending job {job}", given, timeout=120, interval=0.5)


def test_a_job_over_the_qos_maxwall_is_refused_and_one_within_runs(slurm: LocalSlurm) -> None:
    try:
        _apply(slurm, _with_qos(low={"max_wall": "1"}))
        over = slurm.run("sbatch", "-q", "low", "-t", "30", "--wrap", "true")
        assert over.returncode != 0 and "QOSMaxWallDurationPerJobLimit" in over.stderr
        job = slurm.sbatch("#!/bin/sh\ntrue\n", "-q", "low", "-t", "1")
        assert slurm.wait_job(job) == "COMPLETED"
        # denyOnLimit false: the job is accepted and pends with the limit as its reason (None
        # until the scheduler has looked at it).
        _apply(slurm, _with_qos(low={"max_wall": "1", "deny_on_limit": False}))
        pending = slurm.sbatch("#!/bin/sh\ntrue\n", "-q", "low", "-t", "30")
        assert _pending_reason(slurm, pending) == "QOSMaxWallDurationPerJobLimit"
    finally:
        slurm.cancel_all()
        _apply(slurm, ACME)


def test_accounts_and_users_follow_the_spec(slurm: LocalSlurm) -> None:
    research = AccountSpec(name="research", users=[USER], qos=["low", "normal"], default_qos="low", fairshare=5)
    kid = AccountSpec(name="kid", parent="research", users=[USER])
    _apply(slurm, _with_qos(accounts=[research, kid]))
    assoc = _assocs(slurm)
    assert assoc[("research", "")] == {"parent": "root", "fairshare": "5", "qos": "low,normal", "defaultqos": "low"}
    assert assoc[("kid", "")]["parent"] == "research" and ("kid", "slurm") in assoc
    assert _default_account(slurm, USER) == "research"
    code, out = _as_user(slurm, "--parsable --wrap true")
    assert code == 0, out
    job = int(out.strip().split(";")[0])
    assert slurm.wait_job(job) == "COMPLETED"
    code, out = _as_user(slurm, "-q high --wrap true")  # high is not among research's QOS
    assert code != 0 and "Invalid qos" in out

    # Edits: QOS cleared (inherit root's again), default QOS cleared, the user only in kid now.
    _apply(slurm, _with_qos(accounts=[AccountSpec(name="research"), kid]))
    assoc = _assocs(slurm)
    assert assoc[("research", "")]["qos"] == "high,low,normal" and assoc[("research", "")]["defaultqos"] == ""
    assert ("research", USER) not in assoc and ("kid", USER) in assoc
    assert _default_account(slurm, USER) == "kid"

    # Everything dropped: associations and accounts gone, an admin's own account untouched.
    slurm.run("sacctmgr", "-i", "add", "account", "admins-own", f"cluster={ACME.name}", check=True)
    _apply(slurm, ACME)
    assoc = _assocs(slurm)
    assert not {a for a, _ in assoc} & {"research", "kid"}
    assert ("admins-own", "") in assoc
    code, out = _as_user(slurm, "--wrap true")
    assert code != 0 and "Invalid account" in out


def test_an_account_with_running_jobs_is_not_dropped_silently(slurm: LocalSlurm) -> None:
    _apply(slurm, _with_qos(accounts=[AccountSpec(name="busy", users=[USER])]))
    code, out = _as_user(slurm, "--parsable --wrap 'sleep 300'")
    assert code == 0, out
    job = int(out.strip().split(";")[0])
    try:
        slurm.wait_job(job, ("RUNNING",))
        (slurm.root / "tmp/qos.sh").write_text(render_sacctmgr_script(ACME))
        done = slurm.run("sh", "/tmp/qos.sh", role="slurmdbd", timeout=120)
        assert done.returncode != 0 and "Job(s) active" in done.stdout + done.stderr
    finally:
        slurm.cancel_all()
    _apply(slurm, ACME)
    assert ("busy", "") not in _assocs(slurm)


def test_users_dropped_from_an_administrators_account_the_spec_lists_lose_their_association(
    slurm: LocalSlurm,
) -> None:
    """An account an administrator made is managed (never deleted) when the spec names it: a
    user the spec takes out of it loses the association, or they could still submit jobs."""
    slurm.run("sacctmgr", "-i", "add", "account", "lab", f"cluster={ACME.name}", check=True)
    _apply(slurm, _with_qos(accounts=[AccountSpec(name="lab", users=[USER])]))
    assert ("lab", USER) in _assocs(slurm)
    _apply(slurm, _with_qos(accounts=[AccountSpec(name="lab")]))
    assoc = _assocs(slurm)
    assert ("lab", USER) not in assoc and ("lab", "") in assoc  # the account itself stays
    _apply(slurm, ACME)
    assert ("lab", "") in _assocs(slurm)  # not sunk's: never removed


def test_a_dropped_account_with_an_administrators_account_under_it_is_refused_not_orphaned(
    slurm: LocalSlurm,
) -> None:
    """Slurm 24.11 deletes a parent account and leaves a child someone else made pointing at a
    parent that is gone (measured): the script refuses instead, naming both."""
    _apply(slurm, _with_qos(accounts=[AccountSpec(name="team")]))
    slurm.run("sacctmgr", "-i", "add", "account", "theirs", "parent=team", f"cluster={ACME.name}", check=True)
    (slurm.root / "tmp/qos.sh").write_text(render_sacctmgr_script(ACME))
    done = slurm.run("sh", "/tmp/qos.sh", role="slurmdbd", timeout=120)
    assert done.returncode != 0
    assert "account team: account theirs, which sunk does not manage, is under it" in done.stderr
    assert ("team", "") in _assocs(slurm)  # nothing deleted
    slurm.run("sacctmgr", "-i", "modify", "account", "theirs", f"cluster={ACME.name}", "set", "parent=root", check=True)
    _apply(slurm, ACME)
    assoc = _assocs(slurm)
    assert ("team", "") not in assoc and assoc[("theirs", "")]["parent"] == "root"
