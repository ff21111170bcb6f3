"""Images for the local cluster's pods: the ones `sunk images build` made, found by reference.

A pod's image reference names a sunk role by its repository's last part and tag
(`<any registry>/slurmctld:<its tag>`, the tag naming the Slurm release: `26.05.5`, `24.11.5`), so
a stack's `images.registry` changes nothing here. An
image that was never built is not built on the fly: the pod waits with ErrImagePull naming it and
the command that builds it, as a node waits for a registry. A reference to anything else (a user's
own sidecar image) gets the same status: nothing is pulled from a registry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sunk.images import PYXIS_VARIANT, ROLES, SUPPORTED_SLURM, tag_for

from ..images.build import Builder
from .container import Image


class ImageMissing(Exception):
    """The reference names no image built here (ErrImagePull's message)."""


@dataclass(frozen=True)
class Unpacked:
    rootfs: Path
    image: Image


def image_of(reference: str) -> tuple[str, str] | None:
    """The sunk role and Slurm release a reference names, whatever the registry; None for any
    other image (the mariadb image is one for every release: the first is given)."""
    name, _, tag = reference.rpartition("/")[2].partition(":")
    for release in SUPPORTED_SLURM:
        for role in ROLES.values():
            tags = (tag_for(role, release=release), tag_for(role, variant=PYXIS_VARIANT, release=release))
            if role.image == name and tag in tags:
                return role.name, release
    return None


def role_of(reference: str) -> str | None:
    """The sunk role a reference names, whatever the registry; None for any other image."""
    found = image_of(reference)
    return found[0] if found else None


def _ids(rootfs: Path) -> tuple[dict[int, int], dict[int, tuple[int, ...]]]:
    primary: dict[int, int] = {}
    names: dict[str, int] = {}
    for line in (rootfs / "etc/passwd").read_text().splitlines():
        fields = line.split(":")
        if len(fields) > 3:
            primary[int(fields[2])] = int(fields[3])
            names[fields[0]] = int(fields[2])
    groups: dict[int, list[int]] = {}
    group_file = rootfs / "etc/group"
    for line in group_file.read_text().splitlines() if group_file.is_file() else []:
        fields = line.split(":")
        if len(fields) > 3:
            for member in filter(None, fields[3].split(",")):
                if member in names:
                    groups.setdefault(names[member], []).append(int(fields[2]))
    return primary, {uid: tuple(gids) for uid, gids in groups.items()}


class Images:
    """Resolves references to unpacked root filesystems (cached per role for the cluster's life)."""

    def __init__(self, builder: Builder | None = None) -> None:
        self._builders = {builder.release.version: builder} if builder is not None else {}
        self._found: dict[tuple[str, str], Unpacked] = {}

    def builder(self, release: str) -> Builder:
        if release not in self._builders:
            self._builders[release] = Builder(release=release)
        return self._builders[release]

    def resolve(self, reference: str) -> Unpacked:
        """Blocking (an unpack takes seconds): call from a worker thread."""
        found = image_of(reference)
        if found is None:
            raise ImageMissing(
                f'Failed to pull image "{reference}": the local cluster runs only images that '
                f"`sunk images build` makes ({', '.join(ROLES)})"
            )
        if found in self._found:
            return self._found[found]
        role, release = found
        builder = self.builder(release)
        unpacked = builder.unpacked(role)
        if unpacked.is_dir():  # without the builder's lock, which a build elsewhere may hold for minutes
            rootfs = unpacked
        elif builder.is_built(role):
            rootfs = builder.rootfs(role)
        else:
            raise ImageMissing(
                f'Failed to pull image "{reference}": not built on this machine; '
                f"run `sunk images build {role} --slurm {release}`"
            )
        config = json.loads((rootfs.parent / "config.json").read_text())
        process = config.get("process") or {}
        env = dict(item.split("=", 1) for item in process.get("env") or [])
        primary, groups = _ids(rootfs)
        spec = ROLES[role]
        image = Image(
            entrypoint=spec.entrypoint,
            cmd=spec.cmd,
            env=env,
            uid=int((process.get("user") or {}).get("uid", 0)),
            gid=int((process.get("user") or {}).get("gid", 0)),
            workdir=process.get("cwd") or spec.workdir,
            groups=groups,
            primary=primary,
        )
        self._found[found] = Unpacked(rootfs, image)
        return self._found[found]
