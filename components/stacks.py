"""`sunk stacks preview|up [--tenant T ...] [--env E ...]`: one Pulumi stack per tenant and
environment, driven through Pulumi's Automation API (the CI loop over stacks/).

Everything but the engine call is plain code: which stacks, in which order, with which
workspace. The Automation API drives the `pulumi` CLI, so without it on PATH the command says so
and exits 2 before touching anything."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sunk.spec.errors import SpecError
from sunk.stackfile import list_stacks, load_stack, stacks_dir

Action = Literal["preview", "up"]
MISSING_CLI = (
    "sunk stacks: the Pulumi CLI (`pulumi`) is not on PATH. The Automation API drives it, so "
    "nothing was previewed or deployed. Install it (https://www.pulumi.com/docs/install/) and "
    "log in to a backend (`pulumi login`), or use `sunk render STACK --out DIR` to see a stack "
    "offline."
)
EXIT_NO_CLI = 2


@dataclass(frozen=True)
class StackRun:
    """One engine operation: what `pulumi <action> --stack <stack> --cwd <work_dir>` would do."""

    stack: str
    tenant: str
    env: str
    action: Action
    work_dir: Path

    @property
    def argv(self) -> list[str]:
        """The equivalent CLI command (printed, and what a human would run)."""
        return ["pulumi", self.action, "--stack", self.stack, "--cwd", str(self.work_dir), "--non-interactive"]


def discover(directory: Path, tenants: Sequence[str] = (), envs: Sequence[str] = ()) -> list[tuple[str, str, str]]:
    """(stack, tenant, env) for every stack file, filtered. The tenant is the spec's own, not a
    guess from the file name; the env is what follows `<tenant>-` in the stack name."""
    found = []
    for name in list_stacks(directory):
        spec = load_stack(name, directory).spec
        env = name.removeprefix(f"{spec.tenant}-") if name.startswith(f"{spec.tenant}-") else name
        if tenants and spec.tenant not in tenants:
            continue
        if envs and env not in envs:
            continue
        found.append((name, spec.tenant, env))
    return found


def plan(action: Action, directory: Path, tenants: Sequence[str] = (), envs: Sequence[str] = ()) -> list[StackRun]:
    work_dir = directory.resolve().parent
    return [StackRun(s, t, e, action, work_dir) for s, t, e in discover(directory, tenants, envs)]


Runner = Callable[[StackRun], str]


def automation_runner(run: StackRun) -> str:
    """The only part that needs the CLI: select the stack in a LocalWorkspace rooted at the
    project (Pulumi.yaml's stackConfigDir finds stacks/), then preview or up."""
    from pulumi import automation as auto

    if run.action == "preview":
        stack = auto.select_stack(stack_name=run.stack, work_dir=str(run.work_dir))
        result: Any = stack.preview(on_output=print)
    else:
        # New tenant stack files become stacks on their first `up`.
        stack = auto.create_or_select_stack(stack_name=run.stack, work_dir=str(run.work_dir))
        result = stack.up(on_output=print)
    return str(getattr(result, "change_summary", "") or "")


def execute(runs: Sequence[StackRun], runner: Runner, *, keep_going: bool = True) -> int:
    failed = []
    for run in runs:
        print(f"==> {' '.join(run.argv)}  (tenant {run.tenant}, {run.env})", flush=True)
        try:
            outcome = runner(run)
        except Exception as err:  # one tenant's failure must not hide the others' results
            failed.append(run.stack)
            print(f"✗ {run.stack}: {err}", file=sys.stderr)
            if not keep_going:
                break
            continue
        print(f"✓ {run.stack} {outcome}".rstrip())
    if failed:
        print(f"{len(failed)} of {len(runs)} stack(s) failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def cmd_stacks(args: argparse.Namespace, *, which: Callable[[str], str | None] = shutil.which) -> int:
    directory = Path(args.stacks_dir) if args.stacks_dir else stacks_dir()
    try:
        runs = plan(args.action, directory, args.tenant or (), args.env or ())
    except SpecError as err:
        print(err, file=sys.stderr)
        return 1
    if not runs:
        print("sunk stacks: no stack matches", file=sys.stderr)
        return 1
    if which("pulumi") is None:
        print(MISSING_CLI, file=sys.stderr)
        for run in runs:
            print(f"  would run: {' '.join(run.argv)}", file=sys.stderr)
        return EXIT_NO_CLI
    return execute(runs, automation_runner, keep_going=not args.fail_fast)
