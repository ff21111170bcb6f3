"""`python -m sunk.runtime.operator`: the NodeSet operator process (settings: settings.py)."""

from __future__ import annotations

import logging
import signal
import sys
import threading

from ..common.health import HealthServer
from ..common.settings import SettingsError
from .kube import OfficialKube, kube_client
from .loop import Operator
from .settings import Settings

log = logging.getLogger("sunk.operator")


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings.from_env()
    except SettingsError as err:
        log.error("%s", err)
        return 2
    kube = OfficialKube(kube_client())
    operator = Operator(kube, kube, settings)
    health = HealthServer(settings.metrics_port, operator.registry, alive=operator.alive, ready=operator.ready)
    health.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info(
        "sunk operator %s starting (lease %s/%s)", settings.identity, settings.lease_namespace, settings.lease_name
    )
    try:
        operator.run(stop)
    finally:
        health.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
