"""The layers hold: the composition root (python -m sunk, the CLI) above components/ and
runtime/, above the pure core; runtime/ never touches Pulumi; nothing imports the source folders
as generic top-level packages. import-linter sees every import statement (inside functions too);
the AST scans below also see importlib.import_module("...") calls, and the core may not import by
string at all, since no contract could see what such an import reaches."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PULUMI = {"pulumi", "pulumi_kubernetes", "pulumi_random", "pulumi_tls"}
OUTER = {"components", "runtime", "sunk.components", "sunk.runtime"}


def lint_imports(root: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    """import-linter on the checkout at `root` (its .importlinter), only `contracts` if given."""
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "lint-imports"),
            "--no-cache",
            *(arg for contract in contracts for arg in ("--contract", contract)),
        ],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_import_linter_contracts_pass() -> None:
    run = lint_imports(ROOT)
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


ROOT_MODULES = {
    "sunk/cli.py",
    "sunk/__main__.py",
    "sunk/api.py",
    *(f"sunk/reference/{p.name}" for p in (ROOT / "sunk" / "reference").glob("*.py")),
}
"""The composition root (the reference generator too) and the public API (it hands out the
components, loaded on first use) inside sunk/ (sunk/components and sunk/runtime are links, not
scanned)."""
CORE = [p for p in files("sunk") if _rel(p) not in ROOT_MODULES]

STRING_IMPORTS = {
    "import_module",
    "__import__",
    "spec_from_file_location",
    "spec_from_loader",
    "module_from_spec",
    "exec_module",
    "load_module",
    "SourceFileLoader",
    "SourcelessFileLoader",
    "ExtensionFileLoader",
    "run_module",
    "run_path",
}
"""Calls that import a module named by a string or a path (importlib, importlib.util, runpy)."""
IMPORTLIB_ALLOWED = {"importlib.resources", "importlib.metadata"}
"""What the core may take from importlib: package data and installed versions, no importing."""


def string_imports(source: str) -> list[str]:
    """Every place a file imports by string: a call of one of STRING_IMPORTS (however it is
    reached) and any import of importlib or runpy beyond IMPORTLIB_ALLOWED."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            if name in STRING_IMPORTS:
                found.append(f"{node.lineno}: {ast.unparse(node.func)}(...)")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.partition(".")[0] in {"importlib", "runpy"} and alias.name not in IMPORTLIB_ALLOWED:
                    found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in {"importlib", "runpy"}:
            for alias in node.names:
                if f"{node.module}.{alias.name}" not in IMPORTLIB_ALLOWED:
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").startswith("importlib.")
            and node.module not in IMPORTLIB_ALLOWED
        ):
            found.append(f"{node.lineno}: from {node.module} import ...")
    return found


@pytest.mark.parametrize("path", [*CORE, *(ROOT / p for p in sorted(ROOT_MODULES))], ids=_rel)
def test_sunk_imports_nothing_by_string(path: Path) -> None:
    """import-linter reads import statements only: a module imported by string is a dependency no
    contract sees (the composition root imports its tools with ordinary imports too)."""
    assert not string_imports(path.read_text())


def test_the_string_import_scan_sees_every_way() -> None:
    source = (
        "import importlib\n"
        "import importlib.util as u\n"
        "from importlib import import_module, resources\n"
        "from importlib.machinery import SourceFileLoader\n"
        "from importlib.metadata import version\n"
        "def later(name):\n"
        "    importlib.import_module(name)\n"
        "    __import__('types')\n"
        "    u.module_from_spec(u.spec_from_file_location('x', '/x.py'))\n"
        "    return resources.files('sunk')\n"
    )
    assert [hit.partition(":")[0] for hit in string_imports(source)] == ["1", "2", "3", "4", "7", "8", "9", "9"]


def _checkout_copy(dest: Path) -> Path:
    """The Python sources of sunk, components and runtime (with the links) and .importlinter."""
    for folder in ("sunk", "components", "runtime"):
        shutil.copytree(
            ROOT / folder,
            dest / folder,
            symlinks=True,
            ignore=lambda _, names: [n for n in names if n == "__pycache__" or (n.endswith((".txt", ".sh")))],
        )
    shutil.copy(ROOT / ".importlinter", dest / ".importlinter")
    return dest


@pytest.mark.parametrize(
    ("where", "source", "contract", "chain"),
    [
        ("sunk/planted.py", "import sunk.components.render\n", "core-is-pure", "sunk.planted -> sunk.components"),
        ("sunk/spec/planted.py", "def later():\n    import pulumi\n", "core-is-pure", "sunk.spec.planted -> pulumi"),
        ("sunk/planted.py", "from sunk import cli\n", "core-is-pure", "sunk.planted -> sunk.cli"),
        ("runtime/planted.py", "from sunk.components import cluster\n", "layers", "sunk.runtime.planted ->"),
        ("components/planted.py", "def later():\n    from sunk import cli\n", "layers", "sunk.components.planted ->"),
    ],
)
def test_the_contracts_catch_a_planted_import(
    tmp_path: Path, where: str, source: str, contract: str, chain: str
) -> None:
    """A new module, listed nowhere, that reaches an outer layer breaks a contract that names
    only the layers."""
    root = _checkout_copy(tmp_path)
    assert lint_imports(root, contract).returncode == 0
    (root / where).write_text(source)
    run = lint_imports(root, contract)
    assert run.returncode != 0 and chain in run.stdout, run.stdout + run.stderr


def test_a_planted_string_import_is_seen_by_the_scan_and_not_by_the_contracts(tmp_path: Path) -> None:
    """Why the scan exists: import-linter keeps its contracts while the core reaches components/
    by string."""
    root = _checkout_copy(tmp_path)
    planted = root / "sunk" / "planted.py"
    planted.write_text(
        "import importlib\n\ndef later():\n    return importlib.import_module('sunk.components.render')\n"
    )
    assert lint_imports(root, "core-is-pure", "layers").returncode == 0
    assert string_imports(planted.read_text()) == ["1: import importlib", "4: importlib.import_module(...)"]


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


def test_the_public_api_reaches_only_the_core_and_the_components() -> None:
    found = imported((ROOT / "sunk" / "api.py").read_text())
    assert not hits(found, {"kubernetes", "httpx", "kopf", "runtime", "sunk.runtime", *PULUMI})
    assert hits(found, {"sunk.components"})  # the Pulumi-bound names, lazily
