"""Real Slurm daemons booted from the default stack's rendered files (runtime/harness).

One acme-dev cluster per session: booting takes ~3 s, but tests share it, so each test cancels its
jobs afterwards (the `acme` fixture) and leaves the nodes idle for the next."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from sunk.runtime.harness import LocalSlurm
from sunk.runtime.harness.local import RELEASE_ENV

from sunk.spec.cluster import ClusterSpec
from sunk.stackfile import load_stack
from tests.support.slurmrelease import slurmctld_release
from tests.support.specs import build_spec
from tests.support.stacks import FIXTURE_STACKS


@pytest.fixture(scope="session")
def acme_spec() -> ClusterSpec:
    """The acme-dev fixture stack's spec, on the release SUNK_HARNESS_SLURM_VERSION names where it
    names one (`make test-compat`: 24.11). The stack pins 26.05, and the harness keeps a release a
    stack names, so without this the compatibility subset's modules on this cluster ran 26.05."""
    release = os.environ.get(RELEASE_ENV, "")
    return (
        build_spec("acme-dev", {"slurm.version": release}) if release else load_stack("acme-dev", FIXTURE_STACKS).spec
    )


@pytest.fixture(scope="session")
def acme_cluster(acme_spec: ClusterSpec) -> Iterator[LocalSlurm]:
    with LocalSlurm.start(acme_spec) as slurm:
        print(f"\nLocalSlurm acme-dev start-up: {slurm.timings}")
        running = slurmctld_release(slurm)
        assert running.startswith(acme_spec.slurm.version + "."), (running, acme_spec.slurm.version)
        yield slurm


@pytest.fixture
def acme(acme_cluster: LocalSlurm) -> Iterator[LocalSlurm]:
    """The shared acme-dev cluster; jobs a test leaves behind are cancelled after it."""
    yield acme_cluster
    acme_cluster.cancel_all()
