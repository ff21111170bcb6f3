"""`python -m sunk.runtime.operator`: the NodeSet operator process (runtime/common/process.py;
settings: settings.py)."""

from __future__ import annotations

import sys

from ..common.process import Process, run
from .cache import watch
from .kube import OfficialKube, kube_client
from .loop import Operator
from .settings import Settings


def build(settings: Settings) -> Process:
    api_client = kube_client()
    kube = OfficialKube(api_client)
    # Kubernetes read by watches (one list per kind at start); its loop releases the Lease however it ends.
    operator = Operator(kube, kube, settings, watched=watch(api_client))
    return Process(operator.registry, operator.alive, operator.ready, operator.run)


def main() -> int:
    return run("operator", Settings, build)


if __name__ == "__main__":
    sys.exit(main())
