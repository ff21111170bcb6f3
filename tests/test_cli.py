"""`sunk validate` and `sunk slurm-files`, through sunk.cli.main."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml

from sunk.cli import SLURM_FILES_LIST, main
from sunk.render import render_slurm_files
from sunk.stackfile import list_stacks, load_stack
from tests.support.stacks import FIXTURE_PROJECT, FIXTURE_STACKS

CLUSTER = {
    "name": "research",
    "tenant": "acme",
    "nodesets": [{"name": "cpu", "cpus": 4, "memoryMib": 4096}],
    "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
}


@pytest.fixture(autouse=True)
def _in_the_fixture_project(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stacks named without a path are the fixture stacks (tests/fixtures/stacks), not the demo's."""
    monkeypatch.chdir(FIXTURE_PROJECT)


def stack_file(tmp_path: Path, cluster: object, name: str = "acme-test") -> str:
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump({"config": {"sunk:cluster": cluster}}))
    return str(path)


def test_validate_all_real_stacks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 0
    out, err = capsys.readouterr()
    # The one warning: acme-prod's directory users have no association, so only root runs jobs there.
    assert [line.split(":")[0] for line in err.splitlines()] == ["    ! accounts"]
    assert [line.split(":")[0] for line in out.splitlines()] == [f"✓ {s}" for s in list_stacks(FIXTURE_STACKS)]
    assert "✓ acme-dev: cluster research (tenant acme, namespace acme-research), 2 nodeset(s), 2 partition(s)" in out


@pytest.mark.parametrize("stack", list_stacks(FIXTURE_STACKS))
def test_validate_each_real_stack(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", stack]) == 0
    assert capsys.readouterr().out.startswith(f"✓ {stack}: ")


def test_validate_prints_every_error_and_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = {
        **CLUSTER,
        "nodesets": [{"name": "cpu", "cpus": 0, "memoryMib": 4096, "gpus": {"type": "h100", "count": 99}}],
        "login": {"sourceRanges": ["everyone"]},
        "topology": {"plugin": "mesh"},
    }
    path = stack_file(tmp_path, bad)
    assert main(["validate", path]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert lines[0] == f"✗ {path}: 4 problem(s)"
    # Each with the stack file's line, in the file's order (yaml.safe_dump sorts the keys).
    assert [line.strip().partition(":")[0] for line in lines[1:-1]] == [
        "line 5, login.sourceRanges[0]",
        "line 8, nodesets[0].cpus",
        "line 10, nodesets[0].gpus.count",
        "line 21, topology.plugin",
    ]
    assert "    line 21, topology.plugin: 'mesh' is not valid; give 'none', 'tree' or 'block'" in lines
    # The cross-field rules that read an invalid field could not run: said, and counted.
    assert lines[-1].startswith("    (4 more checks could not run until login.sourceRanges, topology.plugin are fixed")


def test_validate_reports_good_and_bad_stacks_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = stack_file(tmp_path, {**CLUSTER, "partitions": [{"name": "batch", "nodesets": ["gpu"]}]})
    assert main(["validate", "acme-dev", bad, "globex-dev"]) == 1
    out, err = capsys.readouterr()
    assert out.count("✓") == 2
    assert "partitions[0].nodesets[0]: 'gpu' is not a nodeset; known: cpu" in err


def test_validate_unknown_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "nope-dev"]) == 1
    assert "stacks: acme-dev, acme-prod, globex-dev, globex-prod" in capsys.readouterr().err


