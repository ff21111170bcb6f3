"""`sunk stacks list|preview|up|refresh|destroy`: every Pulumi stack of the current project, for CI.

Which stacks, in which order, what each would run: plain code over the project's stack files
(the project around the current directory, never the one sunk was installed from). Stacks that
install the cluster-wide operator (`sunk:operator`) go first, so the NodeSet CRD exists before a
tenant's NodeSets (last for `destroy`). A stack file that does not validate is reported as a
failure of that stack; the others still run. Only the engine call needs the Pulumi CLI (through
the Automation API, imported when a stack runs), so listing and planning print at once."""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sunk.spec.errors import SpecError
from sunk.stackfile import list_stacks, load_stack, no_stacks_reason, project_dir, stacks_dir

Action = Literal["preview", "up", "refresh", "destroy"]
MISSING_CLI = (
    "sunk stacks: the Pulumi CLI (`pulumi`) is not on PATH. The Automation API drives it, so "
    "nothing was previewed or deployed. Install it (https://www.pulumi.com/docs/install/) and "
    "log in to a backend (`pulumi login`), or use `sunk render STACK --out DIR` to see a stack "
    "offline."
)
EXIT_NO_CLI = 2


@dataclass(frozen=True)
class StackRun:
    """One engine operation on one stack, or a stack whose file does not validate (`problem`)."""

    stack: str
    tenant: str
    env: str
    action: Action
    work_dir: Path
    operator: bool = False
    """The stack installs the cluster-wide operator and CRD."""
    problem: str | None = None

    @property
    def argv(self) -> list[str]:
        """The equivalent CLI command. `--yes` because CI has no one to answer the prompt."""
        cmd = ["pulumi", self.action, "--stack", self.stack, "--cwd", str(self.work_dir), "--non-interactive"]
        return cmd if self.action == "preview" else [*cmd, "--yes"]

    @property
    def command(self) -> str:
        """What a human pastes into a shell to do the same: a stack never created is created
        first (`pulumi stack select --create`), as the runner does for preview and up."""
        run = shlex.join(self.argv)
        if self.action in ("preview", "up"):
            select = ["pulumi", "stack", "select", "--create", "--stack", self.stack, "--cwd", str(self.work_dir)]
            return f"{shlex.join(select)} && {run}"
        return run


@dataclass
class Outcome:
    run: StackRun
    ok: bool
    summary: str = ""
    error: str = ""
    lines: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        r = self.run
        return {
            "stack": r.stack,
            "tenant": r.tenant,
            "env": r.env,
            "action": r.action,
            "operator": r.operator,
            "command": r.command,
            "ok": self.ok,
            "summary": self.summary,
            "error": self.error,
            "output": self.lines,
        }


def _guess(name: str) -> tuple[str, str]:
    """(tenant, env) from a stack name alone, for a file that does not validate."""
    tenant, _, env = name.rpartition("-")
    return (tenant, env) if tenant else (name, "")


def _env(name: str, tenant: str) -> str:
    """The environment of stack `name` (`<tenant>-<env>`): what follows the spec's tenant, else
    (a stack named unlike its tenant, such as `other-dev` of tenant acme) the last part."""
    if name.startswith(f"{tenant}-"):
        return name.removeprefix(f"{tenant}-")
    return _guess(name)[1] or name


def plan(action: Action, directory: Path, tenants: Sequence[str] = (), envs: Sequence[str] = ()) -> list[StackRun]:
    """Every stack file in `directory`, filtered, operator stacks first (last for destroy). The
    tenant is the spec's own; the env is what follows `<tenant>-` in the stack name."""
    work_dir = (project_dir(directory) or directory).resolve()
    runs = []
    for name in list_stacks(directory):
        try:
            loaded = load_stack(name, directory)
        except SpecError as err:
            tenant, env = _guess(name)
            runs.append(StackRun(name, tenant, env, action, work_dir, problem=str(err)))
            continue
        spec = loaded.spec
        runs.append(
            StackRun(name, spec.tenant, _env(name, spec.tenant), action, work_dir, operator=loaded.deploy_operator)
        )
    runs = [
        r
        for r in runs
        if (not tenants or r.tenant in tenants or (r.problem and any(r.stack.startswith(f"{t}-") for t in tenants)))
        and (not envs or r.env in envs)
    ]
    first = sorted((r for r in runs if r.operator), key=lambda r: r.stack)
    rest = sorted((r for r in runs if not r.operator), key=lambda r: r.stack)
    return [*rest, *first] if action == "destroy" else [*first, *rest]


