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
from sunk.components.offline import MADE_AT_DEPLOY, REDACTED, Evaluation
from sunk.components.render import CLUSTER_SCOPE, Rendered, file_name, render_evaluation, write

from sunk import keys
from sunk.cli import main
from sunk.manifests.nodeset_crd import closed, open_api_schema
from sunk.nodeset_resource import API_VERSION as NODESET_API
from tests.support.stacks import FIXTURE_PROJECT, FIXTURE_STACKS

from .conftest import LIBRARY, STACKS

KUBERNETES_VERSION = "1.33"
"""Pinned: native sidecars (restartPolicy on init containers) are GA, and it is what clusters run."""
SCHEMAS = Path(__file__).parent / "schemas"


@pytest.fixture(autouse=True)
def _in_the_fixture_project(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stacks named without a path are the fixture stacks (tests/fixtures/stacks), not the demo's."""
    monkeypatch.chdir(FIXTURE_PROJECT)


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
        rendered["acme-dev"].files[f"crds/01-customresourcedefinition-{CLUSTER_SCOPE}-nodesets.slurm.sunk.dev.yaml"]
    )
    assert crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] == open_api_schema()


def test_file_names_order_objects_for_kubectl_apply(rendered: dict[str, Rendered]) -> None:
    names = list(rendered["acme-dev"].files)
    assert names == sorted(names, key=lambda n: (not n.startswith("crds/"), n))
    kinds = [yaml.safe_load(rendered["acme-dev"].files[n])["kind"] for n in names]
    assert kinds[0] == "CustomResourceDefinition" and kinds[1] == "Namespace"  # crds/ first, then by rank
    assert kinds.index("CustomResourceDefinition") < kinds.index("NodeSet")
    assert max(i for i, k in enumerate(kinds) if k in {"ConfigMap", "Secret"}) < kinds.index("StatefulSet")
    for n in names:
        obj = yaml.safe_load(rendered["acme-dev"].files[n])
        assert n == file_name(obj)


@pytest.mark.parametrize("name", [*STACKS, LIBRARY])
def test_secrets_are_redacted_unless_asked(pulumi_keys: dict[str, Evaluation], name: str) -> None:
    """With keys from Pulumi (`pulumi up`, previewed offline): a generated key is in no file,
    with or without --show-secrets, only named in the made-at-deploy annotation; every other
    Secret value is redacted unless asked."""
    shown = render_evaluation(pulumi_keys[name], show_secrets=True)
    redacted = render_evaluation(pulumi_keys[name])
    assert shown.files.keys() == redacted.files.keys()
    made = 0
    for n, t in redacted.files.items():
        if "-secret-" not in n:
            continue
        obj, full = yaml.safe_load(t), yaml.safe_load(shown.files[n])
        generated = set(filter(None, obj["metadata"].get("annotations", {}).get(keys.MADE_AT_DEPLOY, "").split(",")))
        made += len(generated)
        kept = set(full.get("data") or {}) | set(full.get("stringData") or {})
        assert not generated & kept, n
        assert "data" not in obj and set((obj.get("stringData") or {}).values()) <= {REDACTED}
        assert set(obj.get("stringData") or {}) == kept, n
        assert REDACTED not in shown.files[n] and MADE_AT_DEPLOY not in shown.files[n]
    assert made, "expected generated keys in a program that has Pulumi make them"


@pytest.mark.parametrize("name", [*STACKS, LIBRARY])
def test_the_flag_changes_only_the_values_of_secrets(evaluations: dict[str, Evaluation], name: str) -> None:
    """What docs/how-to/gitops-render.md says --show-secrets changes, and nothing else: the same
    files, byte for byte, but for the values of Secrets a program writes (a stack's own program
    writes none: its render is the same with or without the flag). No value is redacted outside a
    Secret, so a plain render applied as is starts every pod that needs no out-of-band Secret."""
    shown = render_evaluation(evaluations[name], show_secrets=True).files
    plain = render_evaluation(evaluations[name]).files
    assert shown.keys() == plain.keys()
    differ = sorted(n for n in plain if plain[n] != shown[n])
    assert all("-secret-" in n for n in differ), differ
    assert [n for n, t in plain.items() if REDACTED in t and "-secret-" not in n] == []
    if name in STACKS:
        assert differ == []


