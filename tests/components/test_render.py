"""`sunk render`: every stack renders, every object is valid Kubernetes for a pinned version,
NodeSets validate against the generated CRD, the output is golden and deterministic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from openapi_schema_validator import OAS30Validator
from sunk.components import render as render_module
from sunk.components.offline import REDACTED, Evaluation
from sunk.components.render import CLUSTER_SCOPE, Rendered, file_name, render_evaluation, write

from sunk.cli import main
from sunk.manifests.nodeset_crd import closed, open_api_schema
from sunk.nodeset_resource import API_VERSION as NODESET_API

from .conftest import LIBRARY, ROOT, STACKS

KUBERNETES_VERSION = "1.33"
"""Pinned: native sidecars (restartPolicy on init containers) are GA, and it is what clusters run."""
SCHEMAS = Path(__file__).parent / "schemas"


def _resource_names(ev: Evaluation) -> str:
    """The logical names the engine would see, in a stable order: renaming one is a replacement
    (or a delete) on the next `pulumi up`, so a change here must be deliberate."""
    return "".join(f"{r.type} {r.name}\n" for r in sorted(ev.registrations, key=lambda r: (r.type, r.name)))


@pytest.mark.parametrize("stack", STACKS)
def test_golden_manifests_and_resource_names(
    rendered: dict[str, Rendered], evaluations: dict[str, Evaluation], golden: Any, stack: str
) -> None:
    files = dict(rendered[stack].files)
    files["resource-names.txt"] = _resource_names(evaluations[stack])
    golden(f"manifests/{stack}", files)


def test_golden_library_program(rendered: dict[str, Rendered], evaluations: dict[str, Evaluation], golden: Any) -> None:
    files = dict(rendered[LIBRARY].files)
    files["resource-names.txt"] = _resource_names(evaluations[LIBRARY])
    golden("manifests/library-program", files)


@pytest.mark.parametrize("name", [*STACKS, LIBRARY])
def test_every_object_is_valid_kubernetes(rendered: dict[str, Rendered], name: str) -> None:
    nodeset = OAS30Validator(closed(open_api_schema()))
    monitor = OAS30Validator(yaml.safe_load((SCHEMAS / "servicemonitor.yaml").read_text()))
    rules = OAS30Validator(yaml.safe_load((SCHEMAS / "prometheusrule.yaml").read_text()))
    kinds = set()
    for text in rendered[name].files.values():
        obj = yaml.safe_load(text)  # what kubectl reads, not the in-memory dict
        kinds.add(obj["kind"])
        if obj["apiVersion"] == NODESET_API:
            errors = [e.message for e in nodeset.iter_errors(obj)]
            assert not errors, f"{obj['metadata']['name']}: {errors}"
        elif obj["kind"] in ("ServiceMonitor", "PrometheusRule"):
            validator = monitor if obj["kind"] == "ServiceMonitor" else rules
            errors = [e.message for e in validator.iter_errors(obj)]
            assert not errors, f"{obj['metadata']['name']}: {errors}"
        else:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    assert "NodeSet" in kinds


def test_the_validation_above_can_fail(rendered: dict[str, Rendered]) -> None:
    sts = next(yaml.safe_load(t) for n, t in rendered["acme-dev"].files.items() if "statefulset" in n)
    sts["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["tcpSocket"]["prot"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(sts, KUBERNETES_VERSION, strict=True)
    cr = next(yaml.safe_load(t) for n, t in rendered["acme-dev"].files.items() if "nodeset" in n)
    cr["spec"]["gpus"] = {"type": "h100", "count": "two"}
    assert list(OAS30Validator(closed(open_api_schema())).iter_errors(cr))


def test_rendered_crd_is_the_generated_one(rendered: dict[str, Rendered]) -> None:
    crd = yaml.safe_load(
        rendered["acme-dev"].files[f"01-customresourcedefinition-{CLUSTER_SCOPE}-nodesets.slurm.sunk.dev.yaml"]
    )
    assert crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == open_api_schema()


def test_file_names_order_objects_for_kubectl_apply(rendered: dict[str, Rendered]) -> None:
    names = list(rendered["acme-dev"].files)
    assert names == sorted(names)
    kinds = [yaml.safe_load(rendered["acme-dev"].files[n])["kind"] for n in names]
    assert kinds[0] == "Namespace"
    assert kinds.index("CustomResourceDefinition") < kinds.index("NodeSet")
    assert max(i for i, k in enumerate(kinds) if k in {"ConfigMap", "Secret"}) < kinds.index("StatefulSet")
    for n in names:
        obj = yaml.safe_load(rendered["acme-dev"].files[n])
        assert n == file_name(obj)


@pytest.mark.parametrize("name", [*STACKS, LIBRARY])
def test_secrets_are_redacted_unless_asked(
    rendered: dict[str, Rendered], evaluations: dict[str, Evaluation], name: str
) -> None:
    shown = render_evaluation(evaluations[name], show_secrets=True)
    placeholders = {
        v
        for n, t in shown.files.items()
        if "-secret-" in n
        for part in ("data", "stringData")
        for v in (yaml.safe_load(t).get(part) or {}).values()
    }
    redacted = "".join(rendered[name].files.values())
    assert placeholders and not [p for p in placeholders if p in redacted]
    for n, t in rendered[name].files.items():
        if "-secret-" in n:
            obj = yaml.safe_load(t)
            assert "data" not in obj and set(obj["stringData"].values()) == {REDACTED}
            assert set(obj["stringData"]) == set(yaml.safe_load(shown.files[n]).get("data") or {}) | set(
                yaml.safe_load(shown.files[n]).get("stringData") or {}
            )


def test_show_secrets_writes_placeholders_not_keys(evaluations: dict[str, Evaluation]) -> None:
    shown = render_evaluation(evaluations["acme-dev"], show_secrets=True)
    keys = yaml.safe_load(shown.files["04-secret-acme-research-research-login-host-keys.yaml"])
    assert "offline placeholder" in keys["stringData"]["ssh_host_ed25519_key"]
    db = yaml.safe_load(shown.files["04-secret-acme-research-research-mariadb.yaml"])
    assert db["stringData"]["password"].startswith("OFFLINE")


def test_same_stack_same_bytes_across_processes(rendered: dict[str, Rendered], tmp_path: Path) -> None:
    for seed in ("1", "2"):
        out = tmp_path / seed
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run(
            [sys.executable, "-m", "sunk", "render", "acme-dev", "--out", str(out)],
            check=True,
            cwd=ROOT,
            env=env,
            capture_output=True,
        )
        on_disk = {p.name: p.read_bytes() for p in out.iterdir()}
        assert on_disk == {n: t.encode() for n, t in rendered["acme-dev"].files.items()}


def test_render_command_prints_a_preview_and_replaces_earlier_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "07-deployment-acme-research-gone.yaml"
    stale.write_text("kind: Deployment\n")
    mine = tmp_path / "notes.txt"
    mine.write_text("not ours")
    assert main(["render", "globex-dev", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "+ apps/v1 StatefulSet" in out and "globex-sim/sim-controller" in out
    assert "Resources: " in out and "by kind:" in out and "Outputs:" in out
    assert "loginEndpoint: <any node address>:<pending>" in out
    assert not stale.exists() and mine.exists()
    assert (tmp_path / "07-statefulset-globex-sim-sim-controller.yaml").is_file()


def test_render_command_rejects_a_bad_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "Pulumi.bad-dev.yaml"
    text = (ROOT / "stacks" / "Pulumi.globex-dev.yaml").read_text().replace("cpus: 8", "cpus: 0")
    bad.write_text(text)
    assert main(["render", str(bad), "--out", str(tmp_path / "out")]) == 1
    assert "nodesets[0].cpus" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_write_is_idempotent(rendered: dict[str, Rendered], tmp_path: Path) -> None:
    write(rendered["globex-prod"], tmp_path)
    first = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    write(rendered["globex-prod"], tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == first


def test_the_fast_yaml_emitter_writes_the_same_bytes_as_pythons(rendered: dict[str, Rendered]) -> None:
    """render uses libyaml's emitter when PyYAML has it; the goldens must not depend on that."""
    assert render_module._SafeDumper.__name__ == "CSafeDumper"  # the wheels ship libyaml: the fast path is taken

    class PythonDumper(yaml.SafeDumper):
        pass

    PythonDumper.add_representer(str, render_module._str)
    for name, result in rendered.items():
        for obj in result.objects:
            python = yaml.dump(obj, Dumper=PythonDumper, sort_keys=True, default_flow_style=False, width=120)
            assert render_module.to_yaml(obj) == python, f"{name}: {file_name(obj)}"