def test_slurm_files_writes_every_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "etc"
    assert main(["slurm-files", "acme-dev", "--out", str(out)]) == 0
    expected = render_slurm_files(load_stack("acme-dev", FIXTURE_STACKS).spec)
    written = {
        p.relative_to(out).as_posix(): p.read_text()
        for p in out.rglob("*")
        if p.is_file() and p.name != SLURM_FILES_LIST
    }
    assert written == expected
    assert capsys.readouterr().out.splitlines() == [str(out / rel) for rel in expected]
    assert stat.S_IMODE((out / "prolog.d/00-mark.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((out / "slurmdbd.conf").stat().st_mode) == 0o600
    assert stat.S_IMODE((out / "slurm.conf").stat().st_mode) == 0o644


def test_slurm_files_refuses_an_invalid_stack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = stack_file(tmp_path, {**CLUSTER, "name": "Bad_Name"})
    assert main(["slurm-files", path, "--out", str(tmp_path / "etc")]) == 1
    assert not (tmp_path / "etc").exists()
    assert "name: 'Bad_Name' is not valid" in capsys.readouterr().err


def test_slurm_files_needs_out(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["slurm-files", "acme-dev"])
    assert info.value.code == 2
    assert "--out" in capsys.readouterr().err


def test_slurm_files_owns_its_folder_a_reused_one_keeps_no_stale_file(tmp_path: Path) -> None:
    """Defect class "slurm-files into a reused folder": globex-prod then acme-dev into one folder
    leaves exactly acme-dev's files (and a file of the user's alone)."""
    out = tmp_path / "etc"
    assert main(["slurm-files", "globex-prod", "--out", str(out)]) == 0
    assert (out / "gres-gb200.conf").exists()
    (out / "notes.txt").write_text("mine\n")
    assert main(["slurm-files", "acme-dev", "--out", str(out)]) == 0
    expected = set(render_slurm_files(load_stack("acme-dev", FIXTURE_STACKS).spec))
    found = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert found == expected | {"notes.txt", ".sunk-slurm-files"}


def test_slurm_files_out_naming_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "slurm.conf"
    target.write_text("x\n")
    assert main(["slurm-files", "acme-dev", "--out", str(target)]) == 1
    err = capsys.readouterr().err
    assert err == f"sunk slurm-files: --out {target}: is a file; give a folder (it is created if missing)\n"
    assert target.read_text() == "x\n"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import sunk

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"sunk {sunk.__version__}"


def test_init_scaffolds_a_project_that_validates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "hpc"
    assert main(["init", str(project), "--stack", "initech-dev"]) == 0
    assert sorted(p.relative_to(project).as_posix() for p in project.rglob("*") if p.is_file()) == [
        "Pulumi.yaml",
        "__main__.py",
        "requirements.txt",
        "stacks/Pulumi.initech-dev.yaml",
    ]
    assert yaml.safe_load((project / "Pulumi.yaml").read_text())["name"] == "hpc"
    capsys.readouterr()
    monkeypatch.chdir(project / "stacks")  # found from anywhere inside the project
    assert main(["validate"]) == 0
    assert capsys.readouterr().out.startswith("✓ initech-dev: cluster slurm (tenant initech, namespace initech-slurm)")


def test_init_never_overwrites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "__main__.py").write_text("mine\n")
    assert main(["init", str(tmp_path)]) == 1
    assert "already there, not overwritten" in capsys.readouterr().err
    assert (tmp_path / "__main__.py").read_text() == "mine\n"
    assert not (tmp_path / "Pulumi.yaml").exists()
    assert main(["init", str(tmp_path / "x"), "--stack", "Bad_Name"]) == 1


def test_validate_outside_any_project_finds_no_stack_of_this_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "acme-dev"]) == 1
    assert "no file" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--node-monitor-grace-period", "0", "argument --node-monitor-grace-period: 0 s: give at least 1 s"),
        ("--node-monitor-grace-period", "soon", "'soon' is not a number of seconds"),
        ("--default-toleration-seconds", "-5", "argument --default-toleration-seconds: -5 s: give at least 0 s"),
        ("--node-startup-grace-period", "0.5", "argument --node-startup-grace-period: 0.5 s: give at least 1 s"),
        ("--node-eviction-rate", "0", "argument --node-eviction-rate: 0: give a rate above 0 per second"),
        ("--node-eviction-rate", "fast", "'fast' is not a number per second"),
    ],
)
def test_local_up_refuses_bad_lifecycle_seconds_before_anything_starts(
    flag: str, value: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["local", "up", "acme-dev", flag, value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
