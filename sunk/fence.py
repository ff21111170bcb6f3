"""The fence of a controller with backups: a `coordination.k8s.io` Lease a slurmctld must hold to act
as the primary (docs/how-to/ha.md, "What you must never do").

Slurm's own fence is the shared state: a backup takes over when the primary has not answered its
pings for SlurmctldTimeout. A primary that runs on unwatched (its kubelet crashed) while its pod is
force-deleted and started again elsewhere would make two primaries writing one StateSaveLocation.
The Lease adds a second rule, kept by the `fence` container of every controller pod
(sunk.runtime.fence): a slurmctld that takes control (SlurmctldPrimaryOnProg marks it) must take
the Lease too, or it is stopped; the one that holds it renews it, and is stopped once it has not
renewed for `renew_deadline`, before any other may take it. In a real cluster a force-deleted pod's
bound ServiceAccount token stops working with the pod, so its orphaned slurmctld can't renew.

`plan` is pure: what the fence does next with the Lease as last read, on the fence's own monotonic
clock. Like client-go's leader election, a Lease held by another is taken only once its record
(holder and renew time) has stayed unchanged for a whole `duration` as this pod saw it: no trust in
another machine's clock."""

from __future__ import annotations

from dataclasses import dataclass

LEASE_DURATION = 15
"""leaseDurationSeconds: a Lease another holds may be taken once its record stayed unchanged this
long. Longer than `RENEW_DEADLINE` by the time a stopped slurmctld needs to be gone."""
RENEW_DEADLINE = 10
"""A holder that has not renewed for this long stops its slurmctld: 5 s before any other fence
may take the Lease."""
RENEW_EVERY = 2
"""The fence's period: it reads the Lease and renews it (a holder gets four tries within the
deadline, so one slow answer of the API server stops nothing)."""
GRACE = 15
"""How long a slurmctld that took control may wait for the Lease before it is stopped. A backup
takes over SlurmctldTimeout (8 s) after the primary's last answer, and the dead primary's Lease
was renewed up to `RENEW_EVERY` before that: the backup may take it `LEASE_DURATION` after that
renewal, so it waits at most 9 s; a failback waits for the backup to release the Lease it held
(once its slurmctld gave control back, within a period). Meanwhile the new primary works unfenced:
the Lease bounds how long two primaries can run together, it does not make that time zero."""


@dataclass(frozen=True)
class Lease:
    """The Lease as last read."""

    holder: str
    """holderIdentity; empty once released."""
    seen_at: float
    """When this pod first read this record (holder and renewTime), on its monotonic clock."""


@dataclass(frozen=True)
class Unreadable:
    """The API server did not answer the read, or refused it."""

    reason: str


@dataclass(frozen=True)
class Timing:
    duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    grace: float = GRACE

    def __post_init__(self) -> None:
        if not 0 < self.renew_deadline < self.duration:
            raise ValueError(f"renew_deadline {self.renew_deadline} must be above 0 and below duration {self.duration}")
        if self.grace <= 0:
            raise ValueError(f"grace {self.grace} must be above 0")


@dataclass(frozen=True)
class Take:
    """Write the Lease with this pod as its holder (create it where there is none)."""


@dataclass(frozen=True)
class Renew:
    """Write a new renew time on the Lease this pod holds."""


@dataclass(frozen=True)
class Release:
    """This pod's slurmctld stands by: give the Lease up so the primary takes it at once."""


@dataclass(frozen=True)
class Wait:
    """Nothing to write now; read again next period."""

    reason: str


@dataclass(frozen=True)
class Refuse:
    """This pod's slurmctld took control without the Lease, and may not keep it: stop it."""

    reason: str


@dataclass(frozen=True)
class Stop:
    """This pod's slurmctld held the Lease and lost it, or could not renew it in time: stop it."""

    reason: str


Action = Take | Renew | Release | Wait | Refuse | Stop


def plan(
    lease: Lease | Unreadable | None,
    me: str,
    now: float,
    timing: Timing = Timing(),
    *,
    primary_since: float | None,
    renewed_at: float | None,
) -> Action:
    """What the fence of pod `me` does next. `lease` is the last read (None: there is no Lease);
    `primary_since` when this pod's slurmctld last took control (None: it stands by, or is not
    running); `renewed_at` when this pod last wrote the Lease as its holder, since it took control
    (None: not yet). Every time is on this pod's monotonic clock."""
    if primary_since is None:
        if isinstance(lease, Lease) and lease.holder == me:
            return Release()
        return Wait("slurmctld stands by")
    if renewed_at is not None:
        return _holding(lease, me, now - renewed_at, timing)
    waited = now - primary_since
    if lease is None or (isinstance(lease, Lease) and lease.holder in ("", me)):
        return Take()
    if isinstance(lease, Unreadable):
        why = f"the Lease can't be read ({lease.reason})"
    elif now - lease.seen_at >= timing.duration:
        return Take()
    else:
        why = f"the Lease is held by {lease.holder}, renewed {now - lease.seen_at:.0f} s ago"
    if waited >= timing.grace:
        return Refuse(f"{why}, after {waited:.0f} s in control")
    return Wait(why)


def _holding(lease: Lease | Unreadable | None, me: str, since: float, timing: Timing) -> Action:
    if since >= timing.renew_deadline:
        return Stop(f"the Lease was not renewed for {since:.0f} s (deadline {timing.renew_deadline:.0f} s)")
    if isinstance(lease, Unreadable):
        return Wait(f"the Lease can't be read ({lease.reason})")
    if lease is None:
        # Deleted under us: create it again (a create fails if another made it meanwhile).
        return Take()
    if lease.holder == me:
        return Renew()
    return Stop(f"the Lease is held by {lease.holder or 'nobody'}")
