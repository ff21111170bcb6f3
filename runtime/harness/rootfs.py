"""The Slurm image's package set as a local root filesystem.

Built once per package list with mmdebstrap (Debian trixie: Slurm 24.11), cached as a zstd
tarball under $SUNK_CACHE_DIR (default ~/.cache/sunk), and extracted into a private temporary
folder for each harness instance. The image (runtime/images/slurm/Dockerfile) installs the same
packages.txt, so the daemons the tests boot are the daemons the image ships.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PACKAGES_TXT = Path(__file__).resolve().parent.parent / "images" / "slurm" / "packages.txt"
SUITE = "trixie"
MIRROR = "http://deb.debian.org/debian"
# Bump when the build recipe below changes, so cached tarballs built the old way are not reused.
RECIPE = "1"
# Docs, manuals and translations are a fifth of the tree and nothing reads them.
EXCLUDED = ["/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*"]


def read_packages(path: Path = PACKAGES_TXT) -> list[str]:
    """One Debian package per line; blank lines ignored."""
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def cache_dir() -> Path:
    return Path(os.environ.get("SUNK_CACHE_DIR") or Path.home() / ".cache" / "sunk")


def cache_key(packages: list[str]) -> str:
    """Tarball identity: the package set and the recipe (not the order of lines)."""
    text = "\n".join([f"{SUITE} {MIRROR} recipe={RECIPE}", *sorted(packages)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def mmdebstrap_command(packages: list[str], target: Path) -> list[str]:
    cmd = [
        "mmdebstrap",
        "--variant=apt",
        "--mode=root",
        f"--include={','.join(packages)}",
        # The image installs without Recommends too; the tests prove the list is enough.
        "--aptopt=APT::Install-Recommends false",
        *(f"--dpkgopt=path-exclude={p}" for p in EXCLUDED),
        "--customize-hook=rm -rf $1/var/lib/apt/lists/* $1/var/cache/apt/*",
        SUITE,
        str(target),
        MIRROR,
    ]
    return cmd


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_tarball(packages: list[str] | None = None, *, log: bool = True) -> Path:
    """The cached tarball for this package set, building it first if absent. A file lock makes
    concurrent callers (parallel test sessions, a demo) wait for one build instead of racing."""
    pkgs = packages if packages is not None else read_packages()
    folder = cache_dir()
    tarball = folder / f"slurm-rootfs-{cache_key(pkgs)}.tar.zst"
    if tarball.is_file():
        return tarball
    with _locked(folder / f"{tarball.name}.lock"):
        if tarball.is_file():  # another process built it while we waited
            return tarball
        for tool in ("mmdebstrap", "zstd"):
            if shutil.which(tool) is None:
                raise RuntimeError(f"{tool} is not installed; run `bash .ci/bootstrap` (apt-get install {tool})")
        partial = folder / f"{tarball.name}.{os.getpid()}.partial.tar.zst"
        if log:
            print(
                f"sunk: building the Slurm root filesystem ({len(pkgs)} packages, {SUITE}) into {tarball}",
                file=sys.stderr,
            )
        started = time.monotonic()
        try:
            done = subprocess.run(mmdebstrap_command(pkgs, partial), capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"mmdebstrap failed ({done.returncode}):\n{done.stderr[-4000:]}")
            partial.rename(tarball)  # atomic: readers never see half a tarball
        finally:
            partial.unlink(missing_ok=True)
        if log:
            print(f"sunk: root filesystem built in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return tarball


def extract(tarball: Path, parent: Path | None = None) -> Path:
    """A private copy of the root filesystem in a new temporary folder."""
    root = Path(tempfile.mkdtemp(prefix="sunk-slurm-", dir=parent))
    # --numeric-owner: the rootfs's munge/slurm/mysql ids differ from the host's users of the
    # same names; names must not be remapped.
    try:
        subprocess.run(
            ["tar", "--zstd", "--numeric-owner", "-xpf", str(tarball), "-C", str(root)],
            check=True,
            capture_output=True,
        )
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return root
