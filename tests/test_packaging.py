"""The installed shape: one `sunk` namespace, no generic top-level packages, a `sunk` command.

The wheel is built from a copy of the checkout (so parallel runs never share a build/ folder)
with pip's ordinary isolated build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Source folder -> where it lands in the wheel (pyproject's package-dir mapping).
MAPPING = {"sunk": "sunk", "components": "sunk/components", "runtime": "sunk/runtime"}


def _pip_env() -> dict[str, str]:
    # The machine-wide pip.conf may point at absent mirrors; PyPI itself is enough.
    return {**os.environ, "PIP_CONFIG_FILE": "/dev/null", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@pytest.fixture(scope="module")
def src(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The copy the wheel is built from; expectations are read from it too, so files appearing in
    the checkout during the run don't race the build."""
    src = tmp_path_factory.mktemp("wheel") / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for folder in MAPPING:
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return src


@pytest.fixture(scope="module")
def wheel(src: Path) -> Iterator[zipfile.ZipFile]:
    tmp = src.parent
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(src)],
        check=True,
        env=_pip_env(),
        timeout=300,
    )
    (built,) = (tmp / "dist").glob("sunk-*.whl")
    with zipfile.ZipFile(built) as zf:
        yield zf


def _packages(src: Path, folder: str) -> list[str]:
    """Every package folder (one holding __init__.py) under a source folder, as wheel paths."""
    base = src / folder
    rels = [p.parent.relative_to(base).as_posix() for p in base.rglob("__init__.py") if "__pycache__" not in p.parts]
    return sorted(f"{MAPPING[folder]}/" if rel == "." else f"{MAPPING[folder]}/{rel}/" for rel in rels)


def test_no_generic_top_level_names(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/", 1)[0] for name in wheel.namelist()}
    assert tops == {"sunk", "sunk-0.1.0.dist-info"}
    assert wheel.read("sunk-0.1.0.dist-info/top_level.txt").decode().split() == ["sunk"]


def test_components_and_runtime_live_under_sunk(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert {"sunk/__init__.py", "sunk/components/__init__.py", "sunk/runtime/__init__.py"} <= names


@pytest.mark.parametrize("folder", sorted(MAPPING))
def test_every_package_folder_is_in_the_wheel(wheel: zipfile.ZipFile, src: Path, folder: str) -> None:
    """Catches a package folder missing from pyproject's hand-written `packages` list."""
    names = set(wheel.namelist())
    packages = _packages(src, folder)
    assert packages, folder
    missing = [p for p in packages if f"{p}__init__.py" not in names]
    assert not missing, f"add to pyproject.toml [tool.setuptools] packages: {missing}"
    # ...and every module of those packages came along.
    base = src / folder
    modules = [
        f"{MAPPING[folder]}/{p.relative_to(base).as_posix()}"
        for p in base.rglob("*.py")
        if (p.parent / "__init__.py").is_file() and "__pycache__" not in p.parts
    ]
    assert not [m for m in modules if m not in names]


def test_image_files_ship_as_package_data(wheel: zipfile.ZipFile, src: Path) -> None:
    images = src / "runtime" / "images"
    expected = [f"sunk/runtime/images/{p.relative_to(images).as_posix()}" for p in images.glob("*/*") if p.is_file()]
    assert not [e for e in expected if e not in wheel.namelist()]


def test_console_script(wheel: zipfile.ZipFile) -> None:
    entry = wheel.read("sunk-0.1.0.dist-info/entry_points.txt").decode()
    assert "[console_scripts]\nsunk = sunk.cli:main" in entry


def test_the_wheel_imports_without_the_checkout(wheel: zipfile.ZipFile, tmp_path: Path) -> None:
    """Unpacked, sunk.components and sunk.runtime resolve from the wheel's own folders."""
    wheel.extractall(tmp_path / "site")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import sunk, sunk.components, sunk.runtime, sunk.cli;"
        "print(sunk.components.__file__); print(sunk.runtime.__file__);"
        "import importlib.util; print(importlib.util.find_spec('components'), importlib.util.find_spec('runtime'))"
    )
    run = subprocess.run(
        [sys.executable, "-I", "-c", code, str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    components, runtime, generic = run.stdout.splitlines()
    assert components == str(tmp_path / "site/sunk/components/__init__.py")
    assert runtime == str(tmp_path / "site/sunk/runtime/__init__.py")
    assert generic == "None None"


def test_python_dash_m_sunk(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "sunk", "validate", "acme-dev"],
        cwd=tmp_path,  # not the checkout: stacks are found next to Pulumi.yaml
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("✓ acme-dev: cluster research")


def test_the_image_recipes_ship_in_the_wheel(wheel: zipfile.ZipFile, src: Path) -> None:
    """`sunk images build` works from an installed wheel: every recipe file is there, and the
    programs copied into images keep their executable bit."""
    names = set(wheel.namelist())
    recipes = src / "runtime/images"
    wanted = [
        "sunk/runtime/images/" + p.relative_to(recipes).as_posix()
        for p in recipes.rglob("*")
        if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts
    ]
    assert wanted and not [w for w in wanted if w not in names]
    init = wheel.getinfo("sunk/runtime/images/slurmd/rootfs/usr/local/sbin/sunk-init")
    assert (init.external_attr >> 16) & 0o111
