"""The layout type checkers and IDEs resolve: sunk/components and sunk/runtime are links to the
top-level folders (no import hook), and the import-linter contract for the pure core names every
other child of sunk."""

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


def test_the_core_contract_covers_every_core_module() -> None:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    listed = set(config["importlinter:contract:core-is-pure"]["source_modules"].split())
    children = {
        f"sunk.{p.stem if p.suffix == '.py' else p.name}"
        for p in (ROOT / "sunk").iterdir()
        if (p.suffix == ".py" or (p / "__init__.py").is_file()) and not p.name.startswith("__")
    }
    assert listed == children - {"sunk.components", "sunk.runtime"}
