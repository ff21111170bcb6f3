"""The database guard's decisions (sunk.dbguard.plan), state by state; db-guard.sh executes the
table rendered from them (tests/manifests/test_db_guard_script.py runs it)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sunk.dbguard import Act, Seen, every_state, plan, table

SOURCE, TARGET = "24.11", "26.05"


def _unmarked(acts: tuple[Act, ...]) -> tuple[Act, ...]:
    """The acts without the release's record (test_the_release_is_recorded... has those)."""
    return tuple(a for a in acts if a != Act.MARK)


def _up(phase: str, **seen: object) -> tuple[Act, ...]:
    state = {"dump": True, "schema": "same", "failed": False, "restored": False, "served": False, "recorded": "source"}
    state.update(seen)
    return _unmarked(plan(phase, Seen(**state), source=SOURCE, release=TARGET).acts)  # type: ignore[arg-type]


def _back(**seen: object) -> tuple[Act, ...]:
    state = {"dump": True, "schema": "same", "failed": False, "restored": False, "served": False, **seen}
    return _unmarked(plan("start", Seen(**state), source=SOURCE, release=SOURCE).acts)  # type: ignore[arg-type]


def test_the_first_start_of_the_new_release_records_the_schema_then_dumps() -> None:
    assert _up("start", dump=False, schema="unrecorded") == (Act.RECORD, Act.DUMP)
    # A restart before the conversion changed anything keeps the dump taken before it.
    assert _up("start") == ()
    assert _up("start", schema="unrecorded") == ()
    # After slurmdbd of the new release served, nothing is taken again: the dump is the old one.
    assert _up("start", schema="other", served=True) == ()


def test_a_failed_conversion_is_restored_by_the_watch_and_refused_at_each_start() -> None:
    assert _up("watch", schema="other", failed=True) == (Act.RESTORE,)
    assert _up("watch", failed=True, restored=True) == ()
    # A pod started again before the watch restored: the start restores, then refuses.
    assert _up("start", schema="other", failed=True) == (Act.RESTORE, Act.REFUSE)
    assert _up("start", failed=True, restored=True) == (Act.REFUSE,)
    said = plan("start", Seen(True, "same", True, True, False), source=SOURCE, release=TARGET).say
    assert 'slurm: {version: "24.11", upgradeFrom: "24.11"}' in said
    assert "will not start slurmdbd 26.05 again" in said


def test_the_watch_does_nothing_else() -> None:
    for seen in every_state():
        acts = plan("watch", seen, source=SOURCE, release=TARGET).acts
        assert _unmarked(acts) == ((Act.RESTORE,) if seen.failed and not seen.restored else ()), seen
        assert _unmarked(plan("watch", seen, source=SOURCE, release=SOURCE).acts) == (), seen


def test_an_interrupted_conversion_starts_over_from_the_dump() -> None:
    """No failure marked (the pod was killed mid-conversion), nothing served, the schema moved."""
    assert _up("start", schema="other") == (Act.RESTORE,)
    assert _back(schema="other") == (Act.RESTORE, Act.SET_ASIDE)


def test_going_back_after_a_failure_sets_the_copies_aside_and_starts() -> None:
    assert _back(failed=True, restored=True, schema="same") == (Act.SET_ASIDE,)
    assert _back(failed=True, schema="other") == (Act.RESTORE, Act.SET_ASIDE)
    # Going back before any conversion: the dump is set aside, so a later upgrade takes a fresh one.
    assert _back() == (Act.SET_ASIDE,)
    assert _back(dump=False) == ()


def test_going_back_after_the_new_release_served_is_refused() -> None:
    decision = plan("start", Seen(True, "other", False, False, True), source=SOURCE, release=SOURCE)
    assert decision.acts == (Act.REFUSE,)
    assert "Slurm can't be downgraded" in decision.say and "docs/upgrading.md" in decision.say


@pytest.mark.parametrize("release", [SOURCE, TARGET])
@pytest.mark.parametrize("phase", ["start", "watch"])
def test_a_refusal_comes_last_and_says_why(phase: str, release: str) -> None:
    for seen in every_state():
        decision = plan(phase, seen, source=SOURCE, release=release)  # type: ignore[arg-type]
        if Act.REFUSE in decision.acts:
            assert decision.acts[-1] == Act.REFUSE and decision.say, seen
        # Nothing is dumped over a database a newer release may have touched.
        if Act.DUMP in decision.acts:
            assert not (seen.dump or seen.failed or seen.served) and release == TARGET, seen


