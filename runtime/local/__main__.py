"""`python -m sunk.runtime.local serve --workdir W --project P`: the local cluster's process."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

from .cluster import serve
from .controlplane import Settings


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m sunk.runtime.local")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--project", default="")
    parser.add_argument("--debug", action="store_true")
    parser.add_argument("--node-monitor-grace-period", type=float, default=Settings.node_monitor_grace)
    parser.add_argument("--default-toleration-seconds", type=int, default=Settings.unreachable_toleration)
    parser.add_argument("--node-startup-grace-period", type=float, default=Settings.node_startup_grace)
    parser.add_argument("--node-eviction-rate", type=float, default=Settings.eviction_rate)
    args = parser.parse_args()
    seconds = args.default_toleration_seconds
    settings = Settings(
        args.node_monitor_grace_period,
        not_ready_toleration=seconds,
        unreachable_toleration=seconds,
        node_startup_grace=args.node_startup_grace_period,
        eviction_rate=args.node_eviction_rate,
    )
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    asyncio.run(serve(args.workdir, args.project, settings))


if __name__ == "__main__":
    main()