def test_render_all_writes_each_stack_into_its_folder_with_the_single_stack_bytes(
    rendered: dict[str, Rendered], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["render", "--all", "--jobs", "2", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(STACKS)
    for stack in STACKS:
        on_disk = {p.name: p.read_text() for p in (tmp_path / stack).iterdir()}
        assert on_disk == rendered[stack].files
    out = capsys.readouterr().out
    assert f"Rendered {len(STACKS)} stacks into {tmp_path} (2 at a time)" in out


def test_a_matrix_with_one_bad_stack_writes_nothing_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "Pulumi.bad-dev.yaml"
    bad.write_text((ROOT / "stacks" / "Pulumi.globex-dev.yaml").read_text().replace("cpus: 8", "cpus: 0"))
    out = tmp_path / "out"
    assert main(["render", "globex-dev", str(bad), "acme-dev", "--jobs", "2", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "nodesets[0].cpus" in err and str(bad) in err
    assert "1 of 3 stacks failed; nothing written" in err
    assert not out.exists()


def test_a_matrix_refuses_the_same_stack_twice_and_bad_job_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    same = tmp_path / "Pulumi.globex-dev.yaml"
    same.write_text((ROOT / "stacks" / "Pulumi.globex-dev.yaml").read_text())
    assert main(["render", "globex-dev", str(same), "--out", str(tmp_path / "out")]) == 1
    assert "both stack 'globex-dev'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["render", "--all", "--jobs", "0", "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    assert "0 is less than 1; give 1 or more" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
