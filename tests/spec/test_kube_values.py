"""Values the API server refuses that have the right shape: refused at load, with the field path,
by the same kubeschema rules the pod gate runs over every rendered pod."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sunk.spec import SpecError, load_spec
from tests.support.specs import spec_document

BASE = spec_document(**{"nodesets.cpu.memoryMib": 8192})
VOL = {"name": "scratch", "mountPath": "/scratch"}

CASES: dict[str, tuple[str, Any, str, str]] = {
    "sizeLimit lots": (
        "login",
        {"volumes": [{**VOL, "emptyDir": {"sizeLimit": "lots"}}]},
        "login.volumes[0].emptyDir.sizeLimit",
        "not a Kubernetes quantity",
    ),
    "defaultMode 99999": (
        "login",
        {"volumes": [{**VOL, "configMap": {"name": "x", "defaultMode": 99999}}]},
        "login.volumes[0].configMap.defaultMode",
        "not a file mode",
    ),
    "item mode": (
        "controller",
        {"volumes": [{**VOL, "secret": {"secretName": "x", "items": [{"key": "a", "path": "a", "mode": 4096}]}}]},
        "controller.volumes[0].secret.items[0].mode",
        "not a file mode",
    ),
    "maxSkew 0": (
        "login",
        {"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
        "login.topologySpreadConstraints[0].maxSkew",
        "at least 1",
    ),
    "empty nodeSelectorTerms": (
        "login",
        {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}},
        "login.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
        "at least one term",
    ),
    "two valueFrom sources": (
        "login",
        {
            "env": [
                {
                    "name": "X",
                    "valueFrom": {
                        "secretKeyRef": {"name": "s", "key": "k"},
                        "configMapKeyRef": {"name": "c", "key": "k"},
                    },
                }
            ]
        },
        "login.env[0].valueFrom",
        "exactly one of",
    ),
    "int32 overflow": (
        "login",
        {"volumes": [{**VOL, "iscsi": {"targetPortal": "t", "iqn": "i", "lun": 2**40}}]},
        "login.volumes[0].iscsi.lun",
        "does not fit a int32",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_values_the_api_server_refuses_are_refused_at_load(case: str) -> None:
    section, value, path, words = CASES[case]
    data = copy.deepcopy(BASE)
    data[section] = value
    with pytest.raises(SpecError) as info:
        load_spec(data)
    assert any(p.startswith(path) and words in p for p in info.value.problems), info.value.problems


@pytest.mark.parametrize("name", ["kubernetes.io/gpu", "a..b/gpu", "-x.com/gpu", "gpu", "example.com/-gpu"])
def test_extended_resource_names_follow_kubernetes(name: str) -> None:
    data = copy.deepcopy(BASE)
    data["nodesets"][0]["gpus"] = {"type": "h100", "count": 1, "resourceName": name}
    with pytest.raises(SpecError) as info:
        load_spec(data)
    assert any(
        p.startswith("nodesets[0].gpus.resourceName") and "not an extended resource name" in p
        for p in info.value.problems
    ), info.value.problems
