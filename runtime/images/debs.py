"""A verified copy of a release's pinned Slurm packages, for the day Debian's archive drops them.

The 26.05 images come from Debian sid, pinned to exact versions (pins/<release>.txt). When sid moves
to the next Slurm, the archive's index no longer lists those versions and a fresh machine could not
build the images. So, beside the pins, pins/<release>-<arch>.Packages holds the archive's own index
entries (Debian's Packages stanzas, SHA256 and size included) of every pinned package and of the
Slurm packages they depend on at the same version, recorded from the suite's index as the archive
signed it (`python -m sunk.runtime.images.debs record 26.05 amd64`: InRelease checked with gpgv
against Debian's keys, each Packages.xz against its SHA256 there).

Where a copy is looked for, in this order, each file checked against its recorded SHA256 and size
before use (a file that doesn't match is passed over and named in the error):
  1. the folder SUNK_SLURM_DEBS names (a user's or CI's own copy, flat: the .deb files);
  2. the image cache, ~/.cache/sunk/debs/<release>-<arch>/, filled at every build that installs a
     recorded package from the archive (so a machine that built the images once keeps them);
  3. the mirror's pool (<mirror>/<Filename>): Debian keeps a file there while any suite lists it,
     so testing (forky) still serves 26.05.5 for a while after sid moved on (downloaded into 2.).
A package missing everywhere is an error naming the package, its version and every place looked at.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sunk.images import release_of

from . import recipe

ENV = "SUNK_SLURM_DEBS"
"""A folder of .deb files (flat) the build may install the pinned Slurm packages from."""
LOCAL_REPO = "/var/lib/sunk-verified-debs"
"""Where, inside a layer being built, the verified copy is put for apt (removed after the install)."""
LOCAL_SOURCE = "/etc/apt/sources.list.d/sunk-verified-debs.list"
FETCH_TIMEOUT = 60


class CopyError(RuntimeError):
    """No verified copy of a package the build needs; the message says which and where it looked."""


@dataclass(frozen=True)
class Deb:
    """One package as the archive's index describes it."""

    package: str
    version: str
    arch: str
    sha256: str
    size: int
    filename: str
    """Its path in the archive (pool/main/s/slurm-wlm/slurmd_26.05.5-1_amd64.deb)."""
    depends: tuple[str, ...]
    """The packages it depends on (Pre-Depends and Depends, every alternative), by name."""
    stanza: str
    """The index entry as the archive wrote it."""

    @property
    def basename(self) -> str:
        return self.filename.rsplit("/", 1)[-1]


