"""The off-cluster differences are one short list, repeated in the README word for word."""

from __future__ import annotations

from pathlib import Path

from sunk.runtime.local.offcluster import DIFFERENCES

README = Path(__file__).resolve().parents[3] / "README.md"


def test_the_readme_lists_every_off_cluster_difference() -> None:
    readme = " ".join(README.read_text().split())
    for difference in DIFFERENCES:
        assert difference.why
        assert " ".join(difference.what.split()) in readme
