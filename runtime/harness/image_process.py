"""The runtime image's processes (operator, syncer, scheduler) started here as their Deployments
start them: `python -m sunk.runtime.<controller>` from the image's own root filesystem (Debian's
python3 and the wheels the image ships, no pulumi), as the image's user, with the image's
environment plus the SUNK_* settings and KUBECONFIG a test gives.

Differences from a pod, kept small on purpose: the host's /tmp is bound into the root (where tests
keep kubeconfigs and keys), and the network is the host's (Kubernetes and slurmrestd stand-ins
listen on loopback). A file a test hands over (KUBECONFIG, any SUNK_*_FILE) is given to the
process as a copy only the image's user can read, as a Secret mount with fsGroup is in the pod.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Self

from sunk.images import DEFAULT_SLURM

from ..images.build import Builder
from .jail import Jail
from .local import RELEASE_ENV

PASSED = ("SUNK_", "KUBECONFIG")
"""Environment variables a test may hand to the process; the host's others stay out."""


class RuntimeImage:
    """`with RuntimeImage() as image: proc = image.popen("sunk.runtime.syncer", env)`."""

    def __init__(self, parent: Path | None = None, release: str | None = None) -> None:
        """`release`: the Slurm release whose runtime image (and Slurm clients) to run; default
        the one SUNK_HARNESS_SLURM_VERSION names, else the default release."""
        release = release or os.environ.get(RELEASE_ENV) or DEFAULT_SLURM
        rootfs = Builder(release=release).rootfs("runtime")
        config = json.loads((rootfs.parent / "config.json").read_text())
        process = config["process"]
        self.argv: list[str] = list(process["args"])
        self.user = f"{process['user']['uid']}:{process['user']['gid']}"
        self.uid, self.gid = int(process["user"]["uid"]), int(process["user"]["gid"])
        self.env = dict(item.split("=", 1) for item in process.get("env", []))
        workdir = Path(tempfile.mkdtemp(prefix="sunk-runtime-", dir=parent))
        workdir.chmod(0o711)  # the image's user reaches its secrets/ folder below, nothing else
        self.jail = Jail(workdir, {"runtime": rootfs})

    def __enter__(self) -> Self:
        try:
            self.jail.open()
            self.jail.bind("runtime", Path(tempfile.gettempdir()), "/tmp")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.jail.close()
        finally:
            self.jail.remove()

    def secret_file(self, source: Path) -> Path:
        """A copy of `source` readable by the image's user only (0400): a Secret mount's view."""
        folder = self.jail.workdir / "secrets"
        folder.mkdir(mode=0o700, exist_ok=True)
        shutil.chown(folder, self.uid, self.gid)
        target = folder / f"{hashlib.sha256(str(source).encode()).hexdigest()[:8]}-{source.name}"
        shutil.copyfile(source, target)
        target.chmod(0o400)
        shutil.chown(target, self.uid, self.gid)
        return target

    def command(self, module: str, env: Mapping[str, str]) -> list[str]:
        passed = {k: v for k, v in env.items() if k.startswith(PASSED)}
        for key, value in passed.items():
            if (key == "KUBECONFIG" or key.endswith("_FILE")) and Path(value).is_file():
                passed[key] = str(self.secret_file(Path(value)))
        return self.jail.command(
            ["python", "-m", module], role="runtime", env={**self.env, **passed}, user=self.user, cwd="/"
        )

    def popen(
        self, module: str, env: Mapping[str, str], *, stdout: IO[Any] | int | None = None, stderr: Any = None, **kw: Any
    ) -> subprocess.Popen[Any]:
        """Start `python -m module` in the image (the PID is python's: nsenter, chroot, env exec)."""
        return subprocess.Popen(self.command(module, env), stdout=stdout, stderr=stderr, **kw)
