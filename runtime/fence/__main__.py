"""`python -m sunk.runtime.fence`: read the Lease and this pod's primary mark every
sunk.fence.RENEW_EVERY seconds and act (lease.Fence), until SIGTERM. Exit 2: bad settings."""

from __future__ import annotations

import logging
import signal
import sys
import threading
from pathlib import Path

from sunk import naming
from sunk.fence import RENEW_EVERY

from ..common.settings import EnvSettings, SettingsError
from .lease import Fence, KubeLeases, Marks

log = logging.getLogger("sunk.fence")


class Settings(EnvSettings):
    namespace: str
    """The cluster's namespace, where its Lease is (SUNK_NAMESPACE)."""
    lease: str
    """The Lease's name, the cluster's (SUNK_LEASE; sunk.naming.controller_fence)."""
    pod_name: str
    """This pod's name (SUNK_POD_NAME, from the downward API)."""
    pod_uid: str
    """This pod's uid (SUNK_POD_UID, from the downward API): a pod made again under the same name,
    after a force delete, is another holder than the one whose slurmctld may still run."""
    primary_mark: Path = Path(naming.PRIMARY_MARK)
    """Where SlurmctldPrimaryOnProg marks this pod's slurmctld the primary (SUNK_PRIMARY_MARK)."""
    stop_file: Path = Path(naming.FENCE_STOP)
    """What this container writes to have slurmctld stopped (SUNK_STOP_FILE)."""


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        settings = Settings.from_env()
    except SettingsError as err:
        print(f"sunk-fence: {err}", file=sys.stderr)
        return 2
    me = f"{settings.pod_name}_{settings.pod_uid}"
    fence = Fence(
        KubeLeases(settings.namespace, settings.lease),
        settings.namespace,
        settings.lease,
        me,
        Marks(settings.primary_mark, settings.stop_file),
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info("sunk-fence starting: Lease %s/%s as %s", settings.namespace, settings.lease, me)
    # No release on SIGTERM: slurmctld may still be saving its state as the primary; a backup
    # takes the Lease once it stays unrenewed for its duration (sunk.fence.GRACE covers that).
    while not stop.is_set():
        fence.tick()
        stop.wait(RENEW_EVERY)
    return 0


if __name__ == "__main__":
    sys.exit(main())
