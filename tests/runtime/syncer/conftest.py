"""kmock as the Kubernetes API for the syncer's real-Slurm tests (tests.support.kubesim).

kubesim fills kmock's gaps the syncer's watches need (resourceVersions, watches resuming from
one, 410, label selectors); it is still lax elsewhere (no status/spec split, no preconditions on
writes): the syncer checks its pods' labels itself and writes conditions with guarded JSON
patches, so nothing here leans on that laxness."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.kubesim import KubeSim


@pytest.fixture(scope="module")
def kube_server() -> Iterator[KubeSim]:
    with KubeSim() as server:
        yield server
