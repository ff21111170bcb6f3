"""kmock as the Kubernetes API for the operator's tests (tests.support.kubesim), served from
a background thread so the operator's synchronous official client can talk to it.

kmock ignores label selectors: the operator filters again itself, so nothing here depends on
that laxness."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.kubesim import KubeSim


@pytest.fixture()
def kube_server() -> Iterator[KubeSim]:
    with KubeSim() as server:
        yield server