def test_the_table_has_one_row_per_state_and_each_message_once() -> None:
    rows, messages = table("start", source=SOURCE, release=TARGET)
    keys = [row.split(" ")[0] for row in rows.splitlines()]
    assert len(keys) == len(set(keys)) == len(every_state()) == 320
    assert "1-same-0-0-0-source mark " in rows and "0-unrecorded-0-0-0-source record,dump,mark " in rows
    assert "0-same-0-0-0-other refuse " in rows
    texts = [line.split(" ", 1)[1] for line in messages.splitlines()]
    assert len(texts) == len(set(texts))


def test_without_upgrade_from_a_database_another_release_ran_is_refused() -> None:
    """The default moved under a stack that never pinned its release, or a plain set-back: the
    database's record (or cluster_table's rpc_version) names another release than this pod's."""
    for release in (SOURCE, TARGET):
        for seen in every_state():
            decision = plan("start", seen, source=release, release=release)
            if seen.recorded == "other" and not (seen.dump or seen.failed or seen.served):
                assert decision.acts == (Act.REFUSE,), seen
                assert "slurm.upgradeFrom announces no change" in decision.say
                assert f'slurm: {{version: "{release}", upgradeFrom: "{release}"}}' in decision.say
            # The watch never refuses: the pod was let start.
            assert Act.REFUSE not in plan("watch", seen, source=release, release=release).acts


def test_an_upgrade_from_a_release_the_database_did_not_run_is_refused() -> None:
    decision = plan("start", Seen(False, "unrecorded", False, False, False, "other"), source=SOURCE, release=TARGET)
    assert decision.acts == (Act.REFUSE,)
    assert "than slurm.upgradeFrom's 24.11" in decision.say
    # Nothing dumped, nothing marked: the database is left as it is.
    for seen in every_state():
        if seen.recorded == "other":
            acts = plan("start", seen, source=SOURCE, release=TARGET).acts
            assert acts == (Act.REFUSE,) or seen.failed, (seen, acts)


def test_the_release_is_recorded_at_each_start_and_by_the_watch_when_missing() -> None:
    # A first deploy: no Slurm tables yet, nothing to write into; the watch records it once
    # slurmdbd made them.
    new = Seen(False, "none", False, False, False, "none")
    assert plan("start", new, source=TARGET, release=TARGET).acts == ()
    assert plan("watch", replace(new, schema="unrecorded"), source=TARGET, release=TARGET).acts == (Act.MARK,)
    # A same-release restart: one write, no copy.
    same = Seen(False, "unrecorded", False, False, False, "release")
    assert plan("start", same, source=TARGET, release=TARGET).acts == (Act.MARK,)
    assert plan("watch", same, source=TARGET, release=TARGET).acts == ()
    # A database from before sunk's row, its last slurmctld of this release: the watch writes the row.
    derived = replace(same, recorded="derived")
    assert plan("watch", derived, source=TARGET, release=TARGET).acts == (Act.MARK,)
    # An upgrade records its release after the dump (the dump keeps the old record).
    up = Seen(False, "unrecorded", False, False, False, "source")
    assert plan("start", up, source=SOURCE, release=TARGET).acts == (Act.RECORD, Act.DUMP, Act.MARK)
    # Never over a failed conversion: the restored database is the old release's.
    for seen in every_state():
        if seen.failed:
            for phase in ("start", "watch"):
                assert Act.MARK not in plan(phase, seen, source=SOURCE, release=TARGET).acts, seen


def test_an_upgrade_whose_database_already_ran_the_new_release_dumps_nothing() -> None:
    """upgradeFrom left set after the move, the backup volume new: a dump now would be of the
    converted database, restored later as if it were the old one."""
    seen = Seen(False, "unrecorded", False, False, False, "release")
    decision = plan("start", seen, source=SOURCE, release=TARGET)
    assert decision.acts == (Act.MARK,) and "nothing to dump" in decision.say
