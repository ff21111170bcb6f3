"""The demo stacks (stacks/): the examples users read, `make demo` boots and `sunk stacks` runs.

Every other test reads the fixture stacks (tests/fixtures/stacks), so that editing an example
breaks only what is about the examples. The tests whose subject is the demo stacks themselves:
this file, `sunk demo` end to end (tests/slurm/test_cli.py), the local cluster's `sunk local up`
(tests/runtime/local/test_local_cluster.py) and the installed CLI inside the demo project
(tests/test_packaging.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sunk.cli import main
from sunk.stackfile import list_stacks, load_stack
from tests.support.stacks import DEMO_STACKS, ROOT

DEMO = list_stacks(DEMO_STACKS)


def test_the_demo_project_has_stacks() -> None:
    assert "acme-dev" in DEMO  # what `make demo` and the README's first commands name


@pytest.mark.parametrize("stack", DEMO)
def test_every_demo_stack_validates(stack: str) -> None:
    assert load_stack(stack, DEMO_STACKS).spec.name


def test_sunk_validate_in_the_demo_project(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """As a user runs it from the checkout: every stack of the project, found from Pulumi.yaml."""
    monkeypatch.chdir(ROOT)
    assert main(["validate"]) == 0
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines()] == [f"✓ {s}" for s in DEMO]


DEMO_SUBJECT = {
    "test_demo_stacks.py",
    "test_cli.py",
    "test_local_cluster.py",
    "test_packaging.py",
    "test_first_hour.py",
}
"""Files allowed to find stacks without naming a folder: the demo's own tests, and tests that run
in a project they made themselves (test_first_hour's `sunk init`, tests/slurm/test_cli's demo)."""
ARGS_WITH_FOLDER = {"load_stack": 2, "stack_path": 2, "list_stacks": 1}


def _finds_the_demo_stacks(path: Path) -> list[str]:
    """Calls that would fall back to the stacks of the project around the current directory
    (stacks/ when tests run from the checkout), and literal paths to stacks/."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ARGS_WITH_FOLDER:
            single = len(node.args) == 1 and isinstance(node.args[0], ast.Call)  # load_stack(str(path))
            if len(node.args) + len(node.keywords) < ARGS_WITH_FOLDER[node.func.id] and not single:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.func.id}() without a folder")
        right, left = getattr(node, "right", None), getattr(node, "left", None)
        if (
            isinstance(right, ast.Constant)
            and right.value == "stacks"
            and isinstance(left, ast.Name)
            and left.id == "ROOT"
        ):
            found.append(f"{path.relative_to(ROOT)}:{left.lineno}: ROOT / 'stacks'")
    return found


def test_other_tests_read_the_fixture_stacks() -> None:
    """Editing an example must not break a test about something else: tests name FIXTURE_STACKS
    (tests/support/stacks.py) or a folder of their own."""
    tests = [p for p in (ROOT / "tests").rglob("*.py") if p.name not in DEMO_SUBJECT and "support" not in p.parts]
    assert not [hit for p in tests for hit in _finds_the_demo_stacks(p)]
