"""Real Slurm daemons booted from the default stack's rendered files (runtime/harness).

One acme-dev cluster per session: booting takes ~3 s, but tests share it, so each test cancels its
jobs afterwards (the `acme` fixture) and leaves the nodes idle for the next."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sunk.runtime.harness import LocalSlurm

from sunk.spec.cluster import ClusterSpec
from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS


@pytest.fixture(scope="session")
def acme_spec() -> ClusterSpec:
    return load_stack("acme-dev", FIXTURE_STACKS).spec


@pytest.fixture(scope="session")
def acme_cluster(acme_spec: ClusterSpec) -> Iterator[LocalSlurm]:
    with LocalSlurm.start(acme_spec) as slurm:
        print(f"\nLocalSlurm acme-dev start-up: {slurm.timings}")
        yield slurm


@pytest.fixture
def acme(acme_cluster: LocalSlurm) -> Iterator[LocalSlurm]:
    """The shared acme-dev cluster; jobs a test leaves behind are cancelled after it."""
    yield acme_cluster
    acme_cluster.cancel_all()