def test_sssd_conf_is_a_configmap_whole_in_a_plain_render(evaluations: dict[str, Evaluation]) -> None:
    """A directory stack: sssd.conf reaches the sidecars from a plain render, unredacted."""
    files = render_evaluation(evaluations["acme-prod"]).files
    (name,) = [n for n in files if n.endswith("-sssd-conf.yaml")]
    obj = yaml.safe_load(files[name])
    assert obj["kind"] == "ConfigMap"
    conf = obj["data"]["sssd.conf"]
    assert "ldap_default_bind_dn = " in conf and "ldap_default_authtok =" not in conf


def test_a_pulumi_made_key_is_left_out_so_pods_fail_closed(pulumi_keys: dict[str, Evaluation]) -> None:
    """Before: a redacted munge.key was ~106 bytes of text munged takes as a key, and
    --show-secrets wrote the same bytes in every render. Now the key is absent: a pod mounting it
    from an applied render does not start (the kubelet finds no such key)."""
    for show in (False, True):
        files = render_evaluation(pulumi_keys["acme-dev"], show_secrets=show).files
        auth = yaml.safe_load(files["04-secret-acme-research-research-auth.yaml"])
        assert "data" not in auth and "stringData" not in auth
        assert auth["metadata"]["annotations"] == {keys.MADE_AT_DEPLOY: "munge.key"}
        db = yaml.safe_load(files["04-secret-acme-research-research-mariadb.yaml"])
        assert db["metadata"]["annotations"][keys.MADE_AT_DEPLOY] == "password,root-password"
        assert "OFFLINE" not in "".join(files.values()) and "PRIVATE KEY" not in "".join(files.values())


