"""kmock as the Kubernetes API for the syncer's real-Slurm tests (sunk.runtime.testing.kubesim).

kmock is lax (label selectors and resourceVersion ignored, no status/spec split); the syncer
filters its pod list itself and writes conditions with guarded JSON patches, so nothing here
leans on that laxness."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sunk.runtime.testing.kubesim import KubeSim


@pytest.fixture(scope="module")
def kube_server() -> Iterator[KubeSim]:
    with KubeSim() as server:
        yield server