def _fields(stanza: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    key = ""
    for line in stanza.splitlines():
        if line[:1] in (" ", "\t") and key:
            fields[key] += "\n" + line
        elif ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def _names(relations: str) -> tuple[str, ...]:
    """`libc6 (>= 2.38), a | b:any` -> ('libc6', 'a', 'b')."""
    words = (re.split(r"[\s(:\[<]", alt.strip(), maxsplit=1)[0] for alt in re.split(r"[,|]", relations))
    return tuple(w for w in words if w)


def parse(text: str) -> list[Deb]:
    """The entries of a Packages index (or of a record, which is one)."""
    out = []
    for stanza in re.split(r"\n\s*\n", text.strip()):
        fields = _fields(stanza)
        if "Package" not in fields or "SHA256" not in fields:
            continue
        out.append(
            Deb(
                package=fields["Package"],
                version=fields["Version"],
                arch=fields.get("Architecture", ""),
                sha256=fields["SHA256"],
                size=int(fields["Size"]),
                filename=fields["Filename"],
                depends=_names(fields.get("Pre-Depends", "") + "," + fields.get("Depends", "")),
                stanza=stanza.strip(),
            )
        )
    return out


def _source(deb: Deb) -> str:
    fields = _fields(deb.stanza)
    return fields.get("Source", deb.package).split()[0]


def closure(pins: Mapping[str, str], index: Iterable[Deb]) -> list[Deb]:
    """The pinned packages at their versions, and the packages of the same Slurm source at the same
    version they depend on (libslurm, for one): what an archive that dropped the pinned version
    drops with them. Sorted by name. KeyError names a pinned package the index lacks."""
    versions = set(pins.values())
    slurm = {d.package: d for d in index if d.version in versions and _source(d).startswith("slurm-wlm")}
    missing = [f"{p} {v}" for p, v in sorted(pins.items()) if p not in slurm or slurm[p].version != v]
    if missing:
        raise KeyError(f"the index lacks {', '.join(missing)}")
    found: dict[str, Deb] = {}
    todo = list(pins)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        found[name] = slurm[name]
        todo += [d for d in slurm[name].depends if d in slurm]
    return [found[name] for name in sorted(found)]


def record_path(release: str, arch: str, root: Path = recipe.HERE) -> Path:
    return root / "pins" / release_of(release).debs(arch)


def read_record(release: str, arch: str, root: Path = recipe.HERE) -> dict[str, Deb]:
    """The recorded entries of `release` on `arch`, by package (empty when none is recorded)."""
    path = record_path(release, arch, root)
    text = path.read_text() if path.is_file() else ""
    return {d.package: d for d in parse("\n".join(line for line in text.splitlines() if not line.startswith("#")))}


def record_text(release: str, arch: str, debs: Sequence[Deb]) -> str:
    head = (
        f"# The archive's index entries (Debian {release_of(release).suite}, {arch}) of the Slurm {release} packages\n"
        "# the images install (pins/" + release_of(release).pins + ") and of the Slurm packages they depend on:\n"
        "# what a verified copy is checked against when the archive no longer has them (runtime/images/debs.py).\n"
        f"# Written by `python -m sunk.runtime.images.debs record {release} {arch}` from the suite's signed index.\n"
    )
    return head + "\n\n".join(d.stanza for d in debs) + "\n"


def verified(path: Path, deb: Deb) -> bool:
    """Whether `path` is the file the index describes (size, then SHA256)."""
    if not path.is_file() or path.stat().st_size != deb.size:
        return False
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest() == deb.sha256


def cache_folder(cache: Path, release: str, arch: str) -> Path:
    return cache / "debs" / f"{release}-{arch}"


def folders(cache: Path, release: str, arch: str) -> list[Path]:
    """Where copies are looked for, in order: SUNK_SLURM_DEBS, then the cache's."""
    named = os.environ.get(ENV)
    return [*([Path(named)] if named else []), cache_folder(cache, release, arch)]


def fetch(url: str, target: Path) -> None:
    """Downloads `url` to `target` (through a temporary name: a cut download leaves nothing)."""
    part = target.with_name(target.name + ".part")
    with urllib.request.urlopen(url, timeout=FETCH_TIMEOUT) as reply, part.open("wb") as out:
        shutil.copyfileobj(reply, out)
    part.rename(target)


def locate(needed: Sequence[Deb], places: Sequence[Path], mirror: str | None, cache: Path) -> dict[str, Path]:
    """A verified file for each of `needed`: from `places` in order, else downloaded from the
    mirror's pool into `cache` (when `mirror` is given). CopyError names each one found nowhere,
    and what was wrong where."""
    found: dict[str, Path] = {}
    missing = []
    for deb in needed:
        notes = []
        for place in places:
            path = place / deb.basename
            if verified(path, deb):
                found[deb.package] = path
                break
            notes.append(f"{path}: {'not the recorded file (SHA256 or size differ)' if path.exists() else 'absent'}")
        else:
            if mirror is not None:
                url = f"{mirror.rstrip('/')}/{deb.filename}"
                cache.mkdir(parents=True, exist_ok=True)
                try:
                    fetch(url, cache / deb.basename)
                except OSError as e:
                    notes.append(f"{url}: {getattr(e, 'reason', e)}")
                else:
                    if verified(cache / deb.basename, deb):
                        found[deb.package] = cache / deb.basename
                        continue
                    (cache / deb.basename).unlink()
                    notes.append(f"{url}: not the recorded file (SHA256 or size differ)")
            missing.append(f"{deb.package} {deb.version} ({'; '.join(notes)})")
    if missing:
        raise CopyError("no verified copy of " + "; ".join(missing))
    return found


def harvest(archives: Path, record: Mapping[str, Deb], cache: Path) -> list[str]:
    """Keeps a copy in `cache` of each recorded package apt just downloaded into `archives` (a
    root's /var/cache/apt/archives), once verified; returns their names."""
    kept = []
    for deb in record.values():
        path = archives / deb.basename
        target = cache / deb.basename
        if not target.exists() and verified(path, deb):
            cache.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target.with_name(target.name + ".part"))
            target.with_name(target.name + ".part").rename(target)
            kept.append(deb.package)
    return kept


