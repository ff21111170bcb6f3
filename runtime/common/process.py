"""How every controller runs as a process: logging, settings (exit 2 naming the variable when
they are bad), the metrics/health server, SIGTERM and SIGINT as a stop event, and the health
server stopped however the loop ends."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client import CollectorRegistry

from .health import Check, HealthServer
from .settings import EnvSettings, SettingsError

S = TypeVar("S", bound=EnvSettings)

NOISY = ("httpx", "urllib3", "kubernetes")
"""Client libraries that log a line per request: only their warnings are shown."""


@dataclass(frozen=True)
class Process:
    """What a controller hands the runner once its settings are read."""

    registry: CollectorRegistry
    alive: Check
    ready: Check
    loop: Callable[[threading.Event], None]
    """Runs until the event is set."""
    close: Callable[[], None] = lambda: None
    """Releases clients (and leases) after the loop ended."""


LOG_LEVEL = "SUNK_LOG_LEVEL"
"""Every controller's log level: debug, info (the default), warning, error or critical, in any case."""
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def run(name: str, settings_type: type[S], build: Callable[[S], Process]) -> int:
    """Run controller `name`: read its settings, build it, serve health and metrics on
    SUNK_METRICS_PORT, loop until SIGTERM or SIGINT. Returns the exit code."""
    level = os.environ.get(LOG_LEVEL, "INFO").strip().upper() or "INFO"
    if level not in LOG_LEVELS:
        print(f"sunk-{name}: {LOG_LEVEL}: {level!r} is not one of debug, info, warning, error", file=sys.stderr)
        return 2
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    log = logging.getLogger(f"sunk.{name}")
    try:
        settings = settings_type.from_env()
    except SettingsError as err:
        print(f"sunk-{name}: {err}", file=sys.stderr)
        return 2
    port = getattr(settings, "metrics_port")  # noqa: B009  (every controller's settings have it)
    process = build(settings)
    server = HealthServer(port, process.registry, alive=process.alive, ready=process.ready).start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info("sunk-%s starting: %s", name, settings.describe())
    try:
        process.loop(stop)
    finally:
        server.stop()
        process.close()
    return 0
