"""docs/reference/ is what the code says: regenerated and compared byte for byte, and each page
lists everything its source defines (a field, command, variable, metric or alert the generator
missed fails here, not in a reader's hands)."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from pydantic import BaseModel
from sunk.runtime.common.process import LOG_LEVEL
from sunk.runtime.syncer.metrics import SyncerMetrics

from sunk.api import ClusterSpec, OperatorSpec, TenantPolicy
from sunk.cli import build_parser
from sunk.manifests.monitoring import alert_rules
from sunk.manifests.operator import operator_alert_rules
from sunk.reference import build
from sunk.reference.__main__ import main
from sunk.reference.environment import CONTROLLERS
from sunk.reference.metrics import EXAMPLE, slurm_metrics

ROOT = Path(__file__).resolve().parents[2]
PAGES = ROOT / "docs" / "reference"


@pytest.fixture(scope="module")
def reference() -> dict[str, str]:
    return build().pages


def test_the_pages_are_what_the_code_generates(reference: dict[str, str]) -> None:
    """`make docs-ref` rewrites them; a difference means the code changed and the pages did not."""
    on_disk = {p.name: p.read_text() for p in PAGES.glob("*.md")}
    assert sorted(on_disk) == sorted(reference), "docs/reference/ holds a page the generator does not write"
    stale = [name for name, text in reference.items() if on_disk[name] != text]
    assert not stale, f"{stale} differ from the code: run `make docs-ref` and review the diff"


def test_check_mode_names_a_page_that_drifted(tmp_path: Path, reference: dict[str, str]) -> None:
    for name, text in reference.items():
        (tmp_path / name).write_text(text)
    assert main(["--check", str(tmp_path)]) == 0
    (tmp_path / "cli.md").write_text(reference["cli.md"].replace("sunk validate", "sunk check"))
    assert main(["--check", str(tmp_path)]) == 1


@pytest.mark.parametrize(
    ("root", "page"),
    [(ClusterSpec, "cluster-spec.md"), (OperatorSpec, "operator-spec.md"), (TenantPolicy, "tenant-policy.md")],
)
def test_every_field_of_every_model_has_a_row(reference: dict[str, str], root: type[BaseModel], page: str) -> None:
    """Each model reachable from the root (found through pydantic's JSON schema, not the
    generator's walk) has its section, and each of its fields a row."""
    schema = root.model_json_schema(by_alias=True, mode="validation")
    text = reference[page]
    models = {"": schema, **schema.get("$defs", {})}
    missing = []
    for title, definition in models.items():
        for key in definition.get("properties", {}):
            if f"`{key}` |" not in text and f".{key}` |" not in text:
                missing.append(f"{title or root.__name__}.{key}")
    assert not missing
    fields = sum(len(d.get("properties", {})) for d in models.values())
    rows = sum(1 for line in text.splitlines() if line.startswith("| `"))
    assert rows == fields, (rows, fields)


def test_the_cluster_page_names_a_deep_field_with_its_constraint(reference: dict[str, str]) -> None:
    row = next(
        line for line in reference["cluster-spec.md"].splitlines() if line.startswith("| `nodesets[].gpus.count`")
    )
    assert "integer" in row and "≥ 1" in row and "≤ 16" in row and "required" in row


def _commands(parser: argparse.ArgumentParser, words: str) -> list[str]:
    found = [words]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _commands(child, f"{words} {name}")
    return found


def test_every_command_and_option_is_listed(reference: dict[str, str]) -> None:
    text = reference["cli.md"]
    parser = build_parser()
    for words in _commands(parser, "sunk"):
        assert f"## `{words}`" in text, words
    assert "`--show-secrets`" in text and "`--no-wait`" in text and "`--registry`" in text


def test_every_environment_variable_is_listed(reference: dict[str, str]) -> None:
    text = reference["environment.md"]
    for _, _, settings in CONTROLLERS:
        for variable in settings.variables().values():
            assert f"| `{variable}` |" in text, variable
    assert f"| `{LOG_LEVEL}` |" in text
    assert "| `SUNK_OPERATOR_POLICY` | JSON object |" in text


def test_every_settings_model_of_the_runtime_is_a_section() -> None:
    """A new controller's settings (an EnvSettings subclass anywhere under runtime/) must join
    CONTROLLERS, or its variables would be missing from the page."""
    found = set()
    for path in (ROOT / "runtime").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(ast.unparse(b) == "EnvSettings" for b in node.bases):
                found.add(path.relative_to(ROOT).with_suffix("").as_posix().replace("/", "."))
    listed = {settings.__module__.removeprefix("sunk.") for _, _, settings in CONTROLLERS}
    assert found == listed


def test_every_metric_and_alert_is_listed(reference: dict[str, str]) -> None:
    text = reference["metrics.md"]
    registry = CollectorRegistry()
    SyncerMetrics(registry)
    served = {m.name + ("_total" if m.type == "counter" else "") for m in registry.collect()}
    served |= {m.name for m in slurm_metrics()}
    assert "sunk_syncer_writes_total" in served and "sunk_slurm_jobs" in served
    for name in served:
        assert f"| `{name}` |" in text, name
    for rule in [*alert_rules(EXAMPLE), *operator_alert_rules()]:
        assert f"| `{rule['alert']}` |" in text
