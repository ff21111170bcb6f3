"""`sunk stacks list|preview|up|refresh|destroy`: which stacks, in which order, the commands
printed, isolation of a bad stack, --parallel and --json, and the plain message without a Pulumi
CLI. The engine call itself needs the CLI: a fake runner stands in for the Automation API."""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sunk.components import stacks
from sunk.components.stacks import EXIT_NO_CLI, MISSING_CLI, StackRun, cmd_stacks, discover, execute, plan

from sunk.cli import build_parser, main
from tests.support.stacks import FIXTURE_PROJECT, FIXTURE_STACKS

from .conftest import ROOT

STACKS_DIR = FIXTURE_STACKS
HAS_CLI = {"which": lambda _: "/usr/bin/pulumi"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the repository's project: Pulumi.yaml, stacks/ (acme-dev installs the operator)."""
    (tmp_path / "stacks").mkdir()
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    for f in STACKS_DIR.glob("Pulumi.*.yaml"):
        (tmp_path / "stacks" / f.name).write_text(f.read_text())
    return tmp_path


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["stacks", *argv])


def test_operator_stacks_come_first_and_last_for_destroy() -> None:
    assert [s for s, _, _ in discover(STACKS_DIR)] == ["acme-dev", "acme-prod", "globex-dev", "globex-prod"]
    runs = plan("up", STACKS_DIR)
    assert [(r.stack, r.operator) for r in runs][:2] == [("acme-dev", True), ("acme-prod", True)]
    assert [r.stack for r in plan("destroy", STACKS_DIR)] == ["globex-dev", "globex-prod", "acme-dev", "acme-prod"]


def test_an_operator_stack_sorting_last_still_runs_first(project: Path) -> None:
    """Alphabetical order would create zeta's... no: aardvark's NodeSets before zulu's CRD."""
    stacks_dir = project / "stacks"
    op = (stacks_dir / "Pulumi.acme-dev.yaml").read_text().replace("tenant: acme", "tenant: zulu")
    (stacks_dir / "Pulumi.zulu-dev.yaml").write_text(op)
    for f in stacks_dir.glob("Pulumi.acme-*.yaml"):
        f.unlink()
    first = plan("up", stacks_dir)[0]
    assert (first.stack, first.operator) == ("zulu-dev", True)


def test_filters_by_tenant_and_env() -> None:
    assert [s for s, _, _ in discover(STACKS_DIR, tenants=["globex"])] == ["globex-dev", "globex-prod"]
    assert [s for s, _, _ in discover(STACKS_DIR, envs=["prod"])] == ["acme-prod", "globex-prod"]
    assert [s for s, _, _ in discover(STACKS_DIR, tenants=["acme"], envs=["dev"])] == ["acme-dev"]
    assert discover(STACKS_DIR, tenants=["initech"]) == []


def test_tenant_comes_from_the_spec_not_the_file_name(tmp_path: Path) -> None:
    text = (STACKS_DIR / "Pulumi.globex-dev.yaml").read_text().replace("tenant: globex", "tenant: globex-labs")
    (tmp_path / "Pulumi.globex-labs-staging.yaml").write_text(text)
    assert discover(tmp_path) == [("globex-labs-staging", "globex-labs", "staging")]


def test_commands_run_as_printed() -> None:
    """Every printed command is a shell line: a stack never created is created first, and the
    engine never waits for a prompt (`--yes` on everything that changes a stack)."""
    (preview,) = plan("preview", STACKS_DIR, tenants=["acme"], envs=["dev"])
    assert preview.argv == [
        "pulumi",
        "preview",
        "--stack",
        "acme-dev",
        "--cwd",
        str(FIXTURE_PROJECT),
        "--non-interactive",
    ]
    select, run = preview.command.split(" && ")
    assert shlex.split(select) == [
        "pulumi",
        "stack",
        "select",
        "--create",
        "--stack",
        "acme-dev",
        "--cwd",
        str(FIXTURE_PROJECT),
    ]
    assert shlex.split(run) == preview.argv
    for action in ("up", "refresh", "destroy"):
        (r,) = plan(action, STACKS_DIR, tenants=["acme"], envs=["dev"])
        assert r.argv[-1] == "--yes" and r.argv[1] == action
    (refresh,) = plan("refresh", STACKS_DIR, tenants=["acme"], envs=["dev"])
    assert shlex.split(refresh.command) == refresh.argv  # refresh and destroy never create a stack


