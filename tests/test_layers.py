"""The layers hold: sunk/ is pure, runtime/ never touches Pulumi, nothing imports the source
folders as generic top-level packages. import-linter checks module-level imports; the AST scan
below also sees imports inside functions and importlib.import_module("...") calls."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PULUMI = {"pulumi", "pulumi_kubernetes", "pulumi_random", "pulumi_tls"}
OUTER = {"components", "runtime", "sunk.components", "sunk.runtime"}


def test_import_linter_contracts_pass() -> None:
    run = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


def imported(source: str) -> set[str]:
    """Every absolute module a file imports, wherever the import sits, plus string literals
    handed to importlib.import_module."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif (
            isinstance(node, ast.Call)
            and (getattr(node.func, "attr", None) or getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return found


def hits(modules: set[str], forbidden: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f"{f}.") for f in forbidden))


def files(folder: str) -> list[Path]:
    return sorted(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


CORE = [p for p in files("sunk") if _rel(p) != "sunk/cli.py"]


@pytest.mark.parametrize("path", CORE, ids=_rel)
def test_core_is_pure(path: Path) -> None:
    forbidden = PULUMI | {"kubernetes", "httpx", "kopf"} | OUTER
    assert not hits(imported(path.read_text()), forbidden)


@pytest.mark.parametrize("path", files("runtime"), ids=_rel)
def test_runtime_never_imports_pulumi_or_components(path: Path) -> None:
    assert not hits(imported(path.read_text()), PULUMI | {"components", "sunk.components"})


@pytest.mark.parametrize(
    "path", [*files("sunk"), *files("components"), *files("runtime"), *ROOT.glob("__main__.py")], ids=_rel
)
def test_no_generic_top_level_import_of_the_source_folders(path: Path) -> None:
    """Installed, only sunk.components / sunk.runtime exist; inside those folders use relative imports."""
    assert not hits(imported(path.read_text()), {"components", "runtime"})


def test_the_scan_sees_lazy_and_dynamic_imports() -> None:
    source = (
        "from __future__ import annotations\n"
        "from . import sibling\n"
        "def later():\n"
        "    import pulumi_kubernetes.core.v1 as k\n"
        "    from sunk.runtime import harness\n"
        "    return importlib.import_module('kopf')\n"
    )
    found = imported(source)
    assert hits(found, PULUMI) == ["pulumi_kubernetes.core.v1"]
    assert hits(found, OUTER) == ["sunk.runtime", "sunk.runtime.harness"]
    assert hits(found, {"kopf"}) == ["kopf"]
    assert not hits(found, {"sibling"})  # relative imports are the package's own
