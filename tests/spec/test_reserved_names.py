"""Names that collide with the project's own objects (the defect class "names that collide"): each
refused at load with the field and what is reserved, before any resource or file exists."""

from __future__ import annotations

from typing import Any

import pytest

from sunk.spec import SpecError
from sunk.spec.errors import load_spec
from tests.support.specs import spec_document


def _with(change: dict[str, Any]) -> dict[str, Any]:
    return spec_document("minimal", change)


def _problems(spec: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(spec, "test")
    return info.value.problems


@pytest.mark.parametrize("name", ["controller", "login", "restapi", "accounting", "mariadb", "login-extra"])
def test_a_nodeset_may_not_take_sunks_own_names(name: str) -> None:
    spec = _with(
        {
            "nodesets": [{"name": name, "cpus": 4, "memoryMib": 4096}],
            "partitions": [{"name": "batch", "nodesets": [name], "default": True}],
        }
    )
    (problem,) = _problems(spec)
    hit = name.split("-")[0]
    assert problem.startswith(f"nodesets[0].name: {name!r} would take sunk's own research-{hit} objects")
    assert "controller, dashboard" in problem


@pytest.mark.parametrize("name", ["controller-state", "mariadb-data"])
def test_a_created_shared_volume_may_not_take_sunks_claim_names(name: str) -> None:
    volume = {"name": name, "mountPath": "/data", "create": {"size": "1Gi"}, "mountOn": ["compute"]}
    (problem,) = _problems(_with({"sharedVolumes": [volume]}))
    assert problem.startswith(f"sharedVolumes[0].name: {name!r} would name its claim like sunk's own")


def test_an_existing_claim_keeps_its_own_name() -> None:
    volume = {"name": "controller-data", "mountPath": "/data", "existingClaim": "mine", "mountOn": ["compute"]}
    load_spec(_with({"sharedVolumes": [volume]}), "test")


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "sunk-system", "default"])
def test_reserved_namespaces_are_refused(namespace: str) -> None:
    (problem,) = _problems(_with({"namespace": namespace}))
    assert problem == (
        f"namespace: {namespace!r} is reserved (kube-*, sunk-system, default); give the cluster a namespace of its own"
    )


def test_names_that_merely_contain_a_reserved_word_are_fine() -> None:
    load_spec(
        _with(
            {
                "nodesets": [{"name": "logins", "cpus": 4, "memoryMib": 4096}],
                "partitions": [{"name": "batch", "nodesets": ["logins"], "default": True}],
                "namespace": "acme-kube-system",
            }
        ),
        "test",
    )
