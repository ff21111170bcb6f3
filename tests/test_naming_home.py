"""Kubernetes object names are built in sunk/naming.py only (STYLE.md, "one of everything"): an
f-string that starts `f"{...}-"` elsewhere in the production packages is a name built a second
time, which drifts from the first. The few files that build other names that way (image tags,
files, Slurm hostlists) are listed with their reason; the list only shrinks."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sunk", "components", "runtime")
HOME = "sunk/naming.py"

ALLOWED: dict[str, str] = {
    "sunk/images.py": "image tags (<release>-<variant>-<arch>), not objects",
    "sunk/hostlist.py": "Slurm hostlist ranges (node[01-04])",
    "sunk/render/topology.py": "a Slurm switch name in topology.conf, shortened with a hash",
    "sunk/manifests/dashboards.py": "a Grafana dashboard uid (40 characters at most), not an object",
    "components/render.py": "file names of `sunk render`'s output folder",
    "components/offline.py": "resource ids the offline mocks make up",
    "runtime/images/": "image recipe, cache and archive file names and tags",
    "runtime/harness/image_process.py": "a file copied into the harness's folder",
    "runtime/harness/layout.py": "the harness's topology label values (rack and switch of a Node)",
    "runtime/local/": "the local cluster names its own Nodes (local-<nodeset>-<n>), files beside a "
    "render and its firewall chains; Kubernetes' controllers name the pods",
}
"""file (or folder ending in /) -> why it may build `f"{...}-..."` strings."""


def _builds_a_name(node: ast.JoinedStr, *, component: bool) -> bool:
    """`f"{x}-..."`: a value, then a dash and more. Not: a prefix to match (`f"{x}-"` alone), a
    pattern or a hostlist range (`-[0-9]`, `-(...)`), nor, in components/, a Pulumi child name
    (`f"{name}-suffix"` or `f"{self.name}-suffix"`, from the component's own name, STYLE.md)."""
    values = node.values
    if len(values) < 2 or not isinstance(values[0], ast.FormattedValue):
        return False
    dash = values[1]
    if not (isinstance(dash, ast.Constant) and isinstance(dash.value, str) and dash.value.startswith("-")):
        return False
    if len(values) == 2 and dash.value == "-":
        return False
    if dash.value.startswith(("-[", "-(")):
        return False
    return not (component and _component_name(values[0].value))


def _component_name(value: ast.expr) -> bool:
    """`name` (the component's argument) or `self.name` (a builder holding it)."""
    if isinstance(value, ast.Name):
        return value.id == "name"
    return (
        isinstance(value, ast.Attribute)
        and value.attr == "name"
        and isinstance(value.value, ast.Name)
        and value.value.id == "self"
    )


def name_builders(source: str, rel: str) -> list[str]:
    """`file:line f-string` for each name-building f-string of one production file."""
    component = rel.startswith("components/")
    return [
        f"{rel}:{node.lineno} {ast.unparse(node)}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.JoinedStr) and _builds_a_name(node, component=component)
    ]


def _production_files() -> list[str]:
    files = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            # sunk/components and sunk/runtime are links to the top-level packages
            if not rel.startswith(("sunk/components/", "sunk/runtime/")) and rel != HOME:
                files.append(rel)
    return files


def _allowed(rel: str) -> str | None:
    return next((entry for entry in ALLOWED if rel == entry or (entry.endswith("/") and rel.startswith(entry))), None)


def test_object_names_are_built_in_naming_only() -> None:
    found = [
        hit
        for rel in _production_files()
        if _allowed(rel) is None
        for hit in name_builders((ROOT / rel).read_text(), rel)
    ]
    assert not found, "build these names in sunk/naming.py (a function per object):\n" + "\n".join(found)


def test_each_allowed_file_still_builds_such_strings() -> None:
    used = {_allowed(rel) for rel in _production_files() if name_builders((ROOT / rel).read_text(), rel)}
    assert not set(ALLOWED) - used, f"remove from ALLOWED: {sorted(set(ALLOWED) - used)}"


def test_the_check_finds_a_planted_name() -> None:
    planted = 'def secret(spec):\n    return f"{spec.name}-extra-secret"\n'
    assert name_builders(planted, "sunk/manifests/x.py") == ["sunk/manifests/x.py:2 f'{spec.name}-extra-secret'"]
    # The same line in a component names a Kubernetes object too; only `name` is the child's.
    assert name_builders(planted, "components/x.py")
    child = 'def make(name):\n    return f"{name}-service"\n'
    assert name_builders(child, "components/x.py") == []
    assert name_builders('def c(self, part):\n    return f"{self.name}-{part}"\n', "components/x.py") == []
    assert name_builders(child, "sunk/manifests/x.py")
    ranges = 'def r(ns, last, spec):\n    return f"{ns}-[0-{last}]", f"{spec}-"\n'
    assert name_builders(ranges, "sunk/render/x.py") == []