def local_repo(debs: Sequence[Deb], files: Mapping[str, Path], target: Path) -> None:
    """An apt repository (flat) in `target` of the verified files: their recorded entries, each
    Filename pointing at the copy beside it, so apt checks the SHA256 once more as it installs."""
    target.mkdir(parents=True, exist_ok=True)
    stanzas = []
    for deb in debs:
        shutil.copyfile(files[deb.package], target / deb.basename)
        stanzas.append(re.sub(r"^Filename: .*$", f"Filename: ./{deb.basename}", deb.stanza, flags=re.M))
    (target / "Packages").write_text("\n\n".join(stanzas) + "\n")


def source_line() -> str:
    """The apt source of the local repository (its index is the recorded one: trusted as such)."""
    return f"deb [trusted=yes] file:{LOCAL_REPO} ./\n"


KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
"""Debian's archive keys (package debian-archive-keyring), which sign each suite's InRelease."""
COMPONENTS = ("main", "contrib")


def signed_index(mirror: str, suite: str, arch: str, work: Path, keyring: Path = KEYRING) -> list[Deb]:
    """The suite's Packages entries on `arch` (main and contrib), as the archive signed them: its
    InRelease checked with gpgv against Debian's keys, each Packages.xz against the SHA256 the
    InRelease gives it. CopyError names what failed."""
    base = f"{mirror.rstrip('/')}/dists/{suite}"
    fetch(f"{base}/InRelease", work / "InRelease")
    done = subprocess.run(["gpgv", "--keyring", str(keyring), str(work / "InRelease")], capture_output=True, text=True)
    if done.returncode != 0:
        raise CopyError(f"{base}/InRelease: no good signature by {keyring}: {done.stderr.strip().splitlines()[-1:]}")
    release = work / "InRelease"
    sums = dict(
        (m.group(3), (m.group(1), int(m.group(2))))
        for m in re.finditer(r"^ ([0-9a-f]{64}) +(\d+) (\S+)$", release.read_text(), re.M)
    )
    out = []
    for component in COMPONENTS:
        name = f"{component}/binary-{arch}/Packages.xz"
        if name not in sums:
            continue
        target = work / name.replace("/", "_")
        fetch(f"{base}/{name}", target)
        if hashlib.sha256(target.read_bytes()).hexdigest() != sums[name][0]:
            raise CopyError(f"{base}/{name}: not the file {base}/InRelease names (SHA256 differs)")
        out += parse(lzma.decompress(target.read_bytes()).decode())
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """`record RELEASE [ARCH]`: writes pins/<release>-<arch>.Packages from the release's suite as
    the mirror serves it now (SUNK_DEBIAN_MIRROR, else Debian's), signature and hashes checked."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (2, 3) or args[0] != "record":
        print("usage: python -m sunk.runtime.images.debs record RELEASE [ARCH]", file=sys.stderr)
        return 2
    release, arch = args[1], (args[2] if len(args) == 3 else "amd64")
    suite = release_of(release).suite
    with tempfile.TemporaryDirectory() as work:
        try:
            index = signed_index(recipe.mirror(), suite, arch, Path(work))
            pins = recipe.read_pins(release)
            # A pin the architecture has no build of (slurm-wlm-nvml-plugin on arm64: NVIDIA's
            # library is amd64-only in Debian) is one its images can't install either.
            have = {(d.package, d.version) for d in index}
            absent = sorted(p for p, v in pins.items() if (p, v) not in have)
            debs = closure({p: v for p, v in pins.items() if p not in absent}, index)
        except (CopyError, KeyError, OSError) as e:
            print(f"record {release} {arch}: {e}", file=sys.stderr)
            return 1
    path = record_path(release, arch)
    path.write_text(record_text(release, arch, debs))
    print(f"wrote {path}" + (f" (no {arch} build of {', '.join(absent)})" if absent else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
