"""The database guard's decisions (sunk.dbguard.plan), state by state; db-guard.sh executes the
table rendered from them (tests/manifests/test_db_guard_script.py runs it)."""

from __future__ import annotations

import pytest

from sunk.dbguard import Act, Seen, every_state, plan, table

SOURCE, TARGET = "24.11", "26.05"


def _up(phase: str, **seen: object) -> tuple[Act, ...]:
    state = {"dump": True, "schema": "same", "failed": False, "restored": False, "served": False, **seen}
    return plan(phase, Seen(**state), source=SOURCE, release=TARGET).acts  # type: ignore[arg-type]


def _back(**seen: object) -> tuple[Act, ...]:
    state = {"dump": True, "schema": "same", "failed": False, "restored": False, "served": False, **seen}
    return plan("start", Seen(**state), source=SOURCE, release=SOURCE).acts  # type: ignore[arg-type]


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
        assert acts == ((Act.RESTORE,) if seen.failed and not seen.restored else ()), seen
        assert plan("watch", seen, source=SOURCE, release=SOURCE).acts == (), seen


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
    assert len(keys) == len(set(keys)) == len(every_state()) == 64
    assert "1-same-0-0-0 - " in rows and "0-unrecorded-0-0-0 record,dump " in rows
    texts = [line.split(" ", 1)[1] for line in messages.splitlines()]
    assert len(texts) == len(set(texts))
