"""The docs site (mkdocs.yml, docs/) builds with `mkdocs build --strict`: every page of docs/ is in
the nav, and every link and anchor between pages resolves; a warning fails the build."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from sunk.spec.errors import RENAMED
from sunk.stackfile import load_stack

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = Path(sys.executable).with_name("mkdocs")


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []


class _Loader(yaml.SafeLoader):
    """A safe loader that reads a `!!python/...` tag as nothing."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda _loader, _suffix, _node: None)
_Loader.add_constructor("!relative", lambda _loader, _node: None)


def _nav() -> list[str]:
    # mkdocs.yml names a Python function for the mermaid fence (a !!python/name tag): read it as data.
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    return _nav_pages(config["nav"])


def test_the_site_builds_strict(tmp_path: Path) -> None:
    assert MKDOCS.is_file(), f"{MKDOCS} is missing: `bash .ci/bootstrap` installs mkdocs from requirements.lock"
    site = tmp_path / "site"
    run = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(site)],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    for page in _nav():
        stem = page.removesuffix(".md")
        built = site / (
            stem.removesuffix("index") + "index.html"
            if stem == "index" or stem.endswith("/index")
            else stem + "/index.html"
        )
        assert built.is_file(), f"{page} is in the nav but was not built"


def test_the_pages_the_docs_promise_are_in_the_nav() -> None:
    nav = set(_nav())
    promised = {
        "getting-started.md",
        "troubleshooting.md",
        "upgrading.md",
        "changelog.md",
        "commands.md",
        "concepts/architecture.md",
        *(f"concepts/{part}.md" for part in ("operator", "syncer", "scheduler", "exporter", "images", "local-cluster")),
        *(
            f"how-to/{page}.md"
            for page in (
                "gpu-nodesets",
                "directory-login",
                "accounting-qos",
                "shared-storage",
                "power-saving",
                "health-checks",
                "sharing-nodes",
                "rolling-updates",
                "ha",
                "gitops-render",
                "platform-program",
            )
        ),
    }
    assert promised <= nav, f"missing from mkdocs.yml's nav: {sorted(promised - nav)}"
    missing = sorted(page for page in nav if not (ROOT / "docs" / page).is_file())
    assert not missing, f"in the nav but not in docs/: {missing}"


def test_each_concept_page_has_a_diagram() -> None:
    """What each moving part watches and writes, drawn: a mermaid block on each concept page."""
    for part in ("operator", "syncer", "scheduler", "exporter", "images", "local-cluster"):
        assert "```mermaid\n" in (ROOT / "docs" / "concepts" / f"{part}.md").read_text(), part


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """The build above can fail: a page linking to a page that does not exist is refused."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\n[gone](gone.md)\n")
    config = (ROOT / "mkdocs.yml").read_text().split("\nnav:", 1)[0] + "\nnav:\n  - Home: index.md\n"
    (tmp_path / "mkdocs.yml").write_text(config)
    run = subprocess.run(
        [
            str(MKDOCS),
            "build",
            "--strict",
            "--config-file",
            str(tmp_path / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "s"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=300,
        check=False,
    )
    assert run.returncode != 0 and "gone.md" in run.stdout + run.stderr


README_LIMIT = 12 * 1024
"""The README says what sunk is, shows one diagram, install, a short stack and the two commands, and
links to the docs site; everything else lives in docs/."""


def test_the_readme_stays_short() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes, over {README_LIMIT}: move the detail into docs/"


def test_the_readme_keeps_the_two_commands() -> None:
    """CI (.ci/run) calls `make test`; `make demo` is the main job: both as the README shows them."""
    readme = (ROOT / "README.md").read_text()
    assert "make demo   # the main job, offline, on the acme-dev stack" in readme
    assert "make test   # the whole test suite" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_the_readme_stack_validates(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    stack = readme.split("## A stack", 1)[1].split('```yaml title="Pulumi.demo-dev.yaml"\n', 1)[1].split("```", 1)[0]
    (tmp_path / "Pulumi.demo-dev.yaml").write_text(stack)
    spec = load_stack("demo-dev", tmp_path).spec
    assert (spec.name, spec.tenant, [ns.name for ns in spec.nodesets]) == ("slurm", "demo", ["cpu"])


def test_the_readme_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)\)", readme)
    assert targets, "the README links to the docs"
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).is_file()]
    assert not missing, f"README links to files that do not exist: {missing}"


def _cli_commands() -> list[str]:
    """The anchors of the commands the generated CLI reference lists, groups (`sunk images`) left out."""
    sections = (ROOT / "docs" / "reference" / "cli.md").read_text().split('<a id="')[1:]
    return [s.split('"', 1)[0] for s in sections if "Subcommands:" not in s]


def test_commands_by_task_names_every_command_and_no_flag() -> None:
    """docs/commands.md is the task-oriented page over the generated CLI reference: it links every
    command there (it lacked two when it repeated the reference by hand) and repeats no option."""
    page = (ROOT / "docs" / "commands.md").read_text()
    commands = _cli_commands()
    assert "cmd-sunk-local-up" in commands and "cmd-sunk-images" not in commands
    missing = [c for c in commands if f"reference/cli.md#{c})" not in page]
    assert not missing, f"docs/commands.md does not link {missing}"
    flags = re.findall(r"(?<![\w-])--[a-z][\w-]*", page)
    assert not flags, f"docs/commands.md repeats options of the CLI reference: {flags}"


def test_the_changelog_is_one_file_on_github_and_on_the_site() -> None:
    """CHANGELOG.md lives at the top level; the site's page includes it (pymdownx.snippets), so the
    two can't differ, and it holds no relative link (one that works on GitHub breaks on the site)."""
    assert (ROOT / "docs" / "changelog.md").read_text() == '--8<-- "CHANGELOG.md"\n'
    changelog = (ROOT / "CHANGELOG.md").read_text()
    relative = [t for t in re.findall(r"\]\(([^)]+)\)", changelog) if not t.startswith(("http", "#"))]
    assert not relative, f"CHANGELOG.md links {relative}: name the file in backticks instead"
    assert "[changelog](CHANGELOG.md)" in (ROOT / "README.md").read_text()


def test_the_changelog_lists_every_renamed_field() -> None:
    """A field the spec refuses with its new place (sunk.spec.errors.RENAMED) has its row in the
    changelog's table, old and new, so the error's pointer to CHANGELOG.md finds it."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    table = changelog.split("## Renames, removals and deprecations", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    missing = [
        ".".join(old)
        for old, (new, _since) in RENAMED.items()
        if not any(f"`{'.'.join(old)}`" in row and f"`{new}`" in row for row in rows)
    ]
    assert not missing, f"CHANGELOG.md's renames table lacks {missing}"
