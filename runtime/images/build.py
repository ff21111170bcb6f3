"""Builds sunk's images without a daemon: mmdebstrap for the Debian base, buildah (vfs storage,
chroot isolation) for every layer above it.

Each layer is a buildah image tagged by the hash of its inputs (recipe.layer_hash), so a layer is
built once per content and shared by the roles above it. Each role is written as an oci-archive
under the cache (what `sunk images push` ships) and, for the local harness and cluster, as a root
filesystem taken straight from its built layer, with the runtime config umoci would write beside it:
the tests boot exactly the layers that are pushed. `make demo` writes only the roots. A build that
fails leaves no container, tag, archive or root filesystem behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import sunk
from sunk.images import DEFAULT_ARCH, DEFAULT_SLURM, RELEASES, ROLES, Arch, reference, tag_for

from . import bundle as bundle_config
from . import cache, debs, recipe
from .cache import cache_dir
from .prune import Plan
from .recipe import EXCLUDED, Layer

STORAGE = ("--storage-driver", "vfs")
KEEP_UNUSED_SECONDS = 6 * 3600
"""Older builds of a layer, archive or unpacked root are reclaimed only once unused this long:
several checkouts (a CI clone beside a working tree, or two branches) share one cache, and each
may still be booting Slurm from the build another one has just superseded."""


PARALLEL = 4
"""Layers built at once: each waits on the mirror, buildah's vfs copies and apt in turn, so a few
side by side keep the cores and the network busy where one after the other leaves them idle."""
LISTS_MAX_AGE = 3600
"""Seconds the Debian package lists one layer fetched (apt-get update) serve the next layers of the
same family and sources before they are fetched again. The Slurm packages are pinned to exact
versions whatever the lists' age; this only saves refetching the same index for every layer."""


def _used(stamp: Path) -> None:
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.touch()


def _unused(stamp: Path) -> bool:
    try:
        return time.time() - stamp.stat().st_mtime > KEEP_UNUSED_SECONDS
    except FileNotFoundError:
        return True


def reclaimable(candidates: Iterator[Path] | Sequence[Path], keep: Path, stamp: Callable[[Path], Path]) -> list[Path]:
    """The candidates, `keep` aside, whose stamp says they were unused for KEEP_UNUSED_SECONDS."""
    return sorted(c for c in candidates if c != keep and _unused(stamp(c)))


def site_packages(python: str) -> str:
    """Where the runtime's wheels go in an image whose python3 is `python` (Debian's layout)."""
    return f"/usr/local/lib/python{python}/dist-packages"


SOURCE_URL = "https://github.com/sunk-dev/sunk"
QEMU = {"arm64": "qemu-aarch64", "amd64": "qemu-x86_64"}
BINFMT = Path("/proc/sys/fs/binfmt_misc")
"""Where the kernel lists the interpreters of foreign binaries (qemu-user registers here)."""


class BuildError(RuntimeError):
    """A build that cannot go on; the message is one line naming the cause."""


SOURCES = {
    # pyxis and enroot are not Debian packages: NVIDIA publishes them on GitHub (the pyxis recipe
    # downloads exactly these).
    "pyxis": (
        "https://github.com/NVIDIA/enroot/releases/download/v3.5.0/",
        "https://github.com/NVIDIA/pyxis/archive/refs/tags/v0.20.0.tar.gz",
    ),
}


def probe_sources(variant: str, timeout: float = 10) -> None:
    """Refuse, before any layer is built, a variant whose downloads this host cannot reach."""
    import urllib.error
    import urllib.request

    for url in SOURCES.get(variant, ()):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
                pass
        except urllib.error.HTTPError:
            continue  # the host answered (a folder URL may say 404): it is reachable
        except (OSError, ValueError) as err:
            reason = getattr(err, "reason", err)
            raise BuildError(
                f"--with {variant}: cannot fetch {url} ({reason}); {variant} is not a Debian package, "
                "so this stage needs a host that reaches github.com (or use a NodeSet image of your own)"
            ) from None


def host_arch() -> Arch:
    machine = platform.machine()
    return "arm64" if machine in ("aarch64", "arm64") else "amd64"


def check_arch(arch: str) -> Arch:
    """The architecture if this host can build it: its own, or one qemu-user runs via binfmt."""
    if arch not in ("amd64", "arm64"):
        raise BuildError(f"unknown architecture {arch!r}: use amd64 or arm64")
    if arch == host_arch():
        return arch
    handler = BINFMT / QEMU[arch]
    if not handler.is_file() or "enabled" not in handler.read_text():
        raise BuildError(
            f"cannot build {arch} images on this {host_arch()} host: no {QEMU[arch]} binfmt_misc handler "
            "(apt-get install qemu-user-static binfmt-support on a host that may register one)"
        )
    return arch  # type: ignore[return-value]


