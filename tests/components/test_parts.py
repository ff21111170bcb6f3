"""One list of parts: the table in sunk.manifests.parts drives the render (`cluster_manifests`),
the pod gate (which checks the render's objects) and the SlurmCluster component. What the
components create is what the render writes, object for object, on every stack; a part added to
the table reaches the render and the gate, and SlurmCluster either builds it as the table says or
refuses the whole cluster before registering anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sunk.components import cluster as cluster_component
from sunk.components._k8s import create
from sunk.components.offline import Evaluation, ProgramFailed, Registration, evaluate, stack_config

from sunk.manifests import parts
from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.meta import Manifest, metadata, obj
from sunk.podgate import gate_problems, stack_objects
from sunk.spec.cluster import ClusterSpec
from sunk.stackfile import load_stack, stack_path
from tests.support.stacks import FIXTURE_STACKS

from .conftest import ROOT, STACKS


def _no_nulls(value: Any) -> Any:
    """The engine drops None inputs; the builders' dicts keep some (an unset optional field)."""
    if isinstance(value, dict):
        return {k: _no_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_no_nulls(v) for v in value]
    return value


def _ident(m: Manifest) -> tuple[str, str, str]:
    return (m["kind"], m["metadata"].get("namespace", ""), m["metadata"]["name"])


def _under_cluster(ev: Evaluation) -> list[Registration]:
    """The Kubernetes objects below SlurmCluster (not the Operator's, not the program's own)."""
    by_urn = {r.urn: r for r in ev.registrations}

    def cluster_owned(r: Registration) -> bool:
        parent = by_urn.get(r.parent)
        while parent is not None:
            if parent.type == "sunk:index:SlurmCluster":
                return True
            parent = by_urn.get(parent.parent)
        return False

    return [r for r in ev.kubernetes() if cluster_owned(r)]


@pytest.mark.parametrize("stack", STACKS)
def test_the_components_create_what_the_render_writes(evaluations: dict[str, Evaluation], stack: str) -> None:
    """Evaluated as `sunk render` runs the program (keys made in the cluster)."""
    loaded = load_stack(stack, FIXTURE_STACKS)
    operator_namespace = loaded.operator.namespace if loaded.operator is not None else "sunk-system"
    rendered = {_ident(m): _no_nulls(m) for m in cluster_manifests(loaded.spec, operator_namespace)}
    objects = Evaluation("", "", _under_cluster(evaluations[stack])).manifests(show_secrets=True)
    created = {_ident(m): _no_nulls(m) for m in objects}
    assert sorted(created) == sorted(rendered)
    for ident, m in rendered.items():
        assert created[ident] == m, f"{ident} differs between the render and the component"


FAKE = parts.Part(
    "fake",
    "Fake",
    lambda c: True,
    lambda c: [obj("v1", "ConfigMap", metadata(c.spec, f"{c.spec.name}-fake", "config"), data={"a": "b"})],
    ("controller",),
)
"""A part the table gains: one ConfigMap, created once slurmctld's objects exist."""


@pytest.fixture
def with_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parts, "PARTS", (*parts.PARTS, FAKE))


def _globex_dev() -> tuple[ClusterSpec, dict[str, str], list[str]]:
    """A stack without the operator: SlurmCluster is the first thing its program registers."""
    path = stack_path("globex-dev", FIXTURE_STACKS)
    config, secret = stack_config(path)
    return load_stack(str(path)).spec, config, secret


def test_a_part_added_to_the_table_is_rendered_and_gated(with_fake: None) -> None:
    spec, _, _ = _globex_dev()
    assert ("ConfigMap", spec.ns, "sim-fake") in {_ident(m) for m in cluster_manifests(spec)}
    assert ("ConfigMap", spec.ns, "sim-fake") in {_ident(m) for m in stack_objects(spec)[0]}
    assert gate_problems(spec) == []


