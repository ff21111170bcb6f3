"""Where this sunk came from, as a pip requirement that installs exactly it again.

sunk is not on a package index: it is installed from a wheel built from the repository, a git
URL or a checkout. pip records which in the installed distribution's `direct_url.json` (PEP 610),
so the scaffold's requirements.txt and the "install the extra" hint name that same source and
version, never a bare `sunk` that any index could answer with someone else's package."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import metadata

from sunk import __version__


@dataclass(frozen=True)
class Requirement:
    line: str
    """One requirements.txt line, e.g. `sunk[pulumi] @ file:///srv/wheels/sunk-0.1.0-py3-none-any.whl`."""
    note: str
    """Where it comes from and what pins it, for a comment above the line."""
    pinned: bool
    """The line names one exact build (a wheel, a commit, an index version), not a folder's contents."""


def _direct_url() -> tuple[str, dict[str, object] | None]:
    """(version, direct_url.json) of the installed distribution; ("", None) when sunk runs from a
    folder on sys.path that pip never installed."""
    try:
        dist = metadata.distribution("sunk")
    except metadata.PackageNotFoundError:
        return "", None
    text = dist.read_text("direct_url.json")
    try:
        doc = json.loads(text) if text else None
    except ValueError:
        doc = None
    return dist.version, doc if isinstance(doc, dict) else None


def requirement(extra: str = "pulumi") -> Requirement:
    """The requirement that installs this sunk (with `extra`) again."""
    version, direct = _direct_url()
    name = f"sunk[{extra}]" if extra else "sunk"
    if not version:
        return Requirement(
            f"{name}=={__version__}",
            f"sunk {__version__} is not installed by pip here; replace this line with the wheel, git URL or "
            "checkout you install it from",
            pinned=False,
        )
    if direct is None:
        return Requirement(f"{name}=={version}", f"sunk {version} from a package index", pinned=True)
    url = str(direct.get("url", ""))
    vcs = direct.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("commit_id"):
        return Requirement(
            f"{name} @ {vcs.get('vcs', 'git')}+{url}@{vcs['commit_id']}",
            f"sunk {version} from {url}, commit {vcs['commit_id']}",
            pinned=True,
        )
    if "archive_info" in direct:
        return Requirement(
            f"{name} @ {url}",
            f"sunk {version}, the wheel it was installed from; keep that file where CI can read it (or host "
            "it), and change this line to upgrade",
            pinned=True,
        )
    return Requirement(
        f"{name} @ {url}",
        f"sunk {version} from the checkout {url}: whatever that folder holds at install time. To pin one "
        "version, build a wheel there (pip wheel --no-deps -w dist .) and name the .whl instead",
        pinned=False,
    )
