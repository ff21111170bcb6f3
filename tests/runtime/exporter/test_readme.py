"""docs/concepts/exporter.md (the exporter page of the docs site) lists every metric the exporter serves, and no other."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from prometheus_client import CollectorRegistry
from sunk.runtime.exporter.collect import families
from sunk.runtime.exporter.loop import Exporter
from sunk.runtime.exporter.model import Snapshot
from sunk.runtime.exporter.slurm import TextJobReads
from sunk.runtime.slurmrest import StaticToken
from sunk.runtime.slurmrest.jobtext import SqueueJobs

from tests.support.fakes.exporter import FakeSlurm, job, node, partition

README = Path(__file__).resolve().parents[3] / "docs" / "concepts" / "exporter.md"


def _expand(name: str) -> set[str]:
    """`a_{b,c}_d` -> {a_b_d, a_c_d}."""
    parts = re.split(r"\{([^}]*)\}", name)
    options = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return {"".join(choice) for choice in itertools.product(*options)}


def test_the_metric_table_names_exactly_what_is_served() -> None:
    table = README.read_text().split("## Metrics", 1)[1].split("An example scrape", 1)[0]
    documented: set[str] = set()
    for name in re.findall(r"`(sunk_[a-z0-9_{},]+)`", table):
        documented |= _expand(name)
    fake = FakeSlurm(jobs=[job(1, "PENDING")], nodes=[node("n")], partitions=[partition("batch")])
    snap = Snapshot(tuple(fake.list_jobs()), tuple(fake.list_nodes()), tuple(fake.list_partitions()), fake.diag())
    served = {f.name + ("_total" if f.kind == "counter" else "") for f in families(snap, 0, per_user=True)}
    registry = CollectorRegistry()
    # As deployed: every job read through squeue (TextJobReads and its counter).
    Exporter(
        TextJobReads(fake, SqueueJobs(StaticToken("-"), "/etc/slurm/slurm.conf"), registry=registry), registry=registry
    )
    served |= {
        m.name + ("_total" if m.type == "counter" else "") for m in registry.collect() if m.name.startswith("sunk_")
    }
    served.discard("sunk_slurm_pending_wait_seconds")  # listed as a histogram: in the table by name
    documented.discard("sunk_slurm_pending_wait_seconds")
    assert documented == served, (sorted(documented - served), sorted(served - documented))
