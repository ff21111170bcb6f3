"""The project's program, as `pulumi up` runs it: the stack's Slurm files are rendered once and
the pod gate runs once (validation gates the spec; SlurmCluster takes it as admitted, sunk.podgate.
admitted), however many NodeSets, ConfigMaps and roles read them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from sunk.components.offline import evaluate, stack_config

import sunk.manifests.config as config
from sunk import podgate
from sunk.render import render_slurm_files
from sunk.stackfile import stack_path
from tests.support.stacks import FIXTURE_STACKS

from .conftest import ROOT


@pytest.mark.parametrize("stack", ["acme-dev", "globex-prod"])
def test_the_program_renders_the_slurm_files_once_and_gates_once(stack: str, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()

    def counted(label: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            calls[label] += 1
            return original(*args, **kwargs)

        return call

    monkeypatch.setattr(config, "render_slurm_files", counted("render", render_slurm_files))
    monkeypatch.setattr(podgate, "_problems", counted("gate", podgate._problems))
    settings, secret = stack_config(stack_path(stack, FIXTURE_STACKS))
    ev = evaluate(ROOT / "__main__.py", stack=stack, config=settings, secret_keys=secret)
    assert [r for r in ev.kubernetes() if r.type == "kubernetes:slurm.sunk.dev/v1alpha1:NodeSet"]
    assert calls == {"render": 1, "gate": 1}  # acme-dev's was 64 renders (23 + 23 + 18) and 2 gates
