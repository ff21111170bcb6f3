"""One test per defect class an adversarial review of sunk found, named for the class, each
feeding the review's own example (and a few of ours) through `sunk validate` as a user would: the
stack is refused with exit 1, the message names the field and what would be valid, and no traceback
is printed. The runtime classes ("runtime trust", "accounting") are proven where they live:
tests/runtime/*/test_*runtime_trust*, tests/slurm/test_accounting_lifecycle.py."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk.cli import main

BASE: dict[str, Any] = {
    "name": "research",
    "tenant": "acme",
    "nodesets": [
        {"name": "cpu", "cpus": 4, "memoryMib": 8192},
        {"name": "gpu", "cpus": 16, "memoryMib": 65536, "gpus": {"type": "h100", "count": 8}},
    ],
    "partitions": [
        {"name": "batch", "nodesets": ["cpu"], "default": True},
        {"name": "gpu", "nodesets": ["gpu"]},
    ],
    "qos": [{"name": "low"}],
}


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, *expected: str) -> None:
    path = tmp_path / "Pulumi.acme-hostile.yaml"
    path.write_text(text)
    assert main(["validate", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    for words in expected:
        assert words in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # nothing written


def _stack(**changes: Any) -> str:
    cluster = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, last = dotted.split(".")
        node: Any = cluster
        for part in parents:
            node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value
    return yaml.safe_dump({"config": {"sunk:cluster": cluster}})


def test_hostile_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(20)
    )
    _refused(tmp_path, capsys, laughs, "aliases (*a) are not accepted")
    _refused(tmp_path, capsys, "config: &c\n  sunk:cluster: *c\n", "aliases (*c) are not accepted")
    _refused(tmp_path, capsys, "config:\n  sunk:cluster: " + "[" * 3000 + "]" * 3000 + "\n", "deeper than 32 levels")


def test_duplicate_keys_and_loose_types(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _stack().replace("    - cpus: 4\n", "    - cpus: 4\n      cpus: 64\n", 1)
    _refused(tmp_path, capsys, text, "duplicate key 'cpus'")
    _refused(tmp_path, capsys, _stack().replace("cpus: 4", "cpus: yes"), "'yes' is a boolean in YAML 1.1")
    text = _stack(**{"nodesets.0.updateStrategy": {"maxUnavailable": True}})
    _refused(
        tmp_path,
        capsys,
        text,
        "nodesets[0].updateStrategy.maxUnavailable: a whole number or text is required, not a boolean",
    )
    # No coercion anywhere: a boolean is not 1, 8192.0 is not a whole number.
    _refused(
        tmp_path,
        capsys,
        _stack(**{"nodesets.0.cpus": True}),
        "nodesets[0].cpus: a whole number up to 65533 is required, not a boolean (True)",
    )
    _refused(tmp_path, capsys, _stack(**{"nodesets.0.memoryMib": 8192.0}), "nodesets[0].memoryMib: a whole number")


def test_lines_smuggled_into_generated_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _stack(**{"accounting.extraSlurmdbdConf": ["DebugLevel=info StoragePass=hunter2"]})
    _refused(tmp_path, capsys, text, "accounting.extraSlurmdbdConf[0]", "passwords come from a Secret")
    _refused(tmp_path, capsys, _stack(**{"partitions.1.extra": ["Default=YES"]}), "partitions[1].extra[0]: Default")
    _refused(tmp_path, capsys, _stack(**{"partitions.1.extra": ["Nodes=ALL"]}), "partitions[1].extra[0]: Nodes")


def test_names_that_collide_with_the_projects_own_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cpu = {**BASE["nodesets"][0], "name": "controller"}
    text = _stack(**{"nodesets.0": cpu, "partitions.0.nodesets": ["controller"]})
    _refused(tmp_path, capsys, text, "nodesets[0].name: 'controller' would take sunk's own")
    _refused(tmp_path, capsys, _stack(namespace="kube-system"), "namespace: 'kube-system' is reserved")
    _refused(tmp_path, capsys, _stack(namespace="sunk-system"), "namespace: 'sunk-system' is reserved")


def test_settings_that_contradict_each_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _refused(tmp_path, capsys, _stack(**{"nodesets.0.features": ["gpu"]}), "nodesets[0].features[0]")


def test_mount_clashes_caught_before_any_resource(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    volume = {"name": "v", "mountPath": "/etc/slurm", "emptyDir": True}
    _refused(tmp_path, capsys, _stack(**{"nodesets.0.volumes": [volume]}), "nodesets[0].volumes[0].mountPath")
    volume = {"name": "v", "mountPath": "/data/", "hostPath": "/mnt/../etc"}
    _refused(tmp_path, capsys, _stack(**{"nodesets.0.volumes": [volume]}), "nodesets[0].volumes[0].mountPath")


def test_numbers_beyond_what_slurm_or_kubernetes_accept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _refused(tmp_path, capsys, _stack(**{"nodesets.0.cpus": 10**20}), "nodesets[0].cpus")
    _refused(tmp_path, capsys, _stack(**{"nodesets.0.memoryMib": 10**25}), "nodesets[0].memoryMib")
    _refused(tmp_path, capsys, _stack(qos=[{"name": "low", "usageFactor": float("inf")}]), "qos[0].usageFactor")
    _refused(
        tmp_path, capsys, _stack(**{"scheduling.priorityWeights": {"age": 2**40}}), "scheduling.priorityWeights.age"
    )
    weights = {"age": 2**31, "fairshare": 2**31}
    _refused(
        tmp_path,
        capsys,
        _stack(**{"scheduling.priorityWeights": weights}),
        "scheduling.priorityWeights: the weights add up",
    )


def test_values_kubernetes_rejects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _refused(tmp_path, capsys, _stack(labels={"Bad Key": "x"}), "labels")
    text = _stack(**{"controller.stateStorage": {"storageClass": "Fast_SSD"}})
    _refused(tmp_path, capsys, text, "controller.stateStorage.storageClass", "DNS-1123 subdomain")


def test_accounting_settings_that_cannot_hold(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = _stack(accounts=[{"name": "ml", "qos": ["gold"], "users": ["ada"]}])
    _refused(tmp_path, capsys, text, "accounts[0].qos[0]: 'gold' is not a QOS")
    text = _stack(
        accounts=[{"name": "ml", "users": ["ada"]}],
        accounting={"enabled": False},
        scheduling={"preemptType": "none"},
        qos=[],
    )
    _refused(tmp_path, capsys, text, "accounts: accounts live in accounting")
