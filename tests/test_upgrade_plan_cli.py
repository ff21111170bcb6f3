"""`sunk upgrade-plan STACK`: the plan printed from the stack's slurm.upgradeFrom (or --from), and
each refusal as one line naming what to change, exit 1, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from sunk.cli import main
from tests.support.stacks import small_stack


def _stack(tmp_path: Path, slurm: str) -> str:
    return str(small_stack(tmp_path, slurm))


def test_prints_the_steps_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["upgrade-plan", _stack(tmp_path, '{version: "26.05", upgradeFrom: "24.11"}')]) == 0
    out = capsys.readouterr().out
    assert out.startswith("research: Slurm 24.11 -> 26.05, 6 steps, in this order:\n1. backup:")
    assert out.index("2. slurmdbd") < out.index("3. snapshot") < out.index("4. slurmctld") < out.index("5. slurmd")


def test_from_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["upgrade-plan", _stack(tmp_path, '{version: "26.05"}'), "--from", "24.11"]) == 0
    assert "6 steps" in capsys.readouterr().out


def test_without_a_source_it_says_where_to_give_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["upgrade-plan", _stack(tmp_path, '{version: "26.05"}')]) == 1
    err = capsys.readouterr().err
    assert "no slurm.upgradeFrom" in err and "--from" in err and "Traceback" not in err


def test_a_downgrade_is_refused_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["upgrade-plan", _stack(tmp_path, '{version: "24.11", upgradeFrom: "26.05"}')]) == 1
    err = capsys.readouterr().err
    assert "slurm.upgradeFrom" in err and "can't be downgraded" in err
    assert main(["upgrade-plan", _stack(tmp_path, '{version: "24.11"}'), "--from", "26.05"]) == 1
    assert "slurm.upgradeFrom: '26.05' is newer than slurm.version '24.11'" in capsys.readouterr().err


def test_an_unknown_from_lists_the_supported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["upgrade-plan", _stack(tmp_path, '{version: "26.05"}'), "--from", "23.02"]) == 1
    assert "supported: 26.05, 24.11" in capsys.readouterr().err


def test_the_same_release_has_nothing_to_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["upgrade-plan", _stack(tmp_path, '{version: "26.05"}'), "--from", "26.05"]) == 0
    assert "nothing to upgrade" in capsys.readouterr().out