def test_same_stack_same_bytes_across_processes(rendered: dict[str, Rendered], tmp_path: Path) -> None:
    for seed in ("1", "2"):
        out = tmp_path / seed
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run(
            [sys.executable, "-m", "sunk", "render", "acme-dev", "--out", str(out)],
            check=True,
            cwd=FIXTURE_PROJECT,
            env=env,
            capture_output=True,
        )
        on_disk = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
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
    text = (FIXTURE_STACKS / "Pulumi.globex-dev.yaml").read_text().replace("cpus: 8", "cpus: 0")
    bad.write_text(text)
    assert main(["render", str(bad), "--out", str(tmp_path / "out")]) == 1
    assert "nodesets[0].cpus" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_write_is_idempotent(rendered: dict[str, Rendered], tmp_path: Path) -> None:
    write(rendered["globex-prod"], tmp_path)
    first = {p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    write(rendered["globex-prod"], tmp_path)
    assert {p.relative_to(tmp_path).as_posix(): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == first


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
        folder = tmp_path / stack
        on_disk = {p.relative_to(folder).as_posix(): p.read_text() for p in folder.rglob("*") if p.is_file()}
        assert on_disk == rendered[stack].files
    out = capsys.readouterr().out
    assert f"Rendered {len(STACKS)} stacks into {tmp_path} (2 at a time)" in out


def test_a_matrix_with_one_bad_stack_writes_nothing_and_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "Pulumi.bad-dev.yaml"
    bad.write_text((FIXTURE_STACKS / "Pulumi.globex-dev.yaml").read_text().replace("cpus: 8", "cpus: 0"))
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
    same.write_text((FIXTURE_STACKS / "Pulumi.globex-dev.yaml").read_text())
    assert main(["render", "globex-dev", str(same), "--out", str(tmp_path / "out")]) == 1
    assert "both stack 'globex-dev'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main(["render", "--all", "--jobs", "0", "--out", str(tmp_path / "out")])
    assert exit_.value.code == 2
    assert "0 is less than 1; give 1 or more" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", STACKS)
@pytest.mark.parametrize("show_secrets", [False, True])
def test_no_render_holds_key_material(evaluations: dict[str, Evaluation], name: str, show_secrets: bool) -> None:
    """`sunk render` makes no key, password or host key, placeholder or real, with or without
    --show-secrets: no generated value is registered, and a stack's render writes no Secret at all
    (sssd.conf, which names no password, is a ConfigMap). The key generator's Job makes them in the
    cluster."""
    ev = evaluations[name]
    assert ev.generated() == []
    files = render_evaluation(ev, show_secrets=show_secrets).files
    assert [n for n in files if "-secret-" in n] == []
    text = "".join(files.values())
    for marker in ("PRIVATE KEY", "OFFLINE", "offline placeholder", "munge.key:", "jwt_hs256.key:"):
        assert marker not in text, marker
    jobs = [yaml.safe_load(t) for n, t in files.items() if n.startswith("08-job-") and "-keygen-" in n]
    assert len(jobs) == 1


@pytest.mark.parametrize("name", STACKS)
def test_pulumi_up_and_the_render_differ_only_in_who_makes_the_keys(
    evaluations: dict[str, Evaluation], pulumi_keys: dict[str, Evaluation], name: str
) -> None:
    """The same program either way: with `sunk:keys: cluster` (the render) the key generator's
    ServiceAccount, Role, RoleBinding and Job; with keys from Pulumi the Secrets holding them, and
    where a webhook is rendered the generator still, making only its certificate (a Job of its own).
    Every other object is byte for byte the same."""
    cluster = render_evaluation(evaluations[name]).files
    state = render_evaluation(pulumi_keys[name]).files
    only_cluster = {n for n in cluster.keys() - state.keys()}
    only_state = {n for n in state.keys() - cluster.keys()}
    differ = [n for n in cluster.keys() & state.keys() if cluster[n] != state[n]]
    assert only_cluster and all("-keygen" in n for n in only_cluster), only_cluster
    if any(yaml.safe_load(t)["kind"] == "MutatingWebhookConfiguration" for t in cluster.values()):
        assert {yaml.safe_load(cluster[n])["kind"] for n in only_cluster} == {"Job"}
        assert all(n.startswith("04-secret-") or "-keygen-" in n for n in only_state), only_state
        assert sorted(yaml.safe_load(cluster[n])["kind"] for n in differ) == ["CronJob"]
        return
    assert {yaml.safe_load(cluster[n])["kind"] for n in only_cluster} == {
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Job",
        "NetworkPolicy",
    }
    assert only_state and all(n.startswith("04-secret-") for n in only_state), only_state
    assert differ == []


@pytest.mark.parametrize("name", STACKS)
def test_crds_have_their_own_folder_applied_first(rendered: dict[str, Rendered], name: str, tmp_path: Path) -> None:
    """kubectl maps every kind of an apply before it creates anything, so a NodeSet beside its
    CRD fails the first apply: the CRDs go to crds/, and the summary gives the commands in order."""
    files = rendered[name].files
    for n, text in files.items():
        assert (yaml.safe_load(text)["kind"] == "CustomResourceDefinition") == n.startswith("crds/"), n
    write(rendered[name], tmp_path)
    has_crds = any(n.startswith("crds/") for n in files)
    assert (tmp_path / "crds").is_dir() == has_crds
    command = render_module.apply_command(files, tmp_path)
    if has_crds:
        assert command == (
            f"kubectl apply -f {tmp_path}/crds"
            f" && kubectl wait --for=jsonpath='{{.status.conditions[0].type}}' --timeout=60s -f {tmp_path}/crds"
            f" && kubectl wait --for=condition=Established --timeout=60s -f {tmp_path}/crds"
            f" && kubectl apply -f {tmp_path}"
        )
    else:
        assert command == f"kubectl apply -f {tmp_path}"
    # a later render without CRDs removes the folder it no longer has
    render_module.write_files({n: t for n, t in files.items() if not n.startswith("crds/")}, tmp_path)
    assert not (tmp_path / "crds").exists()
