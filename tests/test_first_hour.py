"""A new user's first hour: `sunk init`, validate, render, list, the usual mistakes. Nothing
succeeds having checked nothing, no command falls back to sunk's own demo stack, no traceback, and
the scaffold is a cluster an ordinary user can run jobs on."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sunk import install, scaffold
from sunk.cli import main
from sunk.spec.advice import warnings
from sunk.spec.errors import SpecError
from sunk.stackfile import load_stack

ROOT = Path(__file__).resolve().parent.parent
LDAP = {
    "uris": ["ldaps://ldap.example.com:636"],
    "baseDn": "dc=example,dc=com",
    "bindDn": "cn=reader,dc=example,dc=com",
    "bindPasswordSecret": {"name": "ldap", "key": "password"},
}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`sunk init` in an empty folder, entered."""
    monkeypatch.chdir(tmp_path)
    assert main(["init", "hpc"]) == 0
    monkeypatch.chdir(tmp_path / "hpc")
    return tmp_path / "hpc"


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()
    return line


@pytest.mark.parametrize("argv", [["validate"], ["stacks", "list"], ["stacks", "list", "--json"], ["stacks", "up"]])
def test_outside_any_project_nothing_succeeds_silently(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert f"no Pulumi project here: no Pulumi.yaml in {tmp_path}" in line


@pytest.mark.parametrize("argv", [["validate"], ["stacks", "list"], ["render", "--all", "--out", "out"]])
def test_a_project_without_stack_files_is_an_error(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "Pulumi.yaml").write_text("name: hpc\nruntime: python\nstackConfigDir: stacks\n")
    (tmp_path / "stacks").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 1
    assert f"no stack files (Pulumi.<tenant>-<env>.yaml) in {tmp_path / 'stacks'}" in capsys.readouterr().err


def test_a_filter_that_matches_no_stack_is_an_error(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stacks", "list", "--tenant", "initech"]) == 1
    assert "no stack matches --tenant initech (stacks: demo-dev)" in capsys.readouterr().err


def test_the_default_stack_is_the_projects_only_one(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Never sunk's own acme-dev: with one stack, that one; with several, the list."""
    out = project / "rendered"
    assert main(["render", "--out", str(out)]) == 0
    assert "Previewing hpc/demo-dev offline" in capsys.readouterr().out
    assert (out / "00-namespace-_cluster-demo-slurm.yaml").is_file()

    (project / "stacks" / "Pulumi.demo-dev.yaml").write_text("config: {sunk:cluster: {name: x}}\n")
    assert main(["demo"]) == 1  # the harness was given demo-dev: invalid, so nothing booted
    err = capsys.readouterr().err
    assert err.startswith("✗ demo-dev: invalid") and "acme" not in err

    assert main(["init", ".", "--stack", "initech-prod"]) == 0
    capsys.readouterr()
    for argv in (["demo"], ["slurm-up"], ["render", "--out", "x"]):
        assert main(argv) == 1
        line = _one_error_line(capsys.readouterr().err)
        assert line.endswith("this project has 2 stacks; name one: demo-dev, initech-prod"), line


@pytest.mark.parametrize("where", ["file", "under-file"])
def test_render_out_that_cannot_be_written_is_one_line_before_rendering(
    where: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "taken").write_text("mine\n")
    out = "taken" if where == "file" else "taken/rendered"
    assert main(["render", "demo-dev", "--out", out]) == 1
    captured = capsys.readouterr()
    line = _one_error_line(captured.err)
    assert line.startswith(f"sunk render: --out {out}: ")
    assert "is a file" in line
    assert captured.out == ""  # refused before the program ran
    assert (project / "taken").read_text() == "mine\n"


BLOCK_PULUMI = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pulumi", "pulumi_kubernetes"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from sunk.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("argv", [["render", "demo-dev", "--out", "r"], ["stacks", "list"]])
def test_the_core_install_names_the_extra_a_command_needs(argv: list[str], project: Path) -> None:
    """`pip install sunk` alone has no Pulumi: `sunk render` says to install the pulumi extra (and
    how, from the same source), never a ModuleNotFoundError traceback. `stacks list` needs no Pulumi."""
    run = subprocess.run(
        [sys.executable, "-c", BLOCK_PULUMI, *argv], cwd=project, capture_output=True, text=True, timeout=120
    )
    if argv[0] == "stacks":
        assert run.returncode == 0, run.stderr
        return
    assert run.returncode == 2
    line = _one_error_line(run.stderr)
    assert line.startswith(
        "sunk render: needs the `pulumi` extra (pulumi is not installed); install it with: pip install 'sunk[pulumi]"
    )


def test_the_scaffold_pins_the_sunk_it_came_from(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    wheel = "file:///srv/wheels/sunk-0.1.0-py3-none-any.whl"
    monkeypatch.setattr(install, "_direct_url", lambda: ("0.1.0", {"url": wheel, "archive_info": {}}))
    scaffold.scaffold(tmp_path, "hpc", "demo-dev")
    lines = (tmp_path / "requirements.txt").read_text().splitlines()
    assert lines[-1] == f"sunk[pulumi] @ {wheel}"
    assert lines[0].startswith("# sunk 0.1.0, the wheel it was installed from")

    git = {"url": "https://git.example.com/hpc/sunk", "vcs_info": {"vcs": "git", "commit_id": "a" * 40}}
    monkeypatch.setattr(install, "_direct_url", lambda: ("0.1.0", git))
    assert install.requirement().line == f"sunk[pulumi] @ git+https://git.example.com/hpc/sunk@{'a' * 40}"
    monkeypatch.setattr(install, "_direct_url", lambda: ("0.1.0", None))
    assert install.requirement().line == "sunk[pulumi]==0.1.0"  # an index, if sunk is ever published
    for doc in ({"url": wheel, "archive_info": {}}, git, None):
        monkeypatch.setattr(install, "_direct_url", lambda doc=doc: ("0.1.0", doc))
        assert "sunk[pulumi]" in install.requirement().line and install.requirement().line != "sunk[pulumi]"


def test_the_scaffold_is_a_cluster_an_ordinary_user_can_use(project: Path) -> None:
    """Jobs from any user who logs in (no association needed), sshd not open to the internet."""
    spec = load_stack("demo-dev").spec
    assert spec.accounting.enforce == []
    assert spec.login.service_kind == "ClusterIP"
    assert warnings(spec) == []


def _with_login(login: dict[str, object]) -> Path:
    path = Path("stacks/Pulumi.demo-dev.yaml")
    doc = yaml.safe_load(path.read_text())
    doc["config"]["sunk:cluster"]["login"] = login
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_public_login_is_refused_or_an_explicit_warned_choice(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _with_login({"service": {"type": "LoadBalancer"}})
    with pytest.raises(SpecError) as refused:
        load_stack("demo-dev")
    assert any(
        p.startswith("login.service.sourceRanges: a LoadBalancer login with no sourceRanges")
        for p in refused.value.problems
    )
    _with_login({"service": {"type": "LoadBalancer", "sourceRanges": ["0.0.0.0/0"]}})
    assert main(["validate"]) == 0
    assert (
        "! login.service.sourceRanges[0]: 0.0.0.0/0 lets anyone who reaches the load balancer"
        in capsys.readouterr().err
    )
    _with_login({"sourceRanges": ["203.0.113.0/24"]})  # ranges alone: a LoadBalancer for those
    spec = load_stack("demo-dev").spec
    assert spec.login.service_kind == "LoadBalancer" and warnings(spec) == []


def test_enforcement_with_no_user_is_warned(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """With a directory, its users log in; with enforcement, none of them could run a job."""
    path = Path("stacks/Pulumi.demo-dev.yaml")
    path.write_text(path.read_text().replace("enforce: []", "enforce: [associations]"))
    assert main(["validate"]) == 0
    assert capsys.readouterr().err == ""  # only root logs in, and root has its association
    doc = yaml.safe_load(path.read_text())
    doc["config"]["sunk:cluster"]["auth"] = {"ldap": LDAP}
    path.write_text(yaml.safe_dump(doc))
    assert main(["validate"]) == 0
    assert "! accounts: accounting.enforce (associations) lets only users with an association run jobs" in (
        capsys.readouterr().err
    )
    doc["config"]["sunk:cluster"]["accounts"] = [{"name": "research", "users": ["ada"]}]
    path.write_text(yaml.safe_dump(doc))
    assert main(["validate"]) == 0
    assert capsys.readouterr().err == ""


def test_init_adds_a_stack_to_an_existing_project(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    program = (project / "__main__.py").read_text()
    assert main(["init", ".", "--stack", "initech-prod"]) == 0
    assert "already a Pulumi project: added stack initech-prod" in capsys.readouterr().out
    assert (project / "__main__.py").read_text() == program
    added = yaml.safe_load((project / "stacks" / "Pulumi.initech-prod.yaml").read_text())
    assert "sunk:operator" not in added["config"]  # demo-dev installs the operator already
    assert load_stack("initech-prod").spec.tenant == "initech"
    assert main(["init", ".", "--stack", "initech-prod"]) == 1  # never overwritten
    assert "already there, not overwritten" in capsys.readouterr().err


def _exports(program: str) -> list[str]:
    return sorted(re.findall(r'pulumi\.export\("(\w+)"', program))


def test_the_scaffolded_program_exports_what_the_docs_say() -> None:
    """Both programs are the library's program body (tests/components/test_program_parity.py
    compares what they deploy); its exports are the ones the how-to lists."""
    page = (ROOT / "docs" / "how-to" / "deploy-pulumi.md").read_text()
    (line,) = [ln for ln in page.splitlines() if ln.startswith("pulumi stack output -s acme-dev")]
    documented = sorted(
        re.findall(r"\b(namespace|loginEndpoint|slurmrestdUrl|controllerHost|clusterName|slurmRelease)\b", line)
    )
    for program in (scaffold.PROGRAM, (ROOT / "__main__.py").read_text()):
        assert "\nstack_program()\n" in program
    assert _exports((ROOT / "components" / "program.py").read_text()) == documented


def test_stacks_list_has_a_header_and_the_env_of_any_stack_name(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stack named unlike its tenant (`other-dev` of tenant demo) is still env dev."""
    (project / "stacks" / "Pulumi.demo-dev.yaml").rename(project / "stacks" / "Pulumi.other-dev.yaml")
    assert main(["stacks", "list"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["STACK", "TENANT", "ENV", "ROLE"]
    assert row.split() == ["other-dev", "demo", "dev", "operator+tenant"]


def test_stacks_up_json_without_pulumi_still_prints_json(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(project))  # no pulumi binary
    assert main(["stacks", "up", "--json"]) == 2
    (result,) = json.loads(capsys.readouterr().out)
    assert result["stack"] == "demo-dev" and result["ok"] is False and "Pulumi CLI" in result["error"]


def test_slurm_files_help_describes_its_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["slurm-files", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "STACK stack name (acme-dev) or path to a stack file" in out
    assert "--out OUT folder for the files" in out
