"""The runtime config (config.json) of an unpacked image, from the image's OCI config and the
accounts in its root: what `umoci unpack` writes beside the rootfs, for the parts sunk reads
(the process's user, arguments, environment and working folder).

Pure: the builder reads the image config (buildah inspect) and the root's /etc/passwd and
/etc/group, and writes what this returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DEFAULT_ENV = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "TERM=xterm")
"""What every unpacked image's process starts with before the image's own Env (umoci's defaults)."""


class ConfigError(ValueError):
    """An image whose User names an account its root does not have."""


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    home: str


def accounts(passwd: str) -> list[Account]:
    """The entries of an /etc/passwd text (malformed lines skipped)."""
    found = []
    for line in passwd.splitlines():
        fields = line.split(":")
        if len(fields) >= 6 and fields[2].isdigit() and fields[3].isdigit():
            found.append(Account(fields[0], int(fields[2]), int(fields[3]), fields[5]))
    return found


def _group_id(name: str, group: str) -> int:
    if name.isdigit():
        return int(name)
    for line in group.splitlines():
        fields = line.split(":")
        if len(fields) >= 3 and fields[0] == name and fields[2].isdigit():
            return int(fields[2])
    raise ConfigError(f"image User group {name!r} is not in the image's /etc/group")


def user_of(spec: str, passwd: str, group: str) -> tuple[int, int, str]:
    """(uid, gid, home) of an OCI User (`name`, `uid`, `name:group` or `uid:gid`; empty: root),
    resolved in the image's own account files as a container runtime does."""
    user, _, grp = (spec or "0").partition(":")
    entries = accounts(passwd)
    if user.isdigit():
        match = next((a for a in entries if a.uid == int(user)), None)
        uid = int(user)
    else:
        match = next((a for a in entries if a.name == user), None)
        if match is None:
            raise ConfigError(f"image User {user!r} is not in the image's /etc/passwd")
        uid = match.uid
    gid = _group_id(grp, group) if grp else (match.gid if match is not None else 0)
    return uid, gid, match.home if match is not None else "/"


def _set(env: list[str], item: str) -> None:
    key = item.split("=", 1)[0]
    for i, old in enumerate(env):
        if old.split("=", 1)[0] == key:
            env[i] = item
            return
    env.append(item)


def environment(image_env: Sequence[str], home: str) -> list[str]:
    """The defaults, then the image's Env (a key it repeats replaces the default in place), then
    HOME from the account unless the image sets it."""
    env = list(DEFAULT_ENV)
    for item in image_env:
        _set(env, item)
    if not any(item.split("=", 1)[0] == "HOME" for item in env):
        env.append(f"HOME={home}")
    return env


def runtime_config(image: Mapping[str, object], passwd: str, group: str) -> dict[str, object]:
    """config.json for a bundle whose root is `rootfs`, from the OCI image (its `config` holds
    User, Env, Entrypoint, Cmd, WorkingDir and Labels)."""
    config = image.get("config") or {}
    assert isinstance(config, Mapping)
    uid, gid, home = user_of(str(config.get("User") or ""), passwd, group)
    args = [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]
    labels = config.get("Labels") or {}
    assert isinstance(labels, Mapping)
    return {
        "ociVersion": "1.0.0",
        "process": {
            "terminal": False,
            "user": {"uid": uid, "gid": gid},
            "args": args,
            "env": environment(list(config.get("Env") or []), home),
            "cwd": str(config.get("WorkingDir") or "/"),
        },
        "root": {"path": "rootfs"},
        "annotations": {str(k): str(v) for k, v in sorted(labels.items())},
    }
