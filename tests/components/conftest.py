"""Each stack's program is evaluated once per session (through the same mock engine and with the
same config as `sunk render`: keys made in the cluster) and shared by every test here;
`pulumi_keys` evaluates them as a plain `pulumi up` does (keys in the Pulumi state)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sunk.components.offline import Evaluation, evaluate, stack_config
from sunk.components.render import Rendered, render_config, render_evaluation

from sunk.spec.cluster import ClusterSpec
from sunk.stackfile import list_stacks, load_stack, stack_path
from tests.support.stacks import FIXTURE_STACKS

ROOT = Path(__file__).resolve().parents[2]
STACKS = list_stacks(FIXTURE_STACKS)
LIBRARY_PROGRAM = Path(__file__).parent / "library_program" / "__main__.py"
LIBRARY = "library"
"""Key of the library program's evaluation beside the stacks."""


def _evaluate_stack(stack: str) -> Evaluation:
    path = stack_path(stack, FIXTURE_STACKS)
    config, secret = render_config(path)
    return evaluate(ROOT / "__main__.py", stack=stack, config=config, secret_keys=secret)


@pytest.fixture(scope="session")
def evaluations() -> dict[str, Evaluation]:
    out = {stack: _evaluate_stack(stack) for stack in STACKS}
    out[LIBRARY] = evaluate(LIBRARY_PROGRAM, stack="dev", project="platform-hpc", config={})
    return out


@pytest.fixture(scope="session")
def rendered(evaluations: dict[str, Evaluation]) -> dict[str, Rendered]:
    return {name: render_evaluation(ev) for name, ev in evaluations.items()}


@pytest.fixture(scope="session")
def specs() -> dict[str, ClusterSpec]:
    return {stack: load_stack(stack, FIXTURE_STACKS).spec for stack in STACKS}


@pytest.fixture(scope="session")
def pulumi_keys(evaluations: dict[str, Evaluation]) -> dict[str, Evaluation]:
    """Each stack as `pulumi up` runs it without `sunk:keys`: keys from pulumi-random and
    pulumi-tls (the library program never asks for keys in the cluster)."""
    out = {LIBRARY: evaluations[LIBRARY]}
    for stack in STACKS:
        config, secret = stack_config(stack_path(stack, FIXTURE_STACKS))
        out[stack] = evaluate(ROOT / "__main__.py", stack=stack, config=config, secret_keys=secret)
    return out
