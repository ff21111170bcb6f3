"""examples/ runs: each stack validates and renders (the repository's program through Pulumi's
mock engine, as `sunk render` runs it) into objects valid for Kubernetes, and the platform
program runs under the mock engine and registers a cluster per team on the operator's CRD."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from sunk.components.offline import Evaluation, evaluate
from sunk.components.render import Rendered, render_config, render_evaluation
from sunk.runtime.common.process import LOG_LEVEL

from sunk.nodeset_resource import API_VERSION as NODESET_API
from sunk.reference.environment import CONTROLLERS
from sunk.stackfile import load_stack

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
STACKS = sorted(EXAMPLES.glob("*/Pulumi.*-*.yaml"))
PLATFORM = EXAMPLES / "platform" / "__main__.py"
KUBERNETES_VERSION = "1.33"
"""The version tests/components/test_render.py validates every rendered object against."""


def _render(path: Path) -> Rendered:
    name = load_stack(str(path)).name
    config, secret = render_config(path)
    return render_evaluation(evaluate(ROOT / "__main__.py", stack=name, config=config, secret_keys=secret))


def _valid(rendered: Rendered) -> set[str]:
    """Kinds rendered; every core object validated against Kubernetes' schema (CRDs' objects and
    the Prometheus Operator's are tests/components/test_render.py's)."""
    kinds = set()
    for text in rendered.files.values():
        obj = yaml.safe_load(text)
        kinds.add(obj["kind"])
        if obj["apiVersion"] != NODESET_API and not obj["apiVersion"].startswith("monitoring.coreos.com/"):
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    return kinds


def test_the_examples_are_there() -> None:
    assert [p.relative_to(EXAMPLES).as_posix() for p in STACKS] == [
        "gpu/Pulumi.vision-prod.yaml",
        "minimal/Pulumi.lab-dev.yaml",
    ]


@pytest.mark.parametrize("path", STACKS, ids=[p.parent.name for p in STACKS])
def test_the_stack_validates_and_renders(path: Path) -> None:
    stack = load_stack(str(path))
    kinds = _valid(_render(path))
    assert {"NodeSet", "StatefulSet", "ConfigMap", "Service"} <= kinds
    if stack.spec.name == "vision":
        assert {n.name for n in stack.spec.nodesets if n.gpus is not None} == {"h100"}
        assert "PrometheusRule" in kinds
    if stack.deploy_operator:
        assert "CustomResourceDefinition" in kinds


@pytest.fixture(scope="module")
def platform() -> Evaluation:
    return evaluate(PLATFORM, stack="dev", project="platform-hpc", config={})


def test_the_platform_program_runs_under_the_mock_engine(platform: Evaluation) -> None:
    types = [r.type for r in platform.registrations]
    assert types.count("sunk:index:SlurmCluster") == 2
    assert types.count("sunk:index:Operator") == 1
    kinds = _valid(render_evaluation(platform))
    assert {"NodeSet", "CustomResourceDefinition", "Namespace"} <= kinds
    assert platform.outputs["vision.controllerHost"] == "hpc-controller-0.hpc-controller.vision-hpc.svc.cluster.local"


def test_each_teams_cluster_waits_for_its_namespace_and_the_crd(platform: Evaluation) -> None:
    namespaces = {r.name: r.urn for r in platform.registrations if r.type == "kubernetes:core/v1:Namespace"}
    crds = [r.urn for r in platform.registrations if r.type.endswith("CustomResourceDefinition")]
    for team in ("vision", "speech"):
        nodesets = [
            r
            for r in platform.registrations
            if r.is_kubernetes_object
            and r.inputs.get("kind") == "NodeSet"
            and r.inputs["metadata"].get("namespace") == f"{team}-hpc"
        ]
        assert nodesets, team
        for r in nodesets:
            assert namespaces[f"{team}-hpc"] in r.dependencies
            assert any(c in r.dependencies for c in crds)


def test_the_platform_program_uses_only_the_public_api() -> None:
    """What a user copies imports sunk through sunk.api, with typed constructors."""
    source = PLATFORM.read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert [i for i in imports if "sunk" in i] == ["from sunk.api import ("]
    assert "model_validate" not in source and "NodeSetSpec(" in source


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec", {})
    pod = (
        spec.get("template", {}).get("spec")
        or spec.get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec")
        or {}
    )
    return [*pod.get("initContainers", []), *pod.get("containers", [])]


def test_the_manifests_set_only_variables_the_controllers_read() -> None:
    """Every variable the rendered objects give a controller (`python -m sunk.runtime.<name>`)
    is one its settings read, so the environment reference covers what a Deployment holds."""
    documented = {f"sunk.runtime.{name}": set(s.variables().values()) | {LOG_LEVEL} for name, _, s in CONTROLLERS}
    rendered = _render(EXAMPLES / "gpu" / "Pulumi.vision-prod.yaml")
    operator = _render(EXAMPLES / "minimal" / "Pulumi.lab-dev.yaml")
    seen: dict[str, set[str]] = {}
    for text in [*rendered.files.values(), *operator.files.values()]:
        for container in _containers(yaml.safe_load(text)):
            command = container.get("command", [])
            if command[:2] == ["python", "-m"] and command[2] in documented:
                names = {e["name"] for e in container.get("env", [])}
                assert names <= documented[command[2]], (command[2], sorted(names - documented[command[2]]))
                seen.setdefault(command[2], set()).update(names)
    assert {"sunk.runtime.operator", "sunk.runtime.syncer", "sunk.runtime.scheduler", "sunk.runtime.exporter"} <= set(
        seen
    )
