"""sunk as a library inside a platform team's program: Outputs into the spec (`late`), the
caller's depends_on, providers and transformations on every child, None for disabled parts,
typed children; and lifecycle: what a `pulumi destroy` of a stack may delete, what no `up` may
replace without the stack saying so."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from sunk.components import late
from sunk.components._k8s import resolve
from sunk.components.offline import Evaluation, Registration, evaluate, stack_config

from sunk.spec.errors import SpecError
from sunk.stackfile import load_stack, parse_config, stack_path
from tests.support.stacks import FIXTURE_STACKS

from .conftest import LIBRARY, ROOT, STACKS


def _descendants(ev: Evaluation, root_type: str) -> list[Registration]:
    (root,) = [r for r in ev.registrations if r.type == root_type]
    by_parent: dict[str, list[Registration]] = {}
    for r in ev.registrations:
        by_parent.setdefault(r.parent, []).append(r)
    out, todo = [], [root.urn]
    while todo:
        for r in by_parent.get(todo.pop(), []):
            out.append(r)
            todo.append(r.urn)
    return out


def test_every_child_waits_for_the_callers_namespace(evaluations: dict[str, Evaluation]) -> None:
    """The library program creates its Namespace, passes its name as an Output and
    `depends_on=[namespace]`: every resource under SlurmCluster (Kubernetes objects, random keys
    and components alike) depends on it, so the first `up` cannot race the Namespace."""
    ev = evaluations[LIBRARY]
    (ns,) = [r for r in ev.registrations if r.type == "kubernetes:core/v1:Namespace" and r.name == "initech-batch"]
    children = _descendants(ev, "sunk:index:SlurmCluster")
    assert len([c for c in children if c.is_kubernetes_object]) > 30
    late_ones = [c.name for c in children if ns.urn not in c.dependencies]
    assert not late_ones, f"do not wait for the Namespace: {late_ones}"


def test_outputs_reach_the_objects(evaluations: dict[str, Evaluation]) -> None:
    ev = evaluations[LIBRARY]
    urns = {r.name: r.urn for r in ev.registrations}
    objects = [r for r in _descendants(ev, "sunk:index:SlurmCluster") if r.is_kubernetes_object]
    namespaced = [r for r in objects if "namespace" in r.inputs["metadata"]]
    assert namespaced and all(r.inputs["metadata"]["namespace"] == "initech-batch" for r in namespaced)
    (state,) = [r for r in objects if r.name == "initech-hpc-controller-state"]
    assert state.inputs["spec"]["storageClassName"] == "fast-ssd"
    assert urns["fast-ssd"] in state.dependencies  # the StorageClass Output carried its resource
    (dbd,) = [r for r in objects if r.name == "initech-hpc-accounting-slurmdbd"]
    assert urns["hpc-db"] in dbd.dependencies
    assert "hpc-db" in str(dbd.inputs["spec"]["template"]["spec"])
    image = dbd.inputs["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.startswith("registry.initech.internal/hpc/slurmdbd:")
    assert ev.outputs["namespace"] == "initech-batch"
    assert ev.outputs["controller"] == "hpc-controller-0.hpc-controller.initech-batch.svc.cluster.local"
    assert "sunk-input-" not in str([r.inputs for r in ev.registrations])


def test_late_keeps_plain_strings_and_resolves_inside_longer_ones() -> None:
    assert late("fast-ssd") == "fast-ssd"
    assert resolve("no placeholder here") == "no placeholder here"
    assert resolve("sunk-input-999999-end.svc") == "sunk-input-999999-end.svc"  # unknown: left alone


def _program(tmp_path: Path, *parts: str) -> Path:
    program = tmp_path / "__main__.py"
    program.write_text("\n".join(textwrap.dedent(p) for p in parts))
    return program


SPEC = """
spec = ClusterSpec.model_validate({
    "name": "hpc", "tenant": "t", "login": {"enabled": False},
    "accounting": {"enabled": False}, "scheduling": {"preemptType": "none"},
    "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 2, "memoryMib": 4096}],
    "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
})
"""


def test_transformations_and_disabled_parts_and_typed_children(tmp_path: Path) -> None:
    program = _program(
        tmp_path,
        """
        import pulumi
        import pulumi_kubernetes as k8s
        from sunk.components import SlurmCluster
        from sunk.spec import ClusterSpec
        """,
        SPEC,
        """
        seen = []
        def mark(args):
            seen.append(args.name)
            return None
        cluster = SlurmCluster("hpc", spec, opts=pulumi.ResourceOptions(transformations=[mark]))
        assert cluster.login is None and cluster.login_endpoint is None
        assert cluster.restapi is not None and cluster.accounting is None
        assert isinstance(cluster.controller.statefulset, k8s.apps.v1.StatefulSet)
        assert isinstance(cluster.controller.state_claim, k8s.core.v1.PersistentVolumeClaim)
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert cluster.control_plane is cluster.controller  # the earlier name, for one release
        assert [w.category for w in caught] == [DeprecationWarning]
        assert isinstance(cluster.namespace_resource, k8s.core.v1.Namespace)
        assert cluster.auth.auth_key is not None and cluster.auth.sssd is None
        assert sorted(cluster.runtime.deployments) == ["scheduler", "syncer"]
        assert isinstance(cluster.runtime.deployments["syncer"], k8s.apps.v1.Deployment)
        assert isinstance(cluster.nodesets.resources["cpu"], k8s.apiextensions.CustomResource)
        assert isinstance(cluster.config.resources["slurm.conf"], k8s.core.v1.ConfigMap)
        pulumi.export("seen", seen)
        """,
    )
    ev = evaluate(program, stack="dev", config={})
    names = {r.name for r in _descendants(ev, "sunk:index:SlurmCluster")}
    assert names and names <= set(ev.outputs["seen"])


def _stack(stack: str, extra: dict[str, str] | None = None) -> Evaluation:
    config, secret = stack_config(stack_path(stack, FIXTURE_STACKS))
    return evaluate(ROOT / "__main__.py", stack=stack, config={**config, **(extra or {})}, secret_keys=secret)


def _deleted_by_destroy(ev: Evaluation) -> list[Registration]:
    """What `pulumi destroy` removes from the cluster: every object not retained on delete."""
    return [r for r in ev.kubernetes() if not r.retain_on_delete]


@pytest.mark.parametrize("stack", STACKS)
def test_a_destroy_deletes_no_crd_operator_or_state_volume(evaluations: dict[str, Evaluation], stack: str) -> None:
    ev = evaluations[stack]
    deleted = _deleted_by_destroy(ev)
    assert not [r.name for r in deleted if r.inputs["kind"] in ("CustomResourceDefinition", "PersistentVolumeClaim")]
    operator_children = (
        _descendants(ev, "sunk:index:Operator") if load_stack(stack, FIXTURE_STACKS).deploy_operator else []
    )
    assert all(r.retain_on_delete for r in operator_children if r.custom)
    assert {r.name for r in deleted} >= {
        f"{load_stack(stack, FIXTURE_STACKS).spec.name}-controller-slurmctld"
    }  # the rest goes


@pytest.mark.parametrize("stack", STACKS)
def test_state_volumes_refuse_replacement_unless_the_stack_allows_it(
    evaluations: dict[str, Evaluation], stack: str
) -> None:
    claims = [r for r in evaluations[stack].kubernetes() if r.inputs["kind"] == "PersistentVolumeClaim"]
    names = {r.name.rsplit("-", 1)[-1] for r in claims}
    accounting = load_stack(stack, FIXTURE_STACKS).spec.accounting
    assert "state" in names and ("data" in names or not accounting.enabled or accounting.external is not None)
    assert all(r.protect and r.retain_on_delete for r in claims)
    assert not [r for r in evaluations[stack].kubernetes() if r.protect and r.inputs["kind"] != "PersistentVolumeClaim"]


def test_allow_state_replacement_lifts_protection_and_retention_together() -> None:
    """Retention goes with protection: the engine also skips the delete when it *replaces* a
    retained resource, so a replacement claim would meet the old one (AlreadyExists)."""
    ev = _stack("acme-dev", {"sunk:allowStateReplacement": "true"})
    claims = [r for r in ev.kubernetes() if r.inputs["kind"] == "PersistentVolumeClaim"]
    assert claims and not any(r.protect or r.retain_on_delete for r in claims)
    kept = _stack("acme-dev")
    namespace = next(r for r in kept.kubernetes() if r.inputs["kind"] == "Namespace" and r.name.endswith("-namespace"))
    assert namespace.retain_on_delete  # deleting it would delete the claims it holds


def test_allow_state_replacement_is_a_known_setting() -> None:
    spec, _ = parse_config(
        {
            "sunk:cluster": '{"name": "a", "tenant": "t", "nodesets": [{"name": "c", "replicas": 1, "cpus": 1, '
            '"memoryMib": 1024}], "partitions": [{"name": "p", "nodesets": ["c"]}]}',
            "sunk:allowStateReplacement": "true",
        },
        "test",
    )
    assert spec.name == "a"
    with pytest.raises(SpecError, match="sunk:allowStateReplace: unknown setting"):
        parse_config({"sunk:cluster": "{}", "sunk:allowStateReplace": "true"}, "test")


def test_the_docs_show_this_program() -> None:
    """The docs' platform program page (docs/how-to/platform-program.md) shows the program tested here."""
    page = (ROOT / "docs" / "how-to" / "platform-program.md").read_text()
    blocks = [b.split("```", 1)[0] for b in page.split("```python\n")[1:]]
    (shown,) = [b for b in blocks if b.startswith("import pulumi\n")]
    program = (ROOT / "tests" / "components" / "library_program" / "__main__.py").read_text()
    assert shown == program[program.index("import pulumi") :]


