"""Images for the local cluster's pods: the ones `sunk images build` made, found by reference.

A pod's image reference names a sunk role by its repository's last part and tag
(`<any registry>/slurmctld:<its tag>`), so a stack's `images.registry` changes nothing here. An
image that was never built is not built on the fly: the pod waits with ErrImagePull naming it and
the command that builds it, as a node waits for a registry. A reference to anything else (a user's
own sidecar image) gets the same status: nothing is pulled from a registry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from sunk.images import PYXIS_VARIANT, ROLES, tag_for

from ..images.build import Builder
from .container import Image


class ImageMissing(Exception):
    """The reference names no image built here (ErrImagePull's message)."""


@dataclass(frozen=True)
class Unpacked:
    rootfs: Path
    image: Image


def role_of(reference: str) -> str | None:
    """The sunk role a reference names, whatever the registry; None for any other image."""
    name, _, tag = reference.rpartition("/")[2].partition(":")
    for role in ROLES.values():
        if role.image == name and tag in (tag_for(role), tag_for(role, variant=PYXIS_VARIANT)):
            return role.name
    return None


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
        self._builder = builder
        self._found: dict[str, Unpacked] = {}

    @property
    def builder(self) -> Builder:
        if self._builder is None:
            self._builder = Builder()
        return self._builder

    def resolve(self, reference: str) -> Unpacked:
        """Blocking (an unpack takes seconds): call from a worker thread."""
        role = role_of(reference)
        if role is None:
            raise ImageMissing(
                f'Failed to pull image "{reference}": the local cluster runs only images that '
                f"`sunk images build` makes ({', '.join(ROLES)})"
            )
        if role in self._found:
            return self._found[role]
        builder = self.builder
        unpacked = builder.cache / "rootfs" / f"{role}-{builder.arch}-{builder.digest(role)}" / "rootfs"
        if unpacked.is_dir():  # without the builder's lock, which a build elsewhere may hold for minutes
            rootfs = unpacked
        elif builder.archive_path(role).is_file():
            rootfs = builder.rootfs(role)
        else:
            raise ImageMissing(
                f'Failed to pull image "{reference}": not built on this machine; run `sunk images build {role}`'
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
        self._found[role] = Unpacked(rootfs, image)
        return self._found[role]
