"""The installed shape: one `sunk` namespace, no generic top-level packages, a `sunk` command,
types (py.typed), the dependency extras; and a platform team's whole path from the wheel in a
fresh virtualenv: `sunk init`, `mypy --strict` on their program, the program under Pulumi's mocks.

The wheel is built from a copy of the checkout (so parallel runs never share a build/ folder)
with pip's ordinary isolated build."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Source folder -> where it lands in the wheel (sunk/components and sunk/runtime link to them).
MAPPING = {"sunk": "sunk", "components": "sunk/components", "runtime": "sunk/runtime"}
TEST_SUPPORT = ROOT / "tests" / "support"
"""Test support (fakes, kubesim on kmock internals): beside the tests, outside every shipped folder."""


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
        # Links kept as links: sunk/components -> ../components, as in the checkout.
        shutil.copytree(
            ROOT / folder, src / folder, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
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
    found = sorted(f"{MAPPING[folder]}/" if rel == "." else f"{MAPPING[folder]}/{rel}/" for rel in rels)
    return [p for p in found if not p.startswith(("sunk/components/", "sunk/runtime/")) or folder != "sunk"]


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


def test_test_support_is_not_shipped(wheel: zipfile.ZipFile) -> None:
    """The fakes, kubesim and the other test support live in tests/support/, which no shipped folder
    holds; no module of the wheel is named like test support either."""
    assert (TEST_SUPPORT / "__init__.py").is_file()
    assert (TEST_SUPPORT / "fakes" / "operator.py").is_file()
    stems = {Path(n).stem for n in wheel.namelist() if n.endswith(".py")}
    assert not stems & {"fakes", "kubesim", "kubelet", "listwatch", "slurmread", "goals", "testing"}
    assert not [n for n in wheel.namelist() if "/testing/" in n or n.startswith("tests/")]


def test_the_wheel_ships_its_types(wheel: zipfile.ZipFile) -> None:
    assert "sunk/py.typed" in wheel.namelist()


def _requires(wheel: zipfile.ZipFile) -> dict[str, set[str]]:
    """Requires-Dist by extra ("" for the core): distribution names only."""
    meta = wheel.read("sunk-0.1.0.dist-info/METADATA").decode()
    out: dict[str, set[str]] = {}
    for line in meta.splitlines():
        if line.startswith("Requires-Dist: "):
            req, _, marker = line.removeprefix("Requires-Dist: ").partition(";")
            extra = marker.split("extra ==")[1].strip().strip("'\"") if "extra ==" in marker else ""
            name = req.strip().split(" ")[0]
            for sep in "<>=!~[(":
                name = name.split(sep)[0]
            out.setdefault(extra, set()).add(name.lower())
    return out


def test_dependency_extras(wheel: zipfile.ZipFile) -> None:
    """The core (validate, renderers) needs pydantic and yaml; a Pulumi program adds `pulumi`, the
    controllers `runtime`. No dev tool and nothing unused (kopf) reaches a user."""
    requires = _requires(wheel)
    assert requires == {
        "": {"pydantic", "pyyaml"},
        "pulumi": {"pulumi", "pulumi-kubernetes", "pulumi-random", "pulumi-tls"},
        "runtime": {"kubernetes", "httpx", "prometheus-client", "msgspec", "urllib3"},
        "local": {"aiohttp"},
    }


def test_the_runtime_image_installs_the_runtime_extra_and_no_pulumi(wheel: zipfile.ZipFile) -> None:
    """The runtime image installs the wheel without dependencies, then this list: exactly the
    core's and the `runtime` extra's packages."""
    listed = ROOT / "runtime" / "images" / "python" / "requirements.txt"
    names = {line.strip().lower() for line in listed.read_text().splitlines() if line.strip() and line[0] != "#"}
    requires = _requires(wheel)
    assert names == requires[""] | requires["runtime"]


def test_image_files_ship_as_package_data(wheel: zipfile.ZipFile, src: Path) -> None:
    images = src / "runtime" / "images"
    expected = [f"sunk/runtime/images/{p.relative_to(images).as_posix()}" for p in images.glob("*/*") if p.is_file()]
    assert not [e for e in expected if e not in wheel.namelist()]


def test_pod_scripts_ship_as_package_data(wheel: zipfile.ZipFile, src: Path) -> None:
    """The manifests read the containers' start scripts from the installed package (the operator
    builds slurmd pods from the runtime image's wheel)."""
    folder = src / "sunk" / "manifests" / "scripts"
    expected = [f"sunk/manifests/scripts/{p.name}" for p in folder.glob("*.sh")]
    assert expected and not [e for e in expected if e not in wheel.namelist()]


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
        cwd=ROOT / "stacks",  # inside the project: stacks are found from Pulumi.yaml upwards
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