def discover(directory: Path, tenants: Sequence[str] = (), envs: Sequence[str] = ()) -> list[tuple[str, str, str]]:
    """(stack, tenant, env) of every stack `plan` would run, in its order."""
    return [(r.stack, r.tenant, r.env) for r in plan("preview", directory, tenants, envs)]


Output = Callable[[str], None]
Runner = Callable[[StackRun, Output], str]


def automation_runner(run: StackRun, out: Output) -> str:
    """The only part that needs the CLI: a LocalWorkspace rooted at the project (Pulumi.yaml's
    stackConfigDir finds the stack files). preview and up create a stack never created before."""
    from pulumi import automation as auto

    if run.action in ("preview", "up"):
        stack = auto.create_or_select_stack(stack_name=run.stack, work_dir=str(run.work_dir))
    else:
        stack = auto.select_stack(stack_name=run.stack, work_dir=str(run.work_dir))
    result: Any
    if run.action == "preview":
        result = stack.preview(on_output=out)
    elif run.action == "up":
        result = stack.up(on_output=out)
    elif run.action == "refresh":
        result = stack.refresh(on_output=out)
    else:
        result = stack.destroy(on_output=out)
    summary = getattr(result, "change_summary", None)
    if summary is None:
        summary = getattr(getattr(result, "summary", None), "resource_changes", None)
    return json.dumps(summary, sort_keys=True) if summary else ""


class _Printer:
    """Line-at-a-time printing shared by parallel runs; each line names its stack."""

    def __init__(self, quiet: bool, prefix: bool) -> None:
        self.lock = threading.Lock()
        self.quiet = quiet
        self.prefix = prefix

    def line(self, run: StackRun, text: str, *, err: bool = False) -> None:
        if self.quiet:
            return
        shown = f"[{run.stack}] {text}" if self.prefix else text
        with self.lock:
            print(shown.rstrip("\n"), file=sys.stderr if err else sys.stdout, flush=True)


def _one(run: StackRun, runner: Runner, printer: _Printer) -> Outcome:
    if run.problem is not None:
        printer.line(run, f"✗ {run.stack}: does not validate, not run:\n{run.problem}", err=True)
        return Outcome(run, ok=False, error=run.problem)
    printer.line(run, f"==> {run.command}  (tenant {run.tenant}, {run.env})")
    outcome = Outcome(run, ok=True)

    def out(text: str) -> None:
        outcome.lines.append(text)
        printer.line(run, text)

    try:
        outcome.summary = runner(run, out)
    except Exception as err:  # one tenant's failure must not hide the others' results
        outcome.ok, outcome.error = False, str(err)
        printer.line(run, f"✗ {run.stack}: {err}", err=True)
        return outcome
    printer.line(run, f"✓ {run.stack} {outcome.summary}".rstrip())
    return outcome


def execute(
    runs: Sequence[StackRun],
    runner: Runner,
    *,
    keep_going: bool = True,
    parallel: int = 1,
    as_json: bool = False,
) -> int:
    """Operator stacks one at a time and before the rest (after them for destroy); the rest up to
    `parallel` at once. `keep_going=False` stops starting stacks after the first failure. Two
    phases: run the stacks, then report their outcomes (exit 1 when any failed)."""
    printer = _Printer(quiet=as_json, prefix=parallel > 1)
    outcomes = _run_phases(runs, runner, printer, keep_going=keep_going, parallel=parallel)
    return _report(runs, outcomes, as_json=as_json)


