"""slurmdbd's database guard while slurm.upgradeFrom is set: what it does, decided from what it
sees. `plan` is pure; the render turns it into a table (every state's actions) that the shipped
db-guard.sh looks up, so the script only measures and executes, and the decisions are tested here.

What the guard sees, on the backup volume beside the dump `<database>-<upgradeFrom>.sql`:
- `.schema`: the database's schema as it was before the dump (convert_version_table's version
  and a digest of table_defs_table's definitions). Measured on real slurmdbd: 24.11 and 26.05
  both write convert version 16, and differ in the definitions (21 of 33: 26.05 adds txn_table's
  archive_delete key and changes 20 of the 22 per-cluster tables), so the version
  alone can't tell one release's schema from the other's;
- `.failed`: slurmdbd of the new release exited non-zero before it ever listened (its conversion
  failed); written by slurmdbd's start script (slurmdbd-start.sh);
- `.served`: slurmdbd of the new release listened (its conversion was done), also written there;
- `.restored`: the guard loaded the dump after a failure.

Two phases: `start`, before slurmdbd starts (the pod's start), and `watch`, every few seconds
after, while slurmdbd runs or crash-loops (the sidecar's loop). The acknowledgement a failure
waits for is the way back itself: slurm.version set back to upgradeFrom's release.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

Phase = Literal["start", "watch"]
Schema = Literal["none", "unrecorded", "same", "other"]
"""The database's schema now, against the record taken before the dump: `none` (no Slurm tables:
a new database), `unrecorded` (no record to compare with), `same` or `other`."""
SCHEMAS: tuple[Schema, ...] = ("none", "unrecorded", "same", "other")


class Act(StrEnum):
    RECORD = "record"
    """The database's schema written beside the dump (`.schema`)."""
    DUMP = "dump"
    """mariadb-dump to the backup volume, with its sha256 (accounting-db.sh backup)."""
    RESTORE = "restore"
    """The dump's checksum checked, the database dropped and loaded from it, its schema checked
    against the record; `.restored` written where a failure is marked."""
    SET_ASIDE = "set-aside"
    """The dump, its record and the markers moved to `<name>.aside-<time>/`: a later upgrade
    takes a fresh dump, and a failure is not found again."""
    REFUSE = "refuse"
    """The guard exits non-zero with its message: slurmdbd does not start."""


@dataclass(frozen=True)
class Seen:
    dump: bool
    schema: Schema
    failed: bool
    restored: bool
    served: bool

    @property
    def key(self) -> str:
        """The state as db-guard.sh spells it: `<dump>-<schema>-<failed>-<restored>-<served>`,
        each flag 0 or 1."""
        flags = (int(self.dump), self.schema, int(self.failed), int(self.restored), int(self.served))
        return "-".join(str(f) for f in flags)


@dataclass(frozen=True)
class Decision:
    acts: tuple[Act, ...]
    say: str
    """What the guard logs (on a refusal, the reason and what to do)."""


def plan(phase: Phase, seen: Seen, *, source: str, release: str) -> Decision:
    """What the guard of slurmdbd's pod for `release` does in `phase`, the cluster having run
    `source` (slurm.upgradeFrom) before. `release` newer than `source`: this pod converts the
    database; equal: the stack went back (or never moved)."""
    if release != source:
        return _upgrading(phase, seen, source, release)
    return _back(phase, seen, source)


def _refusal(source: str, release: str, restored: str) -> str:
    return (
        f"slurmdbd {release} failed its conversion of the accounting database before it served "
        f"({restored}); this pod will not start slurmdbd {release} again. Set the stack back: "
        f'slurm: {{version: "{source}", upgradeFrom: "{source}"}}, and deploy; slurmdbd {source} then '
        f"starts on the restored database (slurmctld's pod of {release}, held by its wait-slurmdbd, is never "
        "Ready, so its StatefulSet replaces it only once deleted: kubectl delete pod <cluster>-controller-0). "
        "Fix the cause (slurmdbd's log before the failure says it), "
        f'then upgrade again (slurm: {{version: "{release}", upgradeFrom: "{source}"}}): a fresh dump is taken'
    )


def _upgrading(phase: Phase, seen: Seen, source: str, release: str) -> Decision:
    if seen.failed:
        if not seen.restored:
            what = f"the database restored from the dump taken on {source}"
            return Decision(
                (Act.RESTORE,) if phase == "watch" else (Act.RESTORE, Act.REFUSE), _refusal(source, release, what)
            )
        if phase == "watch":
            return Decision((), "")
        return Decision(
            (Act.REFUSE,), _refusal(source, release, f"the database was restored from the dump taken on {source}")
        )
    if phase == "watch":
        return Decision((), "")
    if seen.served:
        return Decision((), f"slurmdbd {release} has converted the database already: nothing to do")
    if not seen.dump:
        return Decision(
            (Act.RECORD, Act.DUMP),
            f"the database of {source}, recorded and dumped before slurmdbd {release} converts it",
        )
    if seen.schema == "other":
        return Decision(
            (Act.RESTORE,),
            f"an earlier start of slurmdbd {release} stopped before it served, the database changed: "
            "the dump is loaded again so the conversion starts from it",
        )
    return Decision((), "the dump taken before the conversion is kept as it is")


def _back(phase: Phase, seen: Seen, source: str) -> Decision:
    if phase == "watch" or not (seen.dump or seen.failed or seen.served):
        return Decision((), "")
    if seen.failed:
        acts = (Act.SET_ASIDE,) if seen.restored else (Act.RESTORE, Act.SET_ASIDE)
        return Decision(
            acts,
            f"the upgrade's conversion had failed; the database is the dump taken on {source} again (its schema "
            f"checked against the record); slurmdbd {source} starts on it",
        )
    if seen.served:
        return Decision(
            (Act.REFUSE,),
            f"slurmdbd of a newer release converted the accounting database and served from it; slurmdbd {source} "
            "can't read it (Slurm can't be downgraded). Set slurm.version back to the newer release, or restore the "
            "dump by hand (docs/upgrading.md, Going back: accounting records written since it was taken are lost)",
        )
    if seen.schema == "other":
        return Decision(
            (Act.RESTORE, Act.SET_ASIDE),
            "an interrupted conversion changed the database before any newer slurmdbd served: the dump is "
            f"loaded again, and slurmdbd {source} starts on it",
        )
    return Decision(
        (Act.SET_ASIDE,), "nothing was converted; the dump is set aside, so a later upgrade takes a fresh one"
    )


def every_state() -> list[Seen]:
    return [
        Seen(dump, schema, failed, restored, served)
        for dump, schema, failed, restored, served in itertools.product(
            (False, True), SCHEMAS, (False, True), (False, True), (False, True)
        )
    ]


def table(phase: Phase, *, source: str, release: str) -> tuple[str, str]:
    """`plan` for every state, as db-guard.sh reads it: lines `<key> <acts,...|-> <message id>`,
    and the messages, lines `<id> <text>` (the same text is spelled once)."""
    messages: dict[str, int] = {}
    lines = []
    for seen in every_state():
        decision = plan(phase, seen, source=source, release=release)
        number = messages.setdefault(decision.say, len(messages))
        acts = ",".join(decision.acts) or "-"
        lines.append(f"{seen.key} {acts} {number}")
    said = [f"{number} {text}" for text, number in messages.items()]
    return "\n".join(lines), "\n".join(said)