PLATFORM_PROGRAM = ROOT / "tests" / "components" / "library_program" / "__main__.py"
"""The platform program the docs' platform program page shows (docs/how-to/platform-program.md)."""
MISTYPED = """from sunk.components import SlurmCluster

SlurmCluster("x", {"name": "x"})
"""
CHECK_UNDER_MOCKS = """
import json, sys
from pathlib import Path
from sunk.components.offline import evaluate

ev = evaluate(Path(sys.argv[1]).resolve(), stack="dev", project="platform", config={})
(ns,) = [r for r in ev.registrations if r.type == "kubernetes:core/v1:Namespace" and r.parent.endswith("platform-dev")]
(cluster,) = [r for r in ev.registrations if r.type == "sunk:index:SlurmCluster"]
under, todo = [], [cluster.urn]
while todo:
    parent = todo.pop()
    for r in ev.registrations:
        if r.parent == parent:
            under.append(r)
            todo.append(r.urn)
print(json.dumps({
    "children": len(under),
    "objects": len([r for r in under if r.is_kubernetes_object]),
    "not_waiting": [r.name for r in under if ns.urn not in r.dependencies],
    "namespaces": sorted({r.inputs["metadata"].get("namespace", "") for r in under if r.is_kubernetes_object}),
    "sunk": __import__("sunk").__file__,
}))
"""


@pytest.fixture(scope="module")
def venv(wheel: zipfile.ZipFile, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with what a platform team installs: the wheel with the `pulumi` extra
    (versions pinned by the lock file) and mypy."""
    where = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(ROOT / "requirements.lock")]
    subprocess.run([*pip, f"{wheel.filename}[pulumi]", "mypy"], check=True, env=_pip_env(), timeout=900)
    return where


def _run(venv: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(venv / "bin" / argv[0]), *argv[1:]], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )


def test_a_platform_program_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    """The issue's done-when: from the installed wheel alone, `sunk init` makes a project that
    validates and renders; a platform program passing its own Namespace Output and depends_on
    passes `mypy --strict` (a mistyped call does not); under Pulumi's mocks every child of the
    cluster depends on that Namespace."""
    project = tmp_path / "hpc"
    init = _run(venv, "sunk", "init", str(project), cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    assert _run(venv, "sunk", "--version", cwd=project).stdout.strip() == "sunk 0.1.0"
    validate = _run(venv, "sunk", "validate", cwd=project)
    assert validate.returncode == 0 and validate.stdout.startswith("✓ demo-dev: cluster slurm"), validate.stderr
    render = _run(venv, "sunk", "render", "demo-dev", "--out", "rendered", cwd=project)
    assert render.returncode == 0, render.stderr
    assert (
        project / "rendered" / "crds" / "01-customresourcedefinition-_cluster-nodesets.slurm.sunk.dev.yaml"
    ).is_file()
    listing = _run(venv, "sunk", "stacks", "list", "--json", cwd=project)
    assert [s["stack"] for s in json.loads(listing.stdout)] == ["demo-dev"], listing.stderr

    shutil.copy2(PLATFORM_PROGRAM, project / "platform_program.py")
    (project / "mistyped.py").write_text(MISTYPED)
    typed = _run(venv, "mypy", "--strict", "--no-incremental", "platform_program.py", "__main__.py", cwd=project)
    assert typed.returncode == 0, typed.stdout + typed.stderr
    wrong = _run(venv, "mypy", "--strict", "--no-incremental", "mistyped.py", cwd=project)
    assert wrong.returncode == 1 and '"dict[str, str]"; expected "ClusterSpec"' in wrong.stdout, wrong.stdout

    (project / "check.py").write_text(CHECK_UNDER_MOCKS)
    mocked = _run(venv, "python", "check.py", "platform_program.py", cwd=project)
    assert mocked.returncode == 0, mocked.stderr
    result = json.loads(mocked.stdout.splitlines()[-1])
    assert result["sunk"].startswith(str(venv))  # the wheel, not the checkout
    assert result["objects"] > 30 and result["not_waiting"] == []
    assert result["namespaces"] == ["", "initech-batch"]  # cluster-scoped RBAC, and the Namespace's name


def test_kubernetes_schema_ships_as_package_data(wheel: zipfile.ZipFile) -> None:
    """The spec checks volume sources, affinity and securityContext against these definitions, in
    `sunk validate` and in the operator (which parses NodeSets with the same model)."""
    assert "sunk/spec/kubernetes_schema.json" in wheel.namelist()


@pytest.fixture(scope="module")
def core_venv(wheel: zipfile.ZipFile, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `pip install <the wheel>` with no extra brings: pydantic and PyYAML, no Pulumi."""
    where = tmp_path_factory.mktemp("core") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(ROOT / "requirements.lock")]
    subprocess.run([*pip, str(wheel.filename)], check=True, env=_pip_env(), timeout=900)
    return where


def test_the_core_install_from_the_wheel(core_venv: Path, wheel: zipfile.ZipFile, tmp_path: Path) -> None:
    """A new user's path on the core install: `sunk init` pins requirements.txt to this very wheel
    (no bare `sunk` any index could answer), validate works, and render names the extra it needs
    with the same source instead of ending in a ModuleNotFoundError traceback."""
    init = _run(core_venv, "sunk", "init", "hpc", cwd=tmp_path)
    assert init.returncode == 0, init.stderr
    project = tmp_path / "hpc"
    source = Path(wheel.filename or "").resolve().as_uri()
    assert (project / "requirements.txt").read_text().splitlines()[-1] == f"sunk[pulumi] @ {source}"
    assert _run(core_venv, "sunk", "validate", cwd=project).returncode == 0
    render = _run(core_venv, "sunk", "render", "--out", "rendered", cwd=project)
    assert render.returncode == 2 and "Traceback" not in render.stderr
    assert render.stderr.strip() == (
        "sunk render: needs the `pulumi` extra (pulumi is not installed); install it with: "
        f"pip install 'sunk[pulumi] @ {source}'"
    )
    assert not (project / "rendered").exists()
