"""The premise of the operator's release hold, on real daemons: a slurmrestd reads no slurmctld of an
older release (Slurm serves older clients only), so the release a Slurm reply carries
(`meta.slurm.version`) is slurmctld's or an older one. A 24.11 cluster on the harness; slurmrestd's
root moved to the 26.05 image first (as `kubectl apply` of an upgrade replaces it before slurmctld
moves), then slurmctld's. Read through the operator's own SlurmApi (RestSlurm)."""

from __future__ import annotations

import pytest
from sunk.runtime.harness import LocalSlurm, SimNode
from sunk.runtime.harness.upgrade import Upgrade
from sunk.runtime.operator.plan import behind
from sunk.runtime.operator.slurm import RestSlurm
from sunk.runtime.slurmrest import SlurmApiError, SlurmRestClient, SlurmUnavailable, StaticToken

from sunk.spec.cluster import ClusterSpec

pytestmark = pytest.mark.slurm

SOURCE, TARGET = "24.11", "26.05"
SPEC = ClusterSpec.model_validate(
    {
        "name": "hold",
        "tenant": "acme",
        "slurm": {"version": SOURCE},
        "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 2, "memoryMib": 1024}],
        "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
    }
)


def _read(slurm: LocalSlurm) -> tuple[int, str | None] | str:
    """(nodes read, the release the reply carried), or why the read failed."""
    client = SlurmRestClient(slurm.rest_url, user="slurm", token=StaticToken(slurm.token("slurm", 300)), retries=1)
    api = RestSlurm(client)
    try:
        return len(api.list_nodes()), api.release()
    except (SlurmApiError, SlurmUnavailable) as err:
        return f"{type(err).__name__}: {err}"
    finally:
        client.close()


def test_a_slurmrestd_of_the_new_release_reads_slurmctld_only_once_it_moved() -> None:
    with LocalSlurm.start(SPEC, [SimNode("cpu-0", "cpu")]) as slurm:
        assert _read(slurm) == (1, SOURCE)
        upgrade = Upgrade(slurm, TARGET)
        upgrade._move_root("slurmrestd", ["slurmrestd"])  # one role moved out of the plan's order
        slurm.start_slurmrestd()
        refused = _read(slurm)
        assert isinstance(refused, str), f"slurmrestd {TARGET} read slurmctld {SOURCE}: {refused}"
        upgrade._move_root("slurmctld", ["slurmctld"])
        slurm.restart_slurmctld()
        read = _read(slurm)
    assert read == (1, TARGET), read
    # What the operator concludes from each answer, for a NodeSet of the new release.
    assert behind(SOURCE, TARGET) and not behind(TARGET, TARGET)
    print(f"\nslurmrestd {TARGET} against slurmctld {SOURCE}: {refused}")
