"""The controllers' decisions are pure at run time too, not only in the import graph
import-linter checks (.importlinter): importing every plan and model loads no HTTP, Kubernetes or
Prometheus client library (package __init__ files import nothing that would)."""

from __future__ import annotations

import subprocess
import sys

PURE = [
    "sunk.runtime.operator.plan",
    "sunk.runtime.operator.status",
    "sunk.runtime.syncer.plan",
    "sunk.runtime.syncer.scope",
    "sunk.runtime.scheduler.plan",
    "sunk.runtime.scheduler.fit",
    "sunk.runtime.slurmrest.models",
    "sunk.runtime.exporter.collect",
    "sunk.runtime.exporter.model",
    "sunk.runtime.webhook.admission",
]


def test_importing_the_decisions_loads_no_client_library() -> None:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in PURE)
        + "print(sorted(m for m in ('httpx', 'kubernetes', 'prometheus_client', 'kmock') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    # ...and the client is still there for whoever asks for it.
    code = "from sunk.runtime.slurmrest import SlurmRestClient; print(SlurmRestClient.__name__)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        == "SlurmRestClient\n"
    )
