"""sunk used as a library from a platform team's own program: an Output put into the spec
without `late()` gets the hint, an error in the program names its own file and line, and `sunk
render` renders a program that builds its spec in code (no `sunk:cluster` in its stack)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pulumi
import pytest
from sunk.components.offline import ProgramFailed, evaluate

from sunk.cli import main
from sunk.spec.errors import LATE_HINT, SpecError, load_spec

from .conftest import ROOT

CLUSTER = {
    "name": "research",
    "tenant": "acme",
    "nodesets": [{"name": "cpu", "cpus": 4, "memoryMib": 8192}],
    "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
}


def test_an_output_without_late_gets_the_hint() -> None:
    registry = pulumi.Output.from_input("registry.example.com/hpc")
    with pytest.raises(SpecError) as info:
        load_spec({**CLUSTER, "namespace": registry, "images": {"registry": registry}})
    assert info.value.problems == [f"namespace: {LATE_HINT}", f"images.registry: {LATE_HINT}"]
    assert "late(value)" in LATE_HINT


PROGRAM = """import pulumi

from sunk.spec import load_spec

sizes = {"cpu": 4}


def nodeset(name: str) -> dict[str, object]:
    return {"name": name, "cpus": sizes[name], "memoryMib": 8192}


spec = load_spec({"name": "x", "tenant": "t", "nodesets": [nodeset("gpu")], "partitions": []})
"""


def test_an_error_in_the_program_keeps_its_file_and_line(tmp_path: Path) -> None:
    program = tmp_path / "__main__.py"
    program.write_text(PROGRAM)
    with pytest.raises(ProgramFailed) as info:
        evaluate(program, stack="dev", config={})
    first, code = str(info.value).splitlines()
    assert first.endswith("__main__.py:9: KeyError: 'gpu'")
    assert code.strip() == 'return {"name": name, "cpus": sizes[name], "memoryMib": 8192}'


def test_render_renders_a_program_that_builds_its_spec_in_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The docs' platform program: its stack file holds no sunk:cluster; render runs it."""
    (tmp_path / "Pulumi.yaml").write_text("name: platform\nruntime: python\nstackConfigDir: stacks\n")
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.prod.yaml").write_text(
        "config:\n  platform:registry: registry.initech.internal/hpc\n"
    )
    shutil.copy2(ROOT / "tests" / "components" / "library_program" / "__main__.py", tmp_path / "__main__.py")
    monkeypatch.chdir(tmp_path)
    assert main(["render", "--out", "out"]) == 0, capsys.readouterr().err
    assert "Previewing platform/prod offline" in capsys.readouterr().out
    assert (tmp_path / "out" / "00-namespace-_cluster-initech-batch.yaml").is_file()


def test_validate_points_a_code_built_stack_at_render(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """validate checks stack config only: a stack without sunk:cluster fails there (no silent
    success), and says which command checks a program that builds its spec in code."""
    (tmp_path / "Pulumi.yaml").write_text("name: platform\nruntime: python\nstackConfigDir: stacks\n")
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.prod.yaml").write_text("config: {}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["validate"]) == 1
    assert "is checked by `sunk render STACK --out DIR`, which runs it" in capsys.readouterr().err