def require_tools(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise BuildError(
            f"{', '.join(missing)} not installed: apt-get install {' '.join(missing)} (or bash .ci/bootstrap)"
        )


@dataclass(frozen=True)
class Built:
    """One role's image: its buildah tag, the oci-archive and the reference it ships under."""

    role: str
    arch: Arch
    digest: str
    """The input hash (cache key), not a registry digest."""
    tag: str
    archive: Path
    reference: str
    size: int
    """Uncompressed root filesystem, bytes."""
    seconds: float
    """Build time of this call (0 when cached)."""

    @property
    def archive_size(self) -> int:
        return self.archive.stat().st_size

    @property
    def tag_name(self) -> str:
        return self.reference.rsplit(":", 1)[1]


def _tree_size(root: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def _source_root() -> Path | None:
    """The checkout this sunk runs from (pyproject.toml beside sunk/), if any."""
    top = Path(sunk.__file__).resolve().parent.parent
    return top if (top / "pyproject.toml").is_file() and (top / "runtime").is_dir() else None


def _source_files() -> list[Path]:
    top = _source_root()
    if top is None:  # an installed wheel: the package folder already has the final layout
        base = Path(sunk.__file__).resolve().parent
        return sorted(p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    files = [top / "pyproject.toml"]
    for folder in ("sunk", "components", "runtime"):
        files += sorted(
            p for p in (top / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        )
    return files


def _hash_files(files: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for path in files:
        h.update(str(path.name).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _lock_file() -> Path | None:
    top = _source_root()
    return top / "requirements.lock" if top is not None else None


class Builder:
    """Builds layers and roles for one architecture, in one buildah storage under the cache."""

    def __init__(
        self,
        arch: str = DEFAULT_ARCH,
        *,
        release: str = DEFAULT_SLURM,
        cache: Path | None = None,
        log: Callable[[str], None] | None = None,
    ):
        if release not in RELEASES:
            raise BuildError(f"unknown Slurm release {release!r}: one of {', '.join(RELEASES)}")
        self.release = RELEASES[release]
        self.arch = check_arch(arch)
        self.cache = cache or cache_dir()
        self.root = self.cache / "buildah"
        self.images = self.cache / "images"
        self.log = log or (lambda text: print(f"sunk images: {text}", file=sys.stderr))
        self._hashes: dict[str, str] = {}
        self._families: dict[str, Builder] = {self.release.version: self}
        self._lists_lock = threading.Lock()
        self.mirror = recipe.mirror()
        self.site_packages = site_packages(self.release.python)

    def _family(self, name: str) -> Builder:
        """The builder of the release whose suite builds `name` (mariadb: Debian stable's)."""
        family = recipe.family(name, self.release.version)
        if family not in self._families:
            other = Builder(self.arch, release=family, cache=self.cache, log=self.log)
            other._families = self._families
            self._families[family] = other
        return self._families[family]

    # -- buildah ----------------------------------------------------------------------------
    def _argv(self, *args: str) -> list[str]:
        return ["buildah", "--root", str(self.root / "storage"), "--runroot", str(self.root / "run"), *STORAGE, *args]

    def buildah(self, *args: str, input: str | None = None, check: bool = True) -> str:
        done = subprocess.run(self._argv(*args), input=input, capture_output=True, text=True, check=False)
        if check and done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-12:]
            raise BuildError(f"buildah {args[0]} failed: " + " | ".join(tail))
        return done.stdout.strip()

    def remove_image(self, tag: str) -> bool:
        done = subprocess.run(self._argv("rmi", tag), capture_output=True, check=False)
        return done.returncode == 0 or not self._has_image(tag)

    def _has_image(self, tag: str) -> bool:
        done = subprocess.run(self._argv("inspect", "--type", "image", tag), capture_output=True, check=False)
        return done.returncode == 0

    # -- identity ---------------------------------------------------------------------------
    def _extra(self, layer: Layer) -> str:
        if layer.name == "python":
            lock = _lock_file()
            return self.release.python + (lock.read_text() if lock is not None else "")
        if layer.name == "runtime":
            return _hash_files(_source_files())
        return ""

    def digest(self, name: str) -> str:
        if name not in self._hashes:
            layer = recipe.load(name, release=self.release.version)
            parent = self.digest(layer.parent) if layer.parent else ""
            self._hashes[name] = recipe.layer_hash(
                layer, parent, self.arch, self._extra(layer), self.mirror, self.release
            )
        return self._hashes[name]

    def key(self, name: str) -> str:
        """The build's name in the cache: its archive, size note, unpacked root and use stamp."""
        return f"{name.replace('+', '-')}-{self._prefix}-{self.digest(name)}"

    def current_keys(self) -> frozenset[str]:
        """The keys `sunk images build` makes now on this architecture: every layer of every role
        and variant, for each supported release."""
        keys: set[str] = set()
        for version in RELEASES:
            one = self._families.get(version) or Builder(self.arch, release=version, cache=self.cache, log=self.log)
            names = [*ROLES, *(f"{role}+{v}" for v, roles in recipe.VARIANTS.items() for role in roles)]
            for name in names:
                family = one._family(name.split("+", 1)[0])
                keys.update(family.key(layer) for layer in recipe.chain(name))
        return frozenset(keys)

    def tag(self, name: str) -> str:
        return f"localhost/sunk-layer/{name}:{self._prefix}-{self.digest(name)}"

    @property
    def _prefix(self) -> str:
        """What every cached build of this builder's family and architecture starts with: a
        release's builds are never reclaimed by another's (its mirror may be gone)."""
        return f"{self.arch}-{self.release.version}"

    # -- layers -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.images.mkdir(parents=True, exist_ok=True)
        with (self.images / ".lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _build_layer(self, name: str) -> None:
        """Builds the layer on its parent's image, which must exist (build_many orders them)."""
        tag = self.tag(name)
        layer = recipe.load(name, release=self.release.version)
        started = time.monotonic()
        self.log(
            f"building layer {name} (Slurm {self.release.version}, Debian {self.release.suite}, {self.arch}, "
            f"{len(layer.packages)} package(s))"
        )
        container = f"sunk-build-{name}-{self.digest(name)}-{os.getpid()}"
        if layer.parent is None:
            self.buildah("from", "--name", container, "--arch", self.arch, "scratch")
        else:
            self.buildah("from", "--name", container, "--pull-never", self.tag(layer.parent))
        try:
            mount = Path(self.buildah("mount", container))
            if layer.parent is None:
                self._debootstrap(layer, mount)
            else:
                self._install(layer, container, mount)
            self._configure(layer, container)
            self.buildah("commit", "--format", "oci", "--quiet", container, tag)
        finally:
            self.buildah("rm", container, check=False)
        self._prune(name, keep=tag)
        self.log(f"layer {name} built in {time.monotonic() - started:.0f} s")

    def _debootstrap(self, layer: Layer, mount: Path) -> None:
        require_tools("mmdebstrap")
        home = self._lists_home()
        home.mkdir(parents=True, exist_ok=True)
        lists = Path(tempfile.mkdtemp(prefix=".mmdebstrap-", dir=home))
        try:
            self._mmdebstrap(layer, mount, lists)
            with self._lists_lock:
                self._keep_lists(lists, self._sources_key(mount))
        finally:
            shutil.rmtree(lists, ignore_errors=True)

    def _mmdebstrap(self, layer: Layer, mount: Path, lists: Path) -> None:
        cmd = [
            "mmdebstrap",
            "--variant=apt",
            "--mode=root",
            f"--architectures={self.arch}",
            "--aptopt=APT::Install-Recommends false",
            # testing and unstable Release files expire within a week (Valid-Until); a mirror that
            # serves an older one (a frozen copy, as ours was measured 2026-11: sid's expired 20 days
            # before) would stop every build. Signatures are still checked, and the Slurm packages
            # are pinned to exact versions (pins/), so an old index cannot swap them.
            '--aptopt=Acquire::Check-Valid-Until "false"',
            *(f"--dpkgopt=path-exclude={p}" for p in EXCLUDED),
            # No fsync per unpacked file (a root being built is thrown away if the build fails).
            # The option stays in /etc/dpkg/dpkg.cfg.d, so the layers above install the same way,
            # as Debian's official container images do.
            "--dpkgopt=force-unsafe-io",
            # The package lists mmdebstrap fetched serve the layers above (_apt_lists), then go.
            f"--customize-hook=sync-out /var/lib/apt/lists {lists}",
            "--customize-hook=rm -rf $1/var/lib/apt/lists/* $1/var/cache/apt/* $1/var/log/apt/* $1/var/log/dpkg.log",
        ]
        if layer.packages:
            cmd.append(f"--include={','.join(layer.packages)}")
        suite = self.release.suite
        done = subprocess.run([*cmd, suite, str(mount), self.mirror], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = [line for line in done.stderr.splitlines() if line.startswith("E:")][
                -3:
            ] or done.stderr.splitlines()[-3:]
            raise BuildError(f"mmdebstrap {suite} from {self.mirror} failed: " + " | ".join(tail))

    # -- Debian package lists, fetched once per family and sources ---------------------------
    def _lists_home(self) -> Path:
        return self.cache / "apt" / self._prefix

    def _sources_key(self, mount: Path) -> str:
        """Which package lists a root needs: its mirror and apt sources (slurmd adds contrib)."""
        h = hashlib.sha256(self.mirror.encode())
        sources = mount / "etc" / "apt"
        for path in [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*"))]:
            if path.is_file():
                h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
        return h.hexdigest()[:16]

    def _keep_lists(self, lists: Path, key: str) -> None:
        """Keeps a copy of `lists` (a root's /var/lib/apt/lists, just fetched) for the next layers."""
        home = self._lists_home()
        work = Path(tempfile.mkdtemp(prefix=".lists-", dir=home))
        try:
            shutil.copytree(lists, work / "lists", ignore=shutil.ignore_patterns("lock", "partial"))
            target = home / key
            if target.exists():
                target.rename(work / "old")
            (work / "lists").rename(target)
            os.utime(target)  # fetched now (copytree gave it the source's time)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def _apt_lists(self, container: str, mount: Path) -> None:
        """Package lists in the container for apt: an earlier layer's of the same sources when
        fetched less than LISTS_MAX_AGE ago, else `apt-get update` (on a copy of the family's
        lists, so unchanged indexes are not downloaded again), kept for the next layers."""
        key = self._sources_key(mount)
        with self._lists_lock:
            home = self._lists_home()
            target = home / key
            kept = (
                sorted(p for p in home.glob("*") if p.is_dir() and not p.name.startswith(".")) if home.is_dir() else []
            )
            seed = target if target.is_dir() else (kept[0] if kept else None)
            if seed is not None:
                shutil.copytree(seed, mount / "var" / "lib" / "apt" / "lists", dirs_exist_ok=True)
            if seed is target and time.time() - target.stat().st_mtime < LISTS_MAX_AGE:
                return
            self._run(
                container, "apt-get -q update >/dev/null", f"apt-get update ({self.release.suite}, {self.mirror})"
            )
            self._keep_lists(mount / "var" / "lib" / "apt" / "lists", key)

    def _run(self, container: str, script: str, what: str) -> None:
        # -e: the first failing command stops the step (and so the build).
        argv = self._argv("run", "--isolation", "chroot", container, "--", "/bin/sh", "-euc", script)
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()][-4:]
            raise BuildError(f"{what} failed ({done.returncode}): " + " | ".join(tail))

    def _install(self, layer: Layer, container: str, mount: Path) -> None:
        if layer.pre_install:
            self._run(container, layer.pre_install, f"{layer.name}/pre-install.sh")
        # pip runs on the host (for the image's Python), so its downloads and the sunk wheel's
        # build go on beside apt's; what it installs is moved into the image once apt is done.
        with contextlib.ExitStack() as stack:
            stage = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=".pip-", dir=self.cache)))
            side = stack.enter_context(ThreadPoolExecutor(max_workers=1))
            wheels = side.submit(self._python_packages, layer, stage) if layer.name in ("python", "runtime") else None
            self._apt_install(layer, container, mount)
            for path, mode, content in layer.files:
                target = mount / path.lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
                target.chmod(mode)
            if wheels is not None:
                wheels.result()
                move_into(stage, mount / self.site_packages.lstrip("/"))
        if layer.name in ("python", "runtime"):
            # Bytecode at build time: the processes start faster and never write into the image.
            self._run(container, f"python3 -m compileall -q {self.site_packages} >/dev/null", "compileall")
        if layer.post_install:
            self._run(container, layer.post_install, f"{layer.name}/post-install.sh")

    def _python_packages(self, layer: Layer, target: Path) -> None:
        """What pip installs into the layer's site-packages, into `target`: the python layer's
        pinned dependencies, the runtime layer's sunk wheel."""
        if layer.name == "python":
            self._pip(target, ["-r", str(layer.folder / "requirements.txt")], constraints=_lock_file())
        else:
            self._install_sunk(target)

    def _apt_install(self, layer: Layer, container: str, mount: Path) -> None:
        if layer.packages:
            self._apt_lists(container, mount)
            if layer.pins and (missing := self._missing_pins(layer, container)):
                self._use_verified_copy(layer, missing, container, mount)
            self._run(
                container,
                "export DEBIAN_FRONTEND=noninteractive\n"
                f"apt-get install -y -q --no-install-recommends {' '.join(layer.install)} >/dev/null\n",
                f"apt-get install {' '.join(layer.install)} ({self.release.suite}, {self.mirror})",
            )
            if layer.pins:
                # What apt just downloaded of the recorded packages is kept, verified, for the day
                # the archive drops them (runtime/images/debs.py).
                debs.harvest(
                    mount / "var/cache/apt/archives",
                    debs.read_record(self.release.version, self.arch),
                    debs.cache_folder(self.cache, self.release.version, self.arch),
                )
            for leftover in ("var/lib/apt/lists", "var/cache/apt", "var/log/apt", debs.LOCAL_REPO.lstrip("/")):
                shutil.rmtree(mount / leftover, ignore_errors=True)
            for leftover in ("var/log/dpkg.log", debs.LOCAL_SOURCE.lstrip("/")):
                (mount / leftover).unlink(missing_ok=True)

    pool = True
    """Whether a package missing from the archive's index may be fetched from the mirror's pool
    (verified like any copy); a test turns it off to prove the copy on disk alone."""

    def _missing_pins(self, layer: Layer, container: str) -> list[recipe.MissingPin]:
        """Every pinned package and version the mirror's index no longer has, found before apt
        would install anything (apt-get names only the first, and not what is there instead)."""
        script = recipe.pin_check_script(layer.pins)
        argv = self._argv("run", "--isolation", "chroot", container, "--", "/bin/sh", "-euc", script)
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()][-4:]
            raise BuildError(f"apt-cache ({self.release.suite}, {self.mirror}) failed: " + " | ".join(tail))
        return recipe.missing_pins(done.stdout)

    def _use_verified_copy(self, layer: Layer, missing: list[recipe.MissingPin], container: str, mount: Path) -> None:
        """Makes the pinned versions the archive lost installable from their verified copy: a
        flat apt repository in the layer (removed after the install) of the recorded files, each
        checked against the SHA256 the archive's index gave when the pins were recorded."""
        version, arch = self.release.version, self.arch
        record = debs.read_record(version, arch)
        lost = recipe.missing_pins_message(missing, self.release, self.mirror).split(". ", 1)[0]
        unrecorded = [f"{m.package} {m.version}" for m in missing if record.get(m.package, None) is None
                      or record[m.package].version != m.version]  # fmt: skip
        if unrecorded:
            raise BuildError(
                f"{lost}; no verified copy either: {debs.record_path(version, arch)} does not record "
                f"{', '.join(unrecorded)} (docs/slurm-releases.md)"
            )
        pins = {p: v for p, v in layer.pins if p in record and record[p].version == v}
        needed = debs.closure(pins, record.values())
        places = debs.folders(self.cache, version, arch)
        try:
            files = debs.locate(needed, places, self.mirror if self.pool else None, places[-1])
        except debs.CopyError as e:
            raise BuildError(f"{lost}; {e}") from None
        debs.local_repo(needed, files, mount / debs.LOCAL_REPO.lstrip("/"))
        (mount / debs.LOCAL_SOURCE.lstrip("/")).write_text(debs.source_line())
        where = sorted({str(path.parent) for path in files.values()})
        self.log(
            f"{lost}: layer {layer.name} installs {len(needed)} package(s) from the verified copy in {', '.join(where)}"
        )
        self._run(
            container,
            f"apt-get -q update -o Dir::Etc::SourceList={debs.LOCAL_SOURCE} -o Dir::Etc::SourceParts=- "
            "-o APT::Get::List-Cleanup=false >/dev/null",
            f"apt-get update (the verified copy in {debs.LOCAL_REPO})",
        )

    def _pip(self, target: Path, args: list[str], *, constraints: Path | None = None, binary: bool = True) -> None:
        """pip install into `target`, a site-packages folder for the image's Python."""
        machine = "aarch64" if self.arch == "arm64" else "x86_64"
        python = self.release.python
        cmd = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile"]
        cmd += ["--target", str(target)]
        if binary:
            cmd += ["--only-binary=:all:", "--python-version", python, "--implementation", "cp"]
            cmd += ["--abi", f"cp{python.replace('.', '')}", "--abi", "abi3", "--abi", "none"]
            for tag in ("manylinux2014", "manylinux_2_17", "manylinux_2_28", "manylinux_2_34", "manylinux_2_39"):
                cmd += ["--platform", f"{tag}_{machine}"]
        if constraints is not None:
            cmd += ["-c", str(constraints)]
        env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
        done = subprocess.run([*cmd, *args], capture_output=True, text=True, check=False, env=env)
        if done.returncode != 0:
            tail = [line for line in done.stderr.splitlines() if line.strip()][-3:]
            raise BuildError("pip install into the image failed: " + " | ".join(tail))

    def _install_sunk(self, target: Path) -> None:
        """The sunk package alone into `target` (its dependencies are the python layer's)."""
        top = _source_root()
        if top is None:
            shutil.copytree(
                Path(sunk.__file__).resolve().parent, target / "sunk", ignore=shutil.ignore_patterns("__pycache__")
            )
            return
        with tempfile.TemporaryDirectory(prefix="sunk-wheel-") as tmp:
            env = {**os.environ, "PIP_CONFIG_FILE": os.devnull}
            cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp, str(top)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
            if done.returncode != 0:
                raise BuildError("building the sunk wheel failed: " + done.stderr.strip().splitlines()[-1])
            wheel = next(Path(tmp).glob("sunk-*.whl"))
            self._pip(target, ["--no-deps", str(wheel)], binary=False)
        # pip writes a bin/ with the console script into the target; the image runs python -m.
        shutil.rmtree(target / "bin", ignore_errors=True)
        # Build leftovers in the checkout (setuptools' build/ and egg-info) are not ours to keep.
        shutil.rmtree(top / "build", ignore_errors=True)

    def _configure(self, layer: Layer, container: str) -> None:
        role = layer.role
        labels = {
            "org.opencontainers.image.source": SOURCE_URL,
            "org.opencontainers.image.title": f"sunk {layer.name}",
            "org.opencontainers.image.revision": _revision(),
            "dev.sunk.inputs": self.digest(layer.name),
        }
        args = ["config", "--arch", self.arch, "--os", "linux"]
        if role is not None:
            labels["org.opencontainers.image.version"] = tag_for(role, self.arch, release=self.release.version)
            labels["org.opencontainers.image.description"] = role.description
            args += ["--user", role.user, "--workingdir", role.workdir]
            args += ["--cmd", json.dumps(list(role.cmd))]
            args += ["--entrypoint", json.dumps(list(role.entrypoint))]
            for env in role.env:
                args += ["--env", env]
        for key, value in labels.items():
            args += ["--label", f"{key}={value}"]
        self.buildah(*args, container)

    def _stamp(self, tag: str) -> Path:
        """When a layer's build was last used (`<cache>/used/<layer>-<arch>-<hash>`)."""
        repo, _, version = tag.rpartition(":")
        return self.cache / "used" / f"{repo.rsplit('/', 1)[-1]}-{version}"

    def _prune(self, name: str, keep: str) -> None:
        """Older builds of this layer unused for KEEP_UNUSED_SECONDS: their storage (vfs keeps
        whole copies) is reclaimed."""
        repo = keep.rsplit(":", 1)[0]
        listing = self.buildah("images", "--format", "{{.Name}}:{{.Tag}}", check=False)
        for line in listing.splitlines():
            if line.startswith(f"{repo}:{self._prefix}-") and line != keep and _unused(self._stamp(line)):
                self.buildah("rmi", line, check=False)
                self._stamp(line).unlink(missing_ok=True)

    # -- roles ------------------------------------------------------------------------------
    def archive_path(self, layer: str) -> Path:
        return self.images / f"{layer.replace('+', '-')}-{self._prefix}-{self.digest(layer)}.oci.tar"

    def build(self, role: str, variant: str | None = None) -> Built:
        """The role's image as an oci-archive (built, or from the cache)."""
        return self.build_many([role], variant)[0]

    def build_many(
        self, roles: Sequence[str], variant: str | None = None, *, unpack: bool = False, archives: bool = True
    ) -> list[Built]:
        """Each role's image as an oci-archive (built, or from the cache), in the order asked;
        with `unpack`, each also unpacked as rootfs() does (a variant's image is not); without
        `archives`, no oci-archive is written (Built.archive is where it would go).

        The layers they need (across image families: mariadb's Debian base builds beside the
        Slurm one) are built in parallel, each as soon as its parent exists, PARALLEL at a time."""
        roots = unpack and variant is None
        archives = archives or not roots  # a variant's image is only ever an archive
        try:
            cache.budget_bytes()  # a bad bound is refused before anything is built
        except cache.CacheError as err:
            raise BuildError(str(err)) from None
        targets: list[tuple[Builder, str, str]] = []
        for role in roles:
            if role not in ROLES:
                raise BuildError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
            layer = role
            if variant is not None:
                if role not in recipe.VARIANTS.get(variant, ()):
                    raise BuildError(
                        f"--with {variant} applies to {', '.join(recipe.VARIANTS.get(variant, ()))}, not {role}"
                    )
                layer = f"{role}+{variant}"
            targets.append((self._family(role), role, layer))
        if variant is not None:
            probe_sources(variant)
        started = time.monotonic()
        nodes: dict[tuple[str, str], Builder] = {}
        for family, _role, layer in targets:
            for name in recipe.chain(layer):  # base first: a parent is always listed before its child
                nodes[(family.release.version, name)] = family
        for (_version, name), family in nodes.items():  # hashes and stamps here, not in the threads
            _used(family._stamp(family.tag(name)))
        gate = threading.Semaphore(PARALLEL)
        layers: dict[tuple[str, str], Future[bool]] = {}

        def make(key: tuple[str, str]) -> bool:
            """Whether this layer or one below it was built now."""
            family, name = nodes[key], key[1]
            parent = recipe.parent_of(name)
            below = layers[(key[0], parent)].result() if parent is not None else False
            if family._has_image(family.tag(name)):
                return below
            with gate:
                family._build_layer(name)
            return True

        def finish(family: Builder, role: str, layer: str) -> Built:
            new = layers[(family.release.version, layer)].result()
            with gate:
                if roots:
                    new = not family.unpacked(role).is_dir() or new
                    family._unpack(role)
                return family._archive(role, layer, variant, started, write=archives, new=new)

        with self._locked():
            with ThreadPoolExecutor(max_workers=len(nodes) + len(targets)) as pool:
                for key in nodes:
                    layers[key] = pool.submit(make, key)
                done = [pool.submit(finish, *target) for target in targets]
                built = [future.result() for future in done]
            if any(b.seconds for b in built):
                self._bound_cache()
        return built

    def prune(self, *, keep_seconds: float, budget: int | None, dry_run: bool = False) -> tuple[Plan, list[str]]:
        """Deletes the cache's builds prune.plan picks (none with dry_run); returns the plan and
        what could not be deleted."""
        with self._locked():
            plan = cache.make_plan(self, self.current_keys(), keep_seconds=keep_seconds, budget=budget)
            failed = [] if dry_run else [f for b in plan.delete for f in cache.delete(self, b)]
        return plan, failed

    def _bound_cache(self) -> None:
        """After a build added to the cache (lock held): stale builds go, and past the byte budget
        (SUNK_IMAGE_CACHE_GIB) the least recently used others too."""
        try:
            budget = cache.budget_bytes()
        except cache.CacheError as err:
            raise BuildError(str(err)) from None
        plan = cache.make_plan(self, self.current_keys(), keep_seconds=KEEP_UNUSED_SECONDS, budget=budget)
        for build in plan.delete:
            cache.delete(self, build)
        if plan.delete:
            self.log(f"image cache: removed {len(plan.delete)} unused build(s), {plan.freed / 2**30:.1f} GiB")
        left = plan.total - plan.freed
        if budget is not None and left > budget:
            self.log(
                f"image cache: {left / 2**30:.1f} GiB, over its {budget / 2**30:.0f} GiB bound ({cache.BUDGET_ENV}) "
                "with builds that are current, in use or just made: see `sunk images prune --dry-run`"
            )

    def _archive(
        self, role: str, layer: str, variant: str | None, started: float, *, write: bool = True, new: bool = False
    ) -> Built:
        """The role's oci-archive from its built layer (pushed once; not at all without `write`),
        with its size; `new`: something of this image was made by this call."""
        tag = self.tag(layer)
        ref = reference(role, arch=self.arch, variant=variant, release=self.release.version)
        archive = self.archive_path(layer)
        fresh = write and not archive.is_file()
        if fresh:
            partial = archive.with_suffix(f".{os.getpid()}.partial")
            try:
                self.buildah("push", "--quiet", tag, f"oci-archive:{partial}:{ref}")
                partial.rename(archive)
            finally:
                partial.unlink(missing_ok=True)
            pattern = f"{layer.replace('+', '-')}-{self._prefix}-*.oci.tar"
            for old in reclaimable(self.images.glob(pattern), archive, lambda path: path):
                old.unlink(missing_ok=True)
        if archive.is_file():
            os.utime(archive)  # used now: kept while any checkout uses it
        size = self._size(layer, tag)
        return Built(
            role=role,
            arch=self.arch,
            digest=self.digest(layer),
            tag=tag,
            archive=archive,
            reference=ref,
            size=size,
            seconds=time.monotonic() - started if fresh or new else 0.0,
        )

    def _size(self, layer: str, tag: str) -> int:
        note = self.images / f"{layer.replace('+', '-')}-{self._prefix}-{self.digest(layer)}.size"
        if note.is_file():
            return int(note.read_text())
        container = f"sunk-size-{layer.replace('+', '-')}-{os.getpid()}"
        self.buildah("from", "--name", container, "--pull-never", tag)
        try:
            size = _tree_size(Path(self.buildah("mount", container)))
        finally:
            self.buildah("rm", container, check=False)
        note.write_text(str(size))
        return size

    def unpacked(self, role: str) -> Path:
        """Where rootfs() keeps the role's unpacked root filesystem (it may not exist yet)."""
        if self._family(role) is not self:
            return self._family(role).unpacked(role)
        return self.cache / "rootfs" / f"{role}-{self._prefix}-{self.digest(role)}" / "rootfs"

    def is_built(self, role: str) -> bool:
        """Whether the role's image was built (its layer or its oci-archive is in the cache)."""
        family = self._family(role)
        return family.archive_path(role).is_file() or family._has_image(family.tag(role))

    def rootfs(self, role: str) -> Path:
        """The role's image unpacked: a read-only root filesystem that harness instances and the
        local cluster mount under a private overlay (built first if need be; no oci-archive)."""
        if self._family(role) is not self:
            return self._family(role).rootfs(role)
        target = self.unpacked(role)
        if not target.is_dir():
            self.build_many([role], unpack=True, archives=False)
        _used(target.parent / "used")
        return target

    def _unpack(self, role: str) -> Path:
        """The role's root filesystem from its built layer, unless there (images lock held)."""
        target = self.unpacked(role).parent
        if not (target / "rootfs").is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix=f".{role}-", dir=target.parent))
            try:
                self.write_bundle(role, work / "bundle")
                (work / "bundle").rename(target)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            for old in reclaimable(target.parent.glob(f"{role}-{self._prefix}-*"), target, lambda path: path / "used"):
                shutil.rmtree(old, ignore_errors=True)
        _used(target / "used")
        return target / "rootfs"

    def write_bundle(self, role: str, bundle: Path) -> None:
        """The role's built layer as a bundle: `rootfs` and the `config.json` umoci would write.

        buildah copies the layer into a container (vfs keeps whole roots); the root takes that
        copy's files by hard links and the container goes, so nothing is archived, compressed or
        unpacked on the way. Its size note is written from it too (no other walk of the layer)."""
        tag = self.tag(role)
        container = f"sunk-root-{role}-{self.digest(role)}-{os.getpid()}-{threading.get_ident()}"
        self.buildah("from", "--name", container, "--pull-never", tag)
        try:
            mount = Path(self.buildah("mount", container))
            bundle.mkdir(parents=True)
            root = bundle / "rootfs"
            done = subprocess.run(["cp", "-al", f"{mount}/.", str(root)], capture_output=True, text=True, check=False)
            if done.returncode != 0:  # another filesystem than the build storage's: copy
                shutil.rmtree(root, ignore_errors=True)
                _check(["cp", "-a", f"{mount}/.", str(root)], "copying the image's root")
            root.chmod(0o755)
            image = json.loads(self.buildah("inspect", "--type", "image", tag))["OCIv1"]
            etc = root / "etc"
            texts = [(etc / name).read_text() if (etc / name).is_file() else "" for name in ("passwd", "group")]
            try:
                config = bundle_config.runtime_config(image, *texts)
            except bundle_config.ConfigError as err:
                raise BuildError(f"{role}: {err}") from None
            (bundle / "config.json").write_text(json.dumps(config, indent=1) + "\n")
        finally:
            self.buildah("rm", container, check=False)
        note = self.images / f"{role}-{self._prefix}-{self.digest(role)}.size"
        if not note.is_file():
            self.images.mkdir(parents=True, exist_ok=True)
            note.write_text(str(_tree_size(root)))


def move_into(source: Path, target: Path) -> None:
    """Moves what `source` holds into the folder `target` (made if missing), merging folders that
    are there already."""
    target.mkdir(parents=True, exist_ok=True)
    for child in sorted(source.iterdir()):
        there = target / child.name
        if child.is_dir() and not child.is_symlink() and there.is_dir():
            move_into(child, there)
        else:
            shutil.move(child, there)


def _check(cmd: list[str], what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise BuildError(f"{what} failed: " + " | ".join(done.stderr.strip().splitlines()[-3:]))


def _revision() -> str:
    top = _source_root()
    if top is None or shutil.which("git") is None:
        return "unknown"
    done = subprocess.run(["git", "-C", str(top), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"
