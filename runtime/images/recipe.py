"""What goes into each image layer, read from the recipe folders beside this file, and its hash.

A folder runtime/images/<layer>/ holds, all optional but packages.txt:
    packages.txt       Debian packages, one per line (the single source of truth for the layer)
    pre-install.sh     runs in the image (sh, as root) before the packages are installed
    rootfs/            files copied into the image after the install (modes as in the checkout)
    post-install.sh    runs in the image after rootfs/ is copied
The runtime layer also gets the sunk package itself, and the python layer the pinned runtime
dependencies (python/requirements.txt, versions from the project's requirements.lock).

Each supported Slurm release is one image family from one Debian suite (sunk.images.RELEASES);
pins/<release>.txt holds the exact Debian version of every Slurm package the family installs.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from sunk.images import LAYERS, ROLES, STABLE_RELEASE, Arch, Release, Role, release_of

HERE = Path(__file__).resolve().parent
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def mirror() -> str:
    """Where Debian packages come from: SUNK_DEBIAN_MIRROR, else Debian's own (part of every
    layer's hash: a base from another mirror is another base)."""
    return os.environ.get("SUNK_DEBIAN_MIRROR") or DEFAULT_MIRROR


RECIPE = "5"
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
    pins: tuple[tuple[str, str], ...] = ()
    """(package, exact Debian version) of the listed packages the release pins."""

    @property
    def install(self) -> tuple[str, ...]:
        """apt-get install's arguments: `name=version` where pinned, else the name."""
        pinned = dict(self.pins)
        return tuple(f"{p}={pinned[p]}" if p in pinned else p for p in self.packages)

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


def read_pins(release: str, root: Path = HERE) -> dict[str, str]:
    """pins/<release>.txt (the release row's `pins`): `package version` per line; blank lines and
    # comments ignored."""
    pins = {}
    for line in read_packages(root / "pins" / release_of(release).pins):
        package, _, version = line.partition(" ")
        pins[package] = version.strip()
    return pins


def family(name: str, release: str) -> str:
    """The release whose suite builds `name`: the image's own, but the Slurm-free mariadb image
    (one image for every release) comes from Debian stable."""
    return STABLE_RELEASE if name.split("+", 1)[0] == "mariadb" else release


def load(name: str, root: Path = HERE, release: str | None = None) -> Layer:
    """The layer's recipe; with `release`, its pinned package versions too."""
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
    packages = read_packages(folder / "packages.txt")
    pinned = read_pins(release, root) if release is not None else {}
    return Layer(
        name=name,
        parent=parent_of(name),
        folder=folder,
        packages=packages,
        pins=tuple((p, pinned[p]) for p in packages if p in pinned),
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


def layer_hash(
    layer: Layer,
    parent_hash: str,
    arch: Arch,
    extra: str = "",
    source: str = DEFAULT_MIRROR,
    release: Release | None = None,
) -> str:
    """Identity of a layer's content: its parent's hash, the suite and pinned versions it installs,
    what it copies, how it is built, the role's OCI config, and `extra` (the sunk source or the
    Python pins)."""
    h = hashlib.sha256()
    role = layer.role
    release = release or release_of()
    head = {
        "recipe": RECIPE,
        "suite": release.suite,
        "release": release.version,
        "pins": sorted(layer.pins),
        "mirror": source,
        "arch": arch,
        "parent": parent_hash,
        "packages": sorted(layer.packages),
        "pre": layer.pre_install,
        "post": layer.post_install,
        "role": None
        if role is None
        else {**role.__dict__, "tag": role.tag.format(slurm=release.slurm, release=release.version)},
    }
    h.update(json.dumps(head, sort_keys=True).encode())
    for path, mode, content in layer.files:
        h.update(f"\0{path}\0{mode:o}\0".encode())
        h.update(hashlib.sha256(content).digest())
    h.update(extra.encode())
    return h.hexdigest()[:16]


MISSING = "sunk-missing-pin"
"""The marker line the pin check prints for each pinned version the mirror lacks."""


def pin_check_script(pins: tuple[tuple[str, str], ...]) -> str:
    """A shell script, run after `apt-get update` in the image being built, that prints
    `sunk-missing-pin <package> <version> <versions the mirror has...>` for each pin apt can't
    install. apt-get's own refusal names one package and not what the mirror has instead."""
    lines = []
    for package, version in pins:
        lines.append(
            f"have=$(apt-cache madison {package} | awk -F'|' '{{gsub(/ /, \"\", $2); print $2}}' | sort -u | tr '\\n' ' ')\n"
            f'case " $have" in *" {version} "*) ;; *) echo "{MISSING} {package} {version} $have" ;; esac'
        )
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class MissingPin:
    package: str
    version: str
    available: tuple[str, ...]
    """What the mirror's suite has instead (empty: the package is gone)."""


def missing_pins(output: str) -> list[MissingPin]:
    """The pins pin_check_script found missing, from its output."""
    found = []
    for line in output.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == MISSING:
            found.append(MissingPin(words[1], words[2], tuple(words[3:])))
    return found


def missing_pins_message(missing: list[MissingPin], release: Release, source: str) -> str:
    """One line naming every missing package and version, what the mirror has, and what to do."""
    parts = [
        f"{m.package} {m.version} (it has {', '.join(m.available)})"
        if m.available
        else f"{m.package} {m.version} (it has none)"
        for m in missing
    ]
    return (
        f"Slurm {release.version} images: Debian {release.suite} at {source} no longer has "
        + "; ".join(parts)
        + f". Images of {release.version} already built stay in the image cache and are used as they are; "
        f"building them anew needs a mirror that still has these versions (SUNK_DEBIAN_MIRROR), or a "
        f"move to a release sunk supports from what the mirror has now"
    )
