"""The layout type checkers and IDEs resolve: sunk/components and sunk/runtime are links to the
top-level folders (no import hook), and the import-linter contracts name the layers above the pure
core (every other child of sunk), never a core module."""

from __future__ import annotations

import configparser
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_components_and_runtime_are_links_into_sunk() -> None:
    for folder in ("components", "runtime"):
        link = ROOT / "sunk" / folder
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve()
        spec = importlib.util.find_spec(f"sunk.{folder}")
        assert spec is not None and spec.origin == str(link / "__init__.py")


OUTER = {"sunk.__main__", "sunk.reference", "sunk.cli", "sunk.api", "sunk.components", "sunk.runtime"}
"""The children of sunk above the pure core: the composition root (the reference generator
included), the public API (sunk.api hands out the components) and the two links."""


def test_the_layer_contracts_name_the_outer_layers_and_no_core_module() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    layers = config["importlinter:contract:layers"]
    assert layers["containers"].split() == ["sunk"]
    named = {f"sunk.{m.strip()}" for line in layers["layers"].split("\n") for m in line.split("|") if m.strip()}
    assert named == OUTER
    core = config["importlinter:contract:core-is-pure"]
    assert {m for m in core["protected_modules"].split() if m.startswith("sunk")} == OUTER
    assert set(core["allowed_importers"].split()) == OUTER
    children = {
        f"sunk.{p.stem if p.suffix == '.py' else p.name}"
        for p in (ROOT / "sunk").iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").is_file()) and p.name != "__init__.py"
    }
    assert children >= OUTER