def _run_phases(
    runs: Sequence[StackRun], runner: Runner, printer: _Printer, *, keep_going: bool, parallel: int
) -> list[Outcome]:
    """Each phase's stacks (operators alone, tenants `parallel` at once); tenants are not run after
    a failed operator stack on preview or up."""
    operators = [r for r in runs if r.operator]
    tenants = [r for r in runs if not r.operator]
    destroy = bool(runs) and runs[0].action == "destroy"
    phases = [tenants, operators] if destroy else [operators, tenants]
    outcomes: list[Outcome] = []
    stop = threading.Event()

    def go(run: StackRun) -> Outcome | None:
        if stop.is_set():
            return None
        outcome = _one(run, runner, printer)
        if not outcome.ok and not keep_going:
            stop.set()
        return outcome

    for phase in phases:
        width = 1 if phase is operators else max(1, parallel)
        with ThreadPoolExecutor(max_workers=width) as pool:
            outcomes += [o for o in pool.map(go, phase) if o is not None]
        if phase is operators and runs[0].action in ("preview", "up") and any(not o.ok for o in outcomes):
            # Tenants' NodeSets need the CRD an operator stack installs: none starts on a failed one.
            outcomes += [Outcome(r, ok=False, error="not run: an operator stack failed first") for r in tenants]
            for r in tenants:
                printer.line(r, f"✗ {r.stack}: not run, an operator stack failed first", err=True)
            break
    return outcomes


def _report(runs: Sequence[StackRun], outcomes: list[Outcome], *, as_json: bool) -> int:
    """The outcomes as JSON, or the failed stacks named on stderr; 1 when any failed."""
    failed = [o.run.stack for o in outcomes if not o.ok]
    if as_json:
        print(json.dumps([o.as_json() for o in outcomes], indent=2))
    elif failed:
        print(f"{len(failed)} of {len(runs)} stack(s) failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def nothing_to_run(args: argparse.Namespace, directory: Path) -> str:
    """Why no stack was selected: no project or stack files, or filters that match none."""
    if not list_stacks(directory):
        return no_stacks_reason(Path(args.stacks_dir) if args.stacks_dir else None)
    chosen = [f"--tenant {t}" for t in args.tenant or ()] + [f"--env {e}" for e in args.env or ()]
    return f"no stack matches {' '.join(chosen)} (stacks: {', '.join(list_stacks(directory))})"


def cmd_list(args: argparse.Namespace) -> int:
    directory = Path(args.stacks_dir) if args.stacks_dir else stacks_dir()
    runs = plan("preview", directory, args.tenant or (), args.env or ())
    if not runs:
        print(f"sunk stacks list: {nothing_to_run(args, directory)}", file=sys.stderr)
        if args.json:
            print("[]")
        return 1
    if args.json:
        rows = [
            {"stack": r.stack, "tenant": r.tenant, "env": r.env, "operator": r.operator, "problem": r.problem}
            for r in runs
        ]
        print(json.dumps(rows, indent=2))
    else:
        rows_text = [("STACK", "TENANT", "ENV", "ROLE", "")]
        for r in runs:
            role = "operator+tenant" if r.operator else "tenant"
            state = f"✗ {r.problem.splitlines()[0]}" if r.problem else ""
            rows_text.append((r.stack, r.tenant, r.env, role, state))
        widths = [max(len(row[i]) for row in rows_text) for i in range(4)]
        for row in rows_text:
            print(
                "  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)).rstrip()
                + (f"  {row[4]}" if row[4] else "")
            )
    return 1 if any(r.problem for r in runs) else 0


def cmd_stacks(args: argparse.Namespace, *, which: Callable[[str], str | None] = shutil.which) -> int:
    if args.action == "list":
        return cmd_list(args)
    directory = Path(args.stacks_dir) if args.stacks_dir else stacks_dir()
    runs = plan(args.action, directory, args.tenant or (), args.env or ())
    if not runs:
        print(f"sunk stacks {args.action}: {nothing_to_run(args, directory)}", file=sys.stderr)
        if args.json:
            print("[]")
        return 1
    if which("pulumi") is None:
        print(MISSING_CLI, file=sys.stderr)
        for run in runs:
            print(f"  would run: {run.command}", file=sys.stderr)
        if args.json:
            # Whoever parses stdout gets a document naming each stack, not an empty stream.
            not_run = [Outcome(r, ok=False, error=r.problem or "not run: the Pulumi CLI is not on PATH") for r in runs]
            print(json.dumps([o.as_json() for o in not_run], indent=2))
        return EXIT_NO_CLI
    return execute(
        runs,
        lambda run, out: automation_runner(run, out),
        keep_going=not args.fail_fast,
        parallel=args.parallel,
        as_json=args.json,
    )