@pytest.mark.parametrize("value", ["yes", 1, "[true]"])
def test_allow_state_replacement_takes_only_a_boolean(value: object) -> None:
    with pytest.raises(SpecError, match=r"sunk:allowStateReplacement: .* is not a boolean"):
        parse_config({"sunk:cluster": "{}", "sunk:allowStateReplacement": value}, "test")


def test_external_scaling_leaves_replicas_to_the_scale_subresource() -> None:
    """The scale subresource: with externalScaling a NodeSet's replicas are only the
    initial count; Pulumi ignores later changes (kubectl scale, HPA and KEDA own them)."""
    config, secret = stack_config(stack_path("acme-dev", FIXTURE_STACKS))
    raw = json.loads(config["sunk:cluster"])
    raw["nodesets"][0]["externalScaling"] = True
    ev = evaluate(
        ROOT / "__main__.py", stack="acme-dev", config={**config, "sunk:cluster": json.dumps(raw)}, secret_keys=secret
    )
    nodesets = {r.inputs["spec"]["name"]: r for r in ev.kubernetes() if r.inputs.get("kind") == "NodeSet"}
    assert nodesets[raw["nodesets"][0]["name"]].ignore_changes == ("spec.replicas",)
    assert all(r.ignore_changes == () for name, r in nodesets.items() if name != raw["nodesets"][0]["name"])


def test_a_library_program_meets_the_pod_gate_before_any_resource(tmp_path: Path) -> None:
    program = _program(
        tmp_path,
        """
        from sunk.components import SlurmCluster
        from sunk.spec import ClusterSpec
        spec = ClusterSpec.model_validate({
            "name": "hpc", "tenant": "t", "login": {"securityContext": {"capabilities": {"add": ["ALL"]}}},
            "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 2, "memoryMib": 4096}],
            "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
        })
        SlurmCluster("hpc", spec)
        """,
    )
    with pytest.raises(Exception, match=r"container sshd adds capabilities \['ALL'\]") as info:
        evaluate(program, stack="dev", config={})
    assert "Traceback" not in str(info.value)
