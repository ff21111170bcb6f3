"""sunk.upgrade: the order and gates of a move between Slurm releases, and the moves refused."""

from __future__ import annotations

import pytest

from sunk.spec.upgrade import MAX_RELEASES_BACK, release_index, upgrade_problems
from sunk.upgrade import plan_text, upgrade_plan
from tests.support.specs import build_spec as _spec


def test_the_order_is_schedmds_with_the_copies_before_each_conversion() -> None:
    plan = upgrade_plan(_spec(slurm={"version": "26.05"}), "24.11")
    assert plan.names == ("backup", "slurmdbd", "snapshot", "slurmctld", "slurmd", "clients")
    assert "backup" in plan.step("slurmdbd").waits_for
    assert "snapshot" in plan.step("slurmctld").waits_for
    assert "slurmctld on 26.05" in plan.step("slurmd").waits_for
    assert "slurmctld on 26.05" in plan.step("clients").waits_for


def test_slurmd_wait_as_long_as_jobs_run_and_every_other_gate_is_bounded() -> None:
    plan = upgrade_plan(_spec(), "24.11")
    assert plan.step("slurmd").gate_timeout_s is None
    assert "drain" in plan.step("slurmd").does and "once it runs no job" in plan.step("slurmd").does
    assert all(s.gate_timeout_s for s in plan.steps if s.name != "slurmd")


def test_each_rollback_names_its_copy() -> None:
    plan = upgrade_plan(_spec(), "24.11")
    assert "db-guard restores the dump" in plan.step("slurmdbd").rollback
    assert "restore StateSaveLocation from the snapshot" in plan.step("slurmctld").rollback


def test_without_accounting_there_is_no_database_to_back_up() -> None:
    plan = upgrade_plan(_spec(accounting={"enabled": False}, scheduling={"preemptType": "none"}), "24.11")
    assert plan.names == ("snapshot", "slurmctld", "slurmd", "clients")


def test_the_same_release_has_no_steps() -> None:
    plan = upgrade_plan(_spec(), "26.05")
    assert plan.steps == ()
    assert "nothing to upgrade" in plan_text(plan)


def test_a_downgrade_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match=r"slurm\.upgradeFrom: '26\.05' is newer than slurm\.version '24\.11'"):
        upgrade_plan(_spec(slurm={"version": "24.11"}), "26.05")
    [problem] = upgrade_problems("26.05", "24.11")
    assert problem.path == "upgradeFrom"
    assert "restore the database backup and the state snapshot" in problem.message


def test_more_than_three_releases_is_refused() -> None:
    assert release_index("26.05") - release_index("24.11") == 3
    assert upgrade_problems("24.11", "26.05") == []
    [problem] = upgrade_problems("24.11", "26.11")
    assert f"from the {MAX_RELEASES_BACK} releases before it only" in problem.message


def test_the_spec_checks_upgrade_from() -> None:
    assert _spec(slurm={"version": "26.05", "upgradeFrom": "24.11"}).slurm.upgrade_from == "24.11"
    with pytest.raises(ValueError, match="upgradeFrom"):
        _spec(slurm={"version": "24.11", "upgradeFrom": "26.05"})


def test_the_text_lists_steps_in_order_with_their_waits() -> None:
    text = plan_text(upgrade_plan(_spec(), "24.11"))
    assert text.splitlines()[0] == "research: Slurm 24.11 -> 26.05, 6 steps, in this order:"
    assert text.index("1. backup") < text.index("2. slurmdbd") < text.index("4. slurmctld") < text.index("5. slurmd")
    assert "gate (as long as running jobs run)" in text
    assert "gate (up to 7200 s)" in text
