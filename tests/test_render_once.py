"""The Slurm files of a spec are rendered once and handed to every consumer (sunk.memo,
sunk.manifests.config.rendered_files): the ConfigMaps, each role's projection, each NodeSet's files
and hash, and the pod gate. Before, acme-dev's validation rendered them 23 times and a stack of N
NodeSets about 5N times, so `sunk validate` grew with N squared."""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

import sunk.manifests.config as config
from sunk import keys, podgate
from sunk.manifests.auth import auth_refs
from sunk.manifests.cluster import cluster_manifests
from sunk.manifests.config import config_maps, nodeset_hash, rendered_files, slurm_files
from sunk.manifests.nodeset import nodeset_resources
from sunk.memo import PerObject
from sunk.podgate import _selector_problems, admitted, gate_problems, stack_objects
from sunk.render import render_slurm_files
from sunk.spec import load_spec
from sunk.stackfile import load_stack, parse_config
from tests.support.specs import spec_document
from tests.support.stacks import FIXTURE_STACKS


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts Slurm renders and pod gates from here on."""
    counts: Counter[str] = Counter()

    def counted(label: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts[label] += 1
            return original(*args, **kwargs)

        return call

    monkeypatch.setattr(config, "render_slurm_files", counted("render", render_slurm_files))
    monkeypatch.setattr(podgate, "_problems", counted("gate", podgate._problems))
    return counts


def _nodesets(count: int) -> dict[str, Any]:
    names = [f"n{i}" for i in range(count)]
    return spec_document(
        nodesets=[{"name": n, "cpus": 4, "memoryMib": 8192, "gpus": {"type": "h100", "count": 1}} for n in names],
        partitions=[{"name": "all", "nodesets": names, "default": True}],
    )


def test_validating_a_stack_renders_its_files_once_and_gates_once(calls: Counter[str]) -> None:
    loaded = load_stack("acme-dev", FIXTURE_STACKS)  # sunk validate's work: the spec, then the pod gate
    assert calls == {"render": 1, "gate": 1}
    spec = loaded.spec
    # Every other consumer reads the same render.
    cluster_manifests(spec)
    nodeset_resources(spec, auth_refs(spec))
    stack_objects(spec, loaded.operator)
    assert calls == {"render": 1, "gate": 1}
    assert slurm_files(spec) == render_slurm_files(spec)


def test_renders_do_not_grow_with_the_nodesets(calls: Counter[str]) -> None:
    for count in (1, 40):
        calls.clear()
        spec = load_spec(_nodesets(count))
        assert gate_problems(spec) == []
        assert calls == {"render": 1, "gate": 1}, count


def test_each_nodeset_hash_reads_its_own_gres_file_from_the_shared_render() -> None:
    spec = load_spec(_nodesets(2))
    other = load_spec(spec_document(_nodesets(2), **{"nodesets.n1.gpus.count": 2}))
    assert nodeset_hash(spec, spec.nodesets[0]) == nodeset_hash(other, other.nodesets[0])
    assert nodeset_hash(spec, spec.nodesets[1]) != nodeset_hash(other, other.nodesets[1])


def test_a_changed_spec_is_a_new_object_and_renders_afresh(calls: Counter[str]) -> None:
    spec = load_spec(spec_document())
    first = slurm_files(spec)
    changed = spec.model_copy(update={"name": "other"})
    assert "ClusterName=other" in slurm_files(changed)["slurm.conf"]
    assert "ClusterName=research" in first["slurm.conf"]
    assert calls["render"] == 2


def test_the_shared_files_are_read_only() -> None:
    files = slurm_files(load_spec(spec_document()))
    with pytest.raises(TypeError):
        files["slurm.conf"] = "ClusterName=mine\n"  # type: ignore[index]


def test_a_value_is_dropped_with_its_object() -> None:
    class Frozen:
        pass

    memo: PerObject[Frozen, list[int]] = PerObject(lambda _obj: [1])
    kept, dropped = Frozen(), Frozen()
    assert memo(kept) is memo(kept)
    memo(dropped)
    assert len(memo) == 2
    del dropped
    gc.collect()
    assert len(memo) == 1 and memo(kept) == [1]


def test_rendered_files_hold_what_slurmd_mounts_and_the_restart_lines() -> None:
    spec = load_spec(spec_document())
    done = rendered_files(spec)
    assert "slurm.conf" in done.node_paths and "slurmdbd.conf" not in done.node_paths
    assert all(not path.startswith("gres-") for path in done.node_paths)
    assert config_maps(spec)  # from the same render
    assert list(done.restart) == config.restart_lines(done.files["slurm.conf"])


def test_the_gate_admits_a_spec_once_it_passed_with_or_without_an_operator() -> None:
    spec, operator = parse_config({"sunk:cluster": spec_document(), "sunk:operator": True}, "stack")
    assert operator is not None and admitted(spec)  # validation gated it with the operator
    fresh = load_spec(spec_document())
    assert not admitted(fresh)
    assert gate_problems(fresh) == [] and admitted(fresh)


def test_a_spec_the_gate_refuses_is_not_admitted() -> None:
    spec = load_spec(spec_document(login={"securityContext": {"capabilities": {"add": ["ALL"]}}}))
    assert gate_problems(spec) and not admitted(spec)


def _brute_selector_problems(objs: list[dict[str, Any]]) -> list[str]:
    """What _selector_problems found before its label index: every Service against every pod."""
    problems = []
    pods = [(name, meta.get("labels") or {}) for name, meta, _ in podgate._pods(objs)]
    for m in objs:
        if m["kind"] != "Service":
            continue
        selector = (m.get("spec") or {}).get("selector") or {}
        own = (m["metadata"].get("labels") or {}).get(keys.APP_COMPONENT) or (
            "slurmd" if keys.NODESET in selector else None
        )
        if not selector or own is None:
            continue
        for name, labels in pods:
            if labels.get(keys.APP_COMPONENT) != own and all(labels.get(k) == v for k, v in selector.items()):
                problems.append(f"Service/{m['metadata']['name']} selects {name}")
    return problems


def test_the_label_index_finds_what_comparing_every_service_with_every_pod_finds() -> None:
    objs, _ = stack_objects(load_spec(_nodesets(6)))
    services = [o for o in objs if o["kind"] == "Service"]
    pods = [o for o in objs if o["kind"] in ("StatefulSet", "Deployment", "Pod")]
    # Plant Services' selectors (less the role's label) on pods of every role, one more each round.
    for i, service in enumerate(services):
        pod = pods[(3 * i + 1) % len(pods)]
        template = pod["metadata"] if pod["kind"] == "Pod" else pod["spec"]["template"]["metadata"]
        selector = service["spec"].get("selector") or {}
        template.setdefault("labels", {}).update({k: v for k, v in selector.items() if k != keys.APP_COMPONENT})
        brute = _brute_selector_problems(objs)
        found = _selector_problems(objs)
        assert [p.split(",")[0] for p in found] == brute
    assert brute  # the planted labels were found