def test_stacks_come_from_the_current_project_not_this_repository(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for f in (project / "stacks").glob("Pulumi.globex-*.yaml"):
        f.unlink()
    monkeypatch.chdir(project / "stacks")  # anywhere inside the project
    assert main(["stacks", "list"]) == 0
    out = capsys.readouterr().out
    assert "acme-dev" in out and "globex" not in out
    runs = plan("up", project / "stacks")
    assert {r.work_dir for r in runs} == {project.resolve()}


def test_without_the_cli_it_says_so_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = cmd_stacks(_args("up", "--tenant", "globex", "--stacks-dir", str(STACKS_DIR)), which=lambda _: None)
    err = capsys.readouterr().err
    assert code == EXIT_NO_CLI == 2
    assert MISSING_CLI in err
    assert "pulumi up --stack globex-dev" in err and "globex-prod" in err and "acme" not in err


def _fake(seen: list[StackRun], fail: str = "") -> stacks.Runner:
    def run(r: StackRun, out: stacks.Output) -> str:
        seen.append(r)
        out(f"engine output for {r.stack}")
        if r.stack == fail:
            raise RuntimeError("conflict: stack is locked")
        return '{"same": 40}'

    return run


def test_one_failing_stack_never_stops_the_others(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[StackRun] = []
    monkeypatch.setattr(stacks, "automation_runner", _fake(seen, fail="globex-dev"))
    code = cmd_stacks(_args("preview", "--stacks-dir", str(STACKS_DIR)), **HAS_CLI)
    out, err = capsys.readouterr()
    assert [r.stack for r in seen] == ["acme-dev", "acme-prod", "globex-dev", "globex-prod"]
    assert code == 1 and "✗ globex-dev: conflict: stack is locked" in err and "1 of 4 stack(s) failed" in err
    assert '✓ globex-prod {"same": 40}' in out


def test_an_invalid_stack_fails_alone_filters_included(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "stacks" / "Pulumi.initech-dev.yaml").write_text("config:\n  sunk:cluster: {name: 1}\n")
    seen: list[StackRun] = []
    monkeypatch.setattr(stacks, "automation_runner", _fake(seen))
    d = str(project / "stacks")
    # Filtered to other tenants: the bad file is not even reported.
    assert cmd_stacks(_args("up", "--tenant", "globex", "--stacks-dir", d), **HAS_CLI) == 0
    assert [r.stack for r in seen] == ["globex-dev", "globex-prod"]
    capsys.readouterr()
    seen.clear()
    # Unfiltered: every good stack runs; the bad one is a failure with its problems.
    assert cmd_stacks(_args("up", "--stacks-dir", d), **HAS_CLI) == 1
    assert [r.stack for r in seen] == ["acme-dev", "acme-prod", "globex-dev", "globex-prod"]
    err = capsys.readouterr().err
    assert "✗ initech-dev: does not validate" in err and "partitions" in err and "1 of 5 stack(s) failed" in err


def test_a_failed_operator_stack_holds_back_the_tenants(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[StackRun] = []
    code = execute(plan("up", STACKS_DIR), _fake(seen, fail="acme-dev"))
    assert code == 1 and [r.stack for r in seen] == ["acme-dev", "acme-prod"]


def test_fail_fast_starts_nothing_after_a_failure() -> None:
    seen: list[StackRun] = []
    assert execute(plan("up", STACKS_DIR, tenants=["globex"]), _fake(seen, fail="globex-dev"), keep_going=False) == 1
    assert [r.stack for r in seen] == ["globex-dev"]


def test_parallel_runs_tenants_at_once_after_the_operators(capsys: pytest.CaptureFixture[str]) -> None:
    """Tenant stacks overlap (each waits until both have started); operator stacks never do."""
    both_started = threading.Barrier(2, timeout=30)
    running: list[str] = []
    overlap: list[set[str]] = []
    lock = threading.Lock()

    def runner(r: StackRun, out: stacks.Output) -> str:
        with lock:
            running.append(r.stack)
            overlap.append(set(running))
        if not r.operator:
            both_started.wait()
        out("working")
        with lock:
            running.remove(r.stack)
        return ""

    assert execute(plan("up", STACKS_DIR), runner, parallel=2) == 0
    assert overlap[:2] == [{"acme-dev"}, {"acme-prod"}]
    assert {"globex-dev", "globex-prod"} in overlap
    out = capsys.readouterr().out
    assert "[globex-dev] working" in out and "[acme-prod] ✓ acme-prod" in out


def test_json_reports_every_stack(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[StackRun] = []
    assert execute(plan("refresh", STACKS_DIR), _fake(seen, fail="acme-prod"), as_json=True) == 1
    report = json.loads(capsys.readouterr().out)
    assert [(r["stack"], r["ok"], r["action"]) for r in report] == [
        ("acme-dev", True, "refresh"),
        ("acme-prod", False, "refresh"),
        ("globex-dev", True, "refresh"),
        ("globex-prod", True, "refresh"),
    ]
    assert report[1]["error"] == "conflict: stack is locked"
    assert report[2]["output"] == ["engine output for globex-dev"]  # the engine's lines, in the document
    assert report[0]["command"].endswith("--non-interactive --yes")
    assert report[0]["summary"] == '{"same": 40}' and report[0]["operator"] is True


def test_unknown_filter_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cmd_stacks(_args("preview", "--tenant", "nobody", "--stacks-dir", str(STACKS_DIR)), **HAS_CLI) == 1
    assert "no stack matches" in capsys.readouterr().err


def test_list_and_help_import_no_pulumi(project: Path) -> None:
    """What makes the first line appear at once: listing and planning never import Pulumi's SDK
    (the Automation API loads only when a stack runs)."""
    code = (
        "import sys; from sunk.cli import main\n"
        "code = main(['stacks', 'list', '--json'])\n"
        "print('PULUMI', sorted(m for m in sys.modules if m.split('.')[0].startswith('pulumi')))\n"
        "raise SystemExit(code)"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1] == "PULUMI []"
    assert json.loads(run.stdout.rsplit("PULUMI", 1)[0])[0]["stack"] == "acme-dev"
    helped = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, contextlib, io\nfrom sunk.cli import main\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])\n"
            "print(sorted(m for m in sys.modules if m.startswith('pulumi')))",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert helped.stdout.strip() == "[]"


def test_first_line_is_printed_before_any_engine_work(capsys: pytest.CaptureFixture[str]) -> None:
    """The command line of the first stack is out before its runner is even called."""
    printed_before: list[str] = []

    def runner(r: StackRun, out: stacks.Output) -> str:
        printed_before.append(capsys.readouterr().out)
        time.sleep(0)
        return ""

    execute(plan("preview", STACKS_DIR, tenants=["globex"], envs=["dev"]), runner)
    assert printed_before[0].startswith("==> pulumi stack select --create --stack globex-dev")
