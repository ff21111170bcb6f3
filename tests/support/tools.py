"""Tools the suite needs that `.ci/bootstrap` installs (apt packages, checkov's own virtualenv,
promtool): a test that needs one asks here, and fails naming the tool and the command that
installs it. Never a skip: a missing tool is a broken checkout, not an optional test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

BOOTSTRAP = "bash .ci/bootstrap"


def bootstrap_tool(name: str, *, at: Path | None = None, package: str | None = None) -> str:
    """The tool's path: `at` when given (where bootstrap puts it), else `name` on the PATH; when
    absent, the test fails with which tool is missing and how to get it."""
    found = str(at) if at is not None and at.is_file() else (None if at is not None else shutil.which(name))
    if found is None:
        source = f" (from {package})" if package else ""
        where = str(at) if at is not None else f"{name} on the PATH"
        pytest.fail(f"{name} is missing ({where}): run `{BOOTSTRAP}`, which installs it{source}", pytrace=False)
    return found
