"""The real Kubernetes control plane built from the pinned Go modules, cached by their hash.

runtime/local/gomodules/ holds two small Go modules written by tools/controlplane/pin.py: `kubernetes` (k8s.io/kubernetes
at a release, one replace per staging module) and `etcd` (go.etcd.io/etcd/server/v3). `build()`
compiles etcd, kube-apiserver, kube-controller-manager and kube-scheduler with upstream's release
flags (hack/lib/golang.sh: static, `-trimpath`, tags `selinux,notest,grpcnotrace`, `-s -w` and the
version stamped into component-base) into ~/.cache/sunk/controlplane/<key>/bin, where the key hashes
the go.mod and go.sum files, the flags and the Go toolchain: the same pins never build twice, and a
bump lands beside the old build. kubectl is not built: the machines carry one (notes/local-cluster.md).

`sunk local controlplane build`, `make controlplane` and `sunk local up` (when missing) call this. The
Go modules ship in the wheel (package data), so an installed sunk builds its control plane too; Go
1.26 and a Go module proxy are what it needs.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..images.cache import cache_dir

MODULES = Path(__file__).resolve().parent / "gomodules"
"""The pinned Go modules, beside this file in the checkout and in the wheel."""

KUBERNETES_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
ETCD_PACKAGE = "go.etcd.io/etcd/server/v3"
BINARIES = ("etcd", *KUBERNETES_COMMANDS)
TAGS = "selinux,notest,grpcnotrace"
"""Upstream's build tags for release binaries (hack/lib/golang.sh): SELinux labels on, test-only
code and gRPC tracing out."""
RECIPE = "1"
"""Bumped when the build below changes in a way the pins' files don't show."""

_REQUIRE = re.compile(r"^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v1\.(\d+)\.\d+)\b", re.M)


class BuildError(RuntimeError):
    """The control plane can't be built or found; the message says what to do."""


@dataclass(frozen=True)
class Step:
    """One `go` command: where it runs and its arguments."""

    cwd: Path
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Built:
    key: str
    bin: Path
    seconds: float
    """Build time of this call, 0 when cached."""


def release_of(gomod: str) -> tuple[str, str]:
    """(v1.36.3, "36"): the Kubernetes release the kubernetes module's go.mod requires."""
    m = _REQUIRE.search(gomod)
    if not m:
        raise BuildError(
            "gomodules/kubernetes/go.mod requires no k8s.io/kubernetes release: run tools/controlplane/pin.py"
        )
    return m.group(1), m.group(2)


def ldflags(release: str, minor: str) -> str:
    """What `kubectl version` and /version report, as upstream stamps them (hack/lib/version.sh)."""
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        for name, value in (("gitVersion", release), ("gitMajor", "1"), ("gitMinor", minor), ("gitTreeState", "clean")):
            flags.append(f"-X {package}.{name}={value}")
    return " ".join(flags)


def steps(modules: Path, out: Path, release: str, minor: str) -> list[Step]:
    """The go commands that build every binary into `out` (pure)."""
    common = ("go", "build", "-trimpath", "-tags", TAGS)
    return [
        Step(modules / "etcd", (*common, "-ldflags", "-s -w", "-o", str(out / "etcd"), ETCD_PACKAGE)),
        Step(
            modules / "kubernetes",
            (
                *common,
                "-ldflags",
                ldflags(release, minor),
                "-o",
                f"{out}/",
                *(f"k8s.io/kubernetes/cmd/{c}" for c in KUBERNETES_COMMANDS),
            ),
        ),
    ]


def go_env(environ: dict[str, str] | os._Environ[str] = os.environ) -> dict[str, str]:
    """The machine's Go toolchain (never a download), the go.sum as written, static binaries."""
    return {**environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly", "CGO_ENABLED": "0"}


def cache_key(files: Sequence[tuple[str, bytes]], go_version: str) -> str:
    """The cache entry's name: the pins' files, the toolchain and this recipe (pure)."""
    digest = hashlib.sha256()
    for name, data in (("recipe", RECIPE.encode()), ("go", go_version.encode()), *sorted(files)):
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return digest.hexdigest()[:16]


def _pin_files(modules: Path) -> list[tuple[str, bytes]]:
    names = [f"{m}/{f}" for m in ("kubernetes", "etcd") for f in ("go.mod", "go.sum")]
    missing = [n for n in names if not (modules / n).is_file()]
    if missing:
        raise BuildError(
            f"{modules}: {', '.join(missing)} missing (python tools/controlplane/pin.py v1.36.3 v3.6.17 writes them)"
        )
    return [(n, (modules / n).read_bytes()) for n in names]


def _go_version() -> str:
    if shutil.which("go") is None:
        raise BuildError("no `go` on the PATH: the control plane builds with Go 1.26 or later")
    return subprocess.run(
        ["go", "env", "GOVERSION"], check=True, capture_output=True, text=True, env=go_env()
    ).stdout.strip()


def root(cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "controlplane"


def locate(modules: Path = MODULES, cache: Path | None = None) -> Path:
    """The bin folder of the current pins' build, or BuildError naming the command that makes it."""
    key = cache_key(_pin_files(modules), _go_version())
    folder = root(cache) / key / "bin"
    if not all((folder / b).is_file() for b in BINARIES):
        raise BuildError(
            f"the control plane of these pins is not built ({folder}): run `sunk local controlplane build`"
        )
    return folder


def build(modules: Path = MODULES, cache: Path | None = None, log: Callable[[str], None] = lambda _: None) -> Built:
    """Build the pins' binaries into the cache, unless they are there. Atomic: the bin folder appears
    whole or not at all, so an interrupted build leaves nothing a later `locate` takes."""
    started = time.monotonic()
    files = _pin_files(modules)
    key = cache_key(files, _go_version())
    entry = root(cache) / key
    folder = entry / "bin"
    if all((folder / b).is_file() for b in BINARIES):
        return Built(key, folder, 0.0)
    release, minor = release_of(dict(files)["kubernetes/go.mod"].decode())
    entry.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".bin-", dir=entry) as tmp:
        staging = Path(tmp) / "bin"
        staging.mkdir()
        for step in steps(modules, staging, release, minor):
            log(f"controlplane: {' '.join(step.argv[:2])} in {step.cwd.name} ({step.argv[-1]}...)")
            done = subprocess.run(step.argv, cwd=step.cwd, env=go_env(), check=False)
            if done.returncode != 0:
                raise BuildError(f"`{' '.join(step.argv)}` in {step.cwd} failed with exit {done.returncode}")
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    return Built(key, folder, time.monotonic() - started)


def cmd_build(_args: object) -> int:
    """`sunk local controlplane build`: print the bin folder; the build time when it built."""
    try:
        built = build(log=lambda line: print(line, file=sys.stderr))
    except BuildError as err:
        print(f"sunk local controlplane build: {err}", file=sys.stderr)
        return 1
    sizes = ", ".join(f"{b} {(built.bin / b).stat().st_size / 2**20:.0f} MiB" for b in BINARIES)
    how = f"built in {built.seconds:.0f} s" if built.seconds else "cached"
    print(f"{built.bin} ({how}; {sizes})")
    return 0
