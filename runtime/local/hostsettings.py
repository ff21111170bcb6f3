"""The host settings a local cluster changes, put back when the last cluster that needs them stops.

One setting today: `net.bridge.bridge-nf-call-iptables` (bridged traffic handed to iptables, which
NetworkPolicy enforcement needs, netpolicy.py), and the br_netfilter module that provides it where
the kernel builds it as a module. A sysctl is host-wide and several local clusters may run at once
(one per project folder), so the value found before the first of them changed it is kept in a
host-wide record (`RECORD`, under /run: gone at reboot, as the sysctl's value is) with the
bridges of the clusters that hold it. `take` records and sets; `release` drops a cluster, and
the last one out writes the prior value back (or unloads the module it loaded). A holder whose
bridge is gone (a cluster process that was killed) never keeps a setting changed.

The decision (`taken`, `released`) is pure; `take` and `release` read and write under a lock.
Firewall rules are not here: every rule a cluster adds carries its comment and goes at down
(net.remove_rules)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

PROC_SYS = Path("/proc/sys")
RECORD = Path("/run/sunk-local/host-settings.json")
BRIDGE_NF_CALL_IPTABLES = "net/bridge/bridge-nf-call-iptables"
BR_NETFILTER = "br_netfilter"
ABSENT = None
"""A prior value meaning the setting did not exist: a module had to be loaded to make it."""


class HostSettingError(OSError):
    """A host setting a local cluster needs could not be read or written."""


@dataclass(frozen=True)
class Held:
    """One changed setting: its value before the first cluster changed it, and who holds it."""

    prior: str | None
    holders: tuple[str, ...]


Record = Mapping[str, Held]


def taken(record: Record, setting: str, current: str | None, holder: str) -> dict[str, Held]:
    """The record after `holder` takes `setting` (found at `current`): the first taker records
    `current` as the prior value; later ones only join."""
    out = dict(record)
    held = out.get(setting)
    if held is None:
        out[setting] = Held(current, (holder,))
    elif holder not in held.holders:
        out[setting] = Held(held.prior, (*held.holders, holder))
    return out


def released(
    record: Record, holder: str, alive: Callable[[str], bool]
) -> tuple[dict[str, Held], dict[str, str | None]]:
    """The record after `holder` lets go, with every holder that is no longer `alive` dropped too,
    and the settings to put back (setting -> prior value) where nobody holds them any more."""
    out: dict[str, Held] = {}
    restore: dict[str, str | None] = {}
    for setting, held in record.items():
        left = tuple(h for h in held.holders if h != holder and alive(h))
        if left:
            out[setting] = Held(held.prior, left)
        else:
            restore[setting] = held.prior
    return out, restore


def _load(path: Path) -> dict[str, Held]:
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {k: Held(v.get("prior"), tuple(v.get("holders") or ())) for k, v in raw.items() if isinstance(v, dict)}


def _save(path: Path, record: Record) -> None:
    if not record:
        path.unlink(missing_ok=True)
        return
    doc = {k: {"prior": v.prior, "holders": list(v.holders)} for k, v in sorted(record.items())}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(path)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read(proc: Path, setting: str) -> str | None:
    try:
        return (proc / setting).read_text().strip()
    except FileNotFoundError:
        return ABSENT


def _write(proc: Path, setting: str, value: str) -> None:
    (proc / setting).write_text(f"{value}\n")


def _modprobe(*args: str) -> None:
    with contextlib.suppress(OSError):
        subprocess.run(["modprobe", *args], capture_output=True, check=False)


def take_bridge_nf(
    holder: str, *, proc: Path = PROC_SYS, record: Path = RECORD, modprobe: Callable[..., None] = _modprobe
) -> None:
    """bridge-nf-call-iptables on for the cluster of bridge `holder`, loading br_netfilter where
    the setting is absent; what was there before recorded."""
    setting = BRIDGE_NF_CALL_IPTABLES
    try:
        with _locked(record):
            current = _read(proc, setting)
            held = _load(record)
            _save(record, taken(held, setting, current, holder))
            if current is ABSENT:
                modprobe(BR_NETFILTER)
            if _read(proc, setting) != "1":
                _write(proc, setting, "1")
    except OSError as err:
        raise HostSettingError(
            f"NetworkPolicy needs bridged traffic to reach iptables ({proc / setting}): {err}"
        ) from None


def release(
    holder: str,
    alive: Callable[[str], bool],
    *,
    proc: Path = PROC_SYS,
    record: Path = RECORD,
    modprobe: Callable[..., None] = _modprobe,
) -> dict[str, str | None]:
    """The cluster of bridge `holder` no longer needs its settings: those nobody else `alive`
    holds get their prior values back (a module this put in is taken out). Returns what was put
    back. Never raises: a setting that can't be written is left as it is, and the record keeps
    nothing that would block the next cluster."""
    with _locked(record):
        left, restore = released(_load(record), holder, alive)
        _save(record, left)
    for setting, prior in restore.items():
        with contextlib.suppress(OSError):
            if prior is ABSENT:
                if setting == BRIDGE_NF_CALL_IPTABLES:
                    modprobe("-r", BR_NETFILTER)
            elif _read(proc, setting) != prior:
                _write(proc, setting, prior)
    return restore


def holders(record: Path = RECORD) -> Iterable[str]:
    """Every cluster (bridge) holding a setting."""
    return sorted({h for held in _load(record).values() for h in held.holders})
