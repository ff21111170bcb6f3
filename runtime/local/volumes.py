"""A pod's volumes as host folders, prepared by the node agent before its containers start.

- configMap, secret, projected, downwardAPI: the kubelet's atomic writer layout: the files in a
  timestamped `..<time>` folder, `..data` a link to it, each top-level name a link through
  `..data`. An update writes a new folder and swaps `..data` in one rename, so a reader never sees
  half of it, and a subPath mount (bound to the file itself) keeps the old content, as on a node.
- emptyDir: a folder (0777), or a tmpfs with its sizeLimit for medium Memory, shared by the pod's
  containers.
- persistentVolumeClaim: a folder per claim under the cluster's folder (`pvc_dir`), kept until the
  claim is deleted.
- With the pod's fsGroup, the volume's group becomes fsGroup with group read (and write where
  writable) and setgid folders, as the kubelet's volume ownership does (for a claim only when its
  top folder's group differs, fsGroupChangePolicy OnRootMismatch's behaviour, which is what sunk
  renders).

Not modelled: emptyDir sizeLimit on disk (only the tmpfs one is enforced), volume quotas, CSI,
image volumes, ephemeral volumes, a claim's storage size.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

from .container import File


def write_atomic(folder: Path, files: Mapping[str, File], gid: int | None) -> bool:
    """Write `files` into `folder` the atomic writer's way; False when nothing changed."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / "..data"
    if data.is_symlink():
        current = folder / os.readlink(data)
        if _same(current, files):
            return False
    stamp = folder / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.monotonic_ns() % 10**9}"
    stamp.mkdir()
    for rel, (content, mode) in files.items():
        target = stamp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        _own(target, mode | (0o440 if gid is not None else 0), gid)
    for sub in stamp.rglob("*"):
        if sub.is_dir():
            _own(sub, 0o755 | (0o2000 if gid is not None else 0), gid)
    _own(stamp, 0o755 | (0o2000 if gid is not None else 0), gid)
    old = folder / os.readlink(data) if data.is_symlink() else None
    tmp = folder / "..data_tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(stamp.name)
    tmp.rename(data)
    tops = {Path(rel).parts[0] for rel in files}
    for top in tops:
        link = folder / top
        if not link.is_symlink():
            link.symlink_to(f"..data/{top}")
    for entry in folder.iterdir():
        if entry.is_symlink() and not entry.name.startswith("..") and entry.name not in tops:
            entry.unlink()
    if old is not None and old.is_dir():
        shutil.rmtree(old, ignore_errors=True)
    return True


def _same(current: Path, files: Mapping[str, File]) -> bool:
    if not current.is_dir():
        return False
    present = {str(p.relative_to(current)) for p in current.rglob("*") if p.is_file()}
    if present != set(files):
        return False
    return all((current / rel).read_bytes() == content for rel, (content, _) in files.items())


def _own(path: Path, mode: int, gid: int | None) -> None:
    if gid is not None:
        os.chown(path, 0, gid)
    path.chmod(mode)


def empty_dir(folder: Path, gid: int | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if gid is not None:
        os.chown(folder, 0, gid)
    folder.chmod(0o2777 if gid is not None else 0o777)


def pvc_dir(root: Path, namespace: str, claim: str) -> Path:
    return root / "claims" / namespace / claim


def claim_ownership(folder: Path, gid: int | None) -> None:
    """A claim's folder: created 0777 (a local-path provisioner's), then fsGroup's ownership
    when its top folder's group is not fsGroup yet (OnRootMismatch)."""
    if not folder.is_dir():
        folder.mkdir(parents=True)
        folder.chmod(0o777)
    if gid is None or folder.stat().st_gid == gid:
        return
    for path in [folder, *folder.rglob("*")]:
        if path.is_symlink():
            continue
        os.chown(path, -1, gid)
        mode = path.stat().st_mode & 0o7777
        path.chmod(mode | (0o2070 if path.is_dir() else 0o060))
