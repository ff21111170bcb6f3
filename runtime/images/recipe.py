"""What goes into each image layer, read from the recipe folders beside this file, and its hash.

A folder runtime/images/<layer>/ holds, all optional but packages.txt:
    packages.txt       Debian packages, one per line (the single source of truth for the layer)
    pre-install.sh     runs in the image (sh, as root) before the packages are installed
    rootfs/            files copied into the image after the install (modes as in the checkout)
    post-install.sh    runs in the image after rootfs/ is copied
The runtime layer also gets the sunk package itself, and the python layer the pinned runtime
dependencies (python/requirements.txt, versions from the project's requirements.lock).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from sunk.images import LAYERS, ROLES, SUITE, Arch, Role

HERE = Path(__file__).resolve().parent
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def mirror() -> str:
    """Where Debian packages come from: SUNK_DEBIAN_MIRROR, else Debian's own (part of every
    layer's hash: a base from another mirror is another base)."""
    return os.environ.get("SUNK_DEBIAN_MIRROR") or DEFAULT_MIRROR


RECIPE = "2"
"""Bump when the build steps in build.py change, so layers built the old way are not reused."""
EXCLUDED = ("/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*", "/usr/share/locale/*")
"""Docs, manuals and translations: nothing in a container reads them (dpkg never unpacks them)."""
PARENTS: dict[str, str | None] = {"base": None, "slurm": "base", "python": "base"}


VARIANTS: dict[str, tuple[str, ...]] = {"pyxis": ("slurmd", "login")}
"""Optional stages on top of a role (`<role>+<variant>`, recipe folder <variant>/)."""


def parent_of(layer: str) -> str | None:
    if "+" in layer:
        return layer.split("+", 1)[0]
    return PARENTS[layer] if layer in PARENTS else ROLES[layer].parent


@dataclass(frozen=True)
class Layer:
    name: str
    parent: str | None
    folder: Path
    packages: tuple[str, ...]
    pre_install: str = ""
    post_install: str = ""
    files: tuple[tuple[str, int, bytes], ...] = field(default=())
    """(path in the image, mode, content) of every file under rootfs/."""

    @property
    def role(self) -> Role | None:
        """The role whose image this layer completes (a variant keeps its role's config)."""
        return ROLES.get(self.name.split("+", 1)[0])


def _text(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


def read_packages(path: Path) -> tuple[str, ...]:
    """One Debian package per line; blank lines and # comments ignored."""
    lines = (line.split("#", 1)[0].strip() for line in _text(path).splitlines())
    return tuple(line for line in lines if line)


def load(name: str, root: Path = HERE) -> Layer:
    folder = root / name.split("+", 1)[-1]
    if not (folder / "packages.txt").is_file():
        raise KeyError(f"no recipe for {name!r}: {folder}/packages.txt is missing")
    files = []
    tree = folder / "rootfs"
    if tree.is_dir():
        for path in sorted(p for p in tree.rglob("*") if p.is_file()):
            target = "/" + path.relative_to(tree).as_posix()
            # Programs are executable even where an install lost the bit (a wheel may).
            mode = 0o755 if "/bin/" in target or "/sbin/" in target else os.stat(path).st_mode & 0o777
            files.append((target, mode, path.read_bytes()))
    return Layer(
        name=name,
        parent=parent_of(name),
        folder=folder,
        packages=read_packages(folder / "packages.txt"),
        pre_install=_text(folder / "pre-install.sh"),
        post_install=_text(folder / "post-install.sh"),
        files=tuple(files),
    )


def chain(name: str) -> list[str]:
    """The layers an image is made of, base first: ['base', 'slurm', 'slurmctld']."""
    out = [name]
    while (parent := parent_of(out[-1])) is not None:
        out.append(parent)
    return out[::-1]


def all_layers() -> tuple[str, ...]:
    return (*LAYERS, *ROLES)


def layer_hash(layer: Layer, parent_hash: str, arch: Arch, extra: str = "", source: str = DEFAULT_MIRROR) -> str:
    """Identity of a layer's content: its parent's hash, what it installs and copies, how it is
    built, the role's OCI config, and `extra` (the sunk source or the Python pins)."""
    h = hashlib.sha256()
    role = layer.role
    head = {
        "recipe": RECIPE,
        "suite": SUITE,
        "mirror": source,
        "arch": arch,
        "parent": parent_hash,
        "packages": sorted(layer.packages),
        "pre": layer.pre_install,
        "post": layer.post_install,
        "role": None if role is None else role.__dict__,
    }
    h.update(json.dumps(head, sort_keys=True).encode())
    for path, mode, content in layer.files:
        h.update(f"\0{path}\0{mode:o}\0".encode())
        h.update(hashlib.sha256(content).digest())
    h.update(extra.encode())
    return h.hexdigest()[:16]