def test_the_gate_checks_an_added_parts_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    """Named as slurm.conf's ConfigMap: the gate's one-name-per-kind rule sees it."""
    spec, _, _ = _globex_dev()
    twin = parts.Part(
        "twin",
        "Twin",
        lambda c: True,
        lambda c: [obj("v1", "ConfigMap", metadata(c.spec, f"{c.spec.name}-slurm-conf", "config"))],
    )
    monkeypatch.setattr(parts, "PARTS", (*parts.PARTS, twin))
    assert gate_problems(spec) == ["ConfigMap/sim-slurm-conf: two objects of this name (in globex-sim)"]


def test_slurm_cluster_refuses_a_part_it_cannot_create(with_fake: None) -> None:
    """Rendered and gated but never deployed would be worse: nothing is registered."""
    _, config, secret = _globex_dev()
    with pytest.raises(ProgramFailed) as failed:
        evaluate(ROOT / "__main__.py", stack="globex-dev", config=config, secret_keys=secret)
    assert "SlurmCluster has no constructor for the part(s) ['fake']" in str(failed.value)
    assert failed.value.registrations == []


def test_slurm_cluster_creates_an_added_part_as_the_table_says(
    with_fake: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def build(b: Any, waits: list[Any]) -> list[Any]:
        return [create(b.child(FAKE.name), m, b.opts(waits), namespace=b.namespace) for m in FAKE.manifests(b.ctx)]

    monkeypatch.setitem(cluster_component._PARTS, "fake", build)
    _, config, secret = _globex_dev()
    ev = evaluate(ROOT / "__main__.py", stack="globex-dev", config=config, secret_keys=secret)
    (fake,) = [r for r in ev.registrations if r.name == "sim-fake"]
    by_urn = {r.urn: r for r in ev.registrations}
    assert by_urn[fake.parent].type == "sunk:index:SlurmCluster"
    # Waiting for a component is waiting for each of its children (the engine's own expansion);
    # the Namespace comes with the namespace Output every object is given.
    controller = {"sim-controller-pdb", "sim-controller-service", "sim-controller-slurmctld", "sim-controller-state"}
    assert {by_urn[d].name for d in fake.dependencies} == {"sim-namespace", *controller}
    assert fake.inputs["metadata"]["name"] == "sim-fake"


def test_during_an_upgrade_slurmdbd_goes_first(specs: dict[str, ClusterSpec]) -> None:
    spec = specs["acme-dev"]
    steady = [p.name for p in parts.in_order(parts.context(spec))]
    assert steady.index("controller") < steady.index("accounting")
    upgrading = spec.model_copy(update={"slurm": spec.slurm.model_copy(update={"upgrade_from": "24.11"})})
    ctx = parts.context(upgrading)
    assert ctx.upgrading
    order = [p.name for p in parts.in_order(ctx)]
    assert order.index("accounting") < order.index("controller") < order.index("nodesets")
    assert parts.PARTS[[p.name for p in parts.PARTS].index("login")].waits(ctx)[-1] == "controller"


def test_a_table_that_cannot_be_ordered_is_refused(monkeypatch: pytest.MonkeyPatch, specs: dict[str, Any]) -> None:
    ctx = parts.context(specs["globex-dev"])
    loop = parts.Part("loop", None, lambda c: True, lambda c: [], ("loop",))
    monkeypatch.setattr(parts, "PARTS", (*parts.PARTS, loop))
    with pytest.raises(ValueError, match=r"parts \['loop'\] wait for each other"):
        parts.in_order(ctx)
    typo = parts.Part("typo", None, lambda c: True, lambda c: [], ("controler",))
    monkeypatch.setattr(parts, "PARTS", (*parts.PARTS[:-1], typo))
    with pytest.raises(ValueError, match=r"part 'typo' waits for \['controler'\], which no part is called"):
        parts.in_order(ctx)


def test_each_part_is_its_components_module() -> None:
    """The part's name is the module of sunk.components that defines its component."""
    components = Path(cluster_component.__file__).parent
    for part in parts.PARTS:
        if part.component is not None:
            assert f"class {part.component}(Component)" in (components / f"{part.name}.py").read_text()
