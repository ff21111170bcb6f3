"""`sunk stacks preview|up`: discovery, filtering, the commands it would run, and the plain
message without a Pulumi CLI. The engine call itself needs the CLI and is not run here."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest
from sunk.components import stacks
from sunk.components.stacks import EXIT_NO_CLI, MISSING_CLI, StackRun, cmd_stacks, discover, execute, plan

from sunk.cli import build_parser, main

from .conftest import ROOT

STACKS_DIR = ROOT / "stacks"


def test_discovers_every_tenant_and_env() -> None:
    assert discover(STACKS_DIR) == [
        ("acme-dev", "acme", "dev"),
        ("acme-prod", "acme", "prod"),
        ("globex-dev", "globex", "dev"),
        ("globex-prod", "globex", "prod"),
    ]


def test_filters_by_tenant_and_env() -> None:
    assert [s for s, _, _ in discover(STACKS_DIR, tenants=["globex"])] == ["globex-dev", "globex-prod"]
    assert [s for s, _, _ in discover(STACKS_DIR, envs=["prod"])] == ["acme-prod", "globex-prod"]
    assert [s for s, _, _ in discover(STACKS_DIR, tenants=["acme"], envs=["dev"])] == ["acme-dev"]
    assert discover(STACKS_DIR, tenants=["initech"]) == []


def test_tenant_comes_from_the_spec_not_the_file_name(tmp_path: Path) -> None:
    text = (STACKS_DIR / "Pulumi.globex-dev.yaml").read_text().replace("tenant: globex", "tenant: globex-labs")
    (tmp_path / "Pulumi.globex-labs-staging.yaml").write_text(text)
    assert discover(tmp_path) == [("globex-labs-staging", "globex-labs", "staging")]


def test_command_construction() -> None:
    runs = plan("preview", STACKS_DIR, tenants=["acme"])
    assert [r.argv for r in runs] == [
        ["pulumi", "preview", "--stack", "acme-dev", "--cwd", str(ROOT), "--non-interactive"],
        ["pulumi", "preview", "--stack", "acme-prod", "--cwd", str(ROOT), "--non-interactive"],
    ]
    assert all(r.work_dir == ROOT and (r.work_dir / "Pulumi.yaml").is_file() for r in runs)
    assert {r.action for r in plan("up", STACKS_DIR)} == {"up"}


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["stacks", *argv])


def test_without_the_cli_it_says_so_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = cmd_stacks(_args("up", "--tenant", "globex"), which=lambda _: None)
    err = capsys.readouterr().err
    assert code == EXIT_NO_CLI == 2
    assert MISSING_CLI in err
    assert "would run: pulumi up --stack globex-dev" in err and "globex-prod" in err and "acme" not in err


@pytest.mark.skipif(shutil.which("pulumi") is not None, reason="only meaningful where the CLI is absent")
def test_the_real_command_line_without_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stacks", "preview", "--env", "dev"]) == 2
    assert "Pulumi CLI (`pulumi`) is not on PATH" in capsys.readouterr().err


def test_with_the_cli_it_runs_every_stack_through_the_runner(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[StackRun] = []

    def fake(run: StackRun) -> str:
        seen.append(run)
        if run.stack == "acme-prod":
            raise RuntimeError("conflict: stack is locked")
        return "{'same': 40}"

    monkeypatch.setattr(stacks, "automation_runner", fake)
    code = cmd_stacks(_args("preview"), which=lambda _: "/usr/bin/pulumi")
    out, err = capsys.readouterr()
    assert [r.stack for r in seen] == ["acme-dev", "acme-prod", "globex-dev", "globex-prod"]
    assert code == 1 and "✗ acme-prod: conflict: stack is locked" in err and "1 of 4 stack(s) failed" in err
    assert "✓ globex-prod {'same': 40}" in out


def test_fail_fast_stops_at_the_first_failure() -> None:
    calls: list[str] = []

    def boom(run: StackRun) -> str:
        calls.append(run.stack)
        raise RuntimeError("no")

    assert execute(plan("up", STACKS_DIR), boom, keep_going=False) == 1
    assert calls == ["acme-dev"]


def test_unknown_filter_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd_stacks(_args("preview", "--tenant", "nobody"), which=lambda _: "/x") == 1
    assert "no stack matches" in capsys.readouterr().err
