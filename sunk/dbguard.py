"""slurmdbd's database guard, in every render: what it does, decided from what it sees. `plan` is pure; the render turns it into a table (every state's actions) that the shipped
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

And in the database itself, the release that last ran on it: sunk's own table `sunk_release`
(one row, written by the guard: `mark`), since the schema number can't tell 24.11's database
from 26.05's. A database from before that table is judged by cluster_table's rpc_version (the
protocol of the slurmctld that registered last). Without upgradeFrom the backup volume isn't
mounted (the markers are absent: nothing is dumped or restored), and the guard only refuses a
database that another release ran, and records its own release: a first deploy and a
same-release restart cost a few reads and one write.

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
Recorded = Literal["none", "derived", "release", "source", "other"]
"""The release that last ran on the database, against this pod's: `none` (nothing recorded, no
slurmctld registered: a new database), `derived` (this pod's, read from cluster_table: sunk's row
is still to be written), `release` (this pod's, sunk's row), `source` (slurm.upgradeFrom's, where it
differs from this pod's), `other` (any other: nobody announced the move)."""
RECORDS: tuple[Recorded, ...] = ("none", "derived", "release", "source", "other")
RELEASE_TABLE = "sunk_release"
"""sunk's table in the accounting database: the release that last ran on it."""
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
    MARK = "mark"
    """This pod's release written to sunk's table in the database (RELEASE_TABLE), before slurmdbd
    starts on it: the next pod of another release knows what ran."""
    REFUSE = "refuse"
    """The guard exits non-zero with its message: slurmdbd does not start."""


@dataclass(frozen=True)
class Seen:
    dump: bool
    schema: Schema
    failed: bool
    restored: bool
    served: bool
    recorded: Recorded = "release"

    @property
    def key(self) -> str:
        """The state as db-guard.sh spells it: `<dump>-<schema>-<failed>-<restored>-<served>-<recorded>`,
        each flag 0 or 1."""
        flags = (int(self.dump), self.schema, int(self.failed), int(self.restored), int(self.served), self.recorded)
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
    refusal = _unannounced(phase, seen, source, release)
    if refusal:
        return Decision((Act.REFUSE,), refusal)
    decision = _upgrading(phase, seen, source, release) if release != source else _back(phase, seen, source)
    if _marks(phase, seen, decision, source, release):
        return Decision((*decision.acts, Act.MARK), decision.say)
    return decision


def _unannounced(phase: Phase, seen: Seen, source: str, release: str) -> str:
    """Why the database may not be touched: another release than the stack says ran on it."""
    if phase != "start" or seen.recorded != "other":
        return ""
    if release != source:
        return (
            f"the accounting database last ran another Slurm release (above) than slurm.upgradeFrom's {source}: "
            f"slurmdbd {release} would convert a database the stack doesn't describe, and the dump would be "
            "taken of it as if it were; set slurm.upgradeFrom to the release above (docs/upgrading.md)"
        )
    if seen.dump or seen.failed or seen.served:
        return ""  # an upgrade's copies are here: going back decides (_back)
    return (
        f"the accounting database last ran another Slurm release (above) than this slurmdbd's {release}, and "
        "slurm.upgradeFrom announces no change: a newer slurmdbd would convert it with no dump taken, an older one "
        "can't read what a newer one converted. To keep running that release, set slurm.version to it; to upgrade "
        f'from it, announce it: slurm: {{version: "{release}", upgradeFrom: <that release>}}; going back to {release} '
        f'after an upgrade is announced too: slurm: {{version: "{release}", upgradeFrom: "{release}"}} '
        "(docs/upgrading.md)"
    )


def _marks(phase: Phase, seen: Seen, decision: Decision, source: str, release: str) -> bool:
    """Whether the guard writes this pod's release into the database after `decision`'s acts:
    not where it refuses, not into a database with no Slurm tables yet (it may not exist: the
    watch marks it once slurmdbd made them), not over a failed conversion (the restored
    database is the old release's, its record with it); at each start otherwise (one write),
    and in the watch where sunk's row is missing (a new database, once slurmdbd made its tables)."""
    if Act.REFUSE in decision.acts or seen.schema == "none":
        return False
    if release != source and seen.failed:
        return False
    return phase == "start" or seen.recorded in ("none", "derived")


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
    if not seen.dump and seen.recorded in ("release", "derived"):
        return Decision((), f"the database ran slurmdbd {release} already (sunk's record): nothing to dump")
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
        Seen(dump, schema, failed, restored, served, recorded)
        for dump, schema, failed, restored, served, recorded in itertools.product(
            (False, True), SCHEMAS, (False, True), (False, True), (False, True), RECORDS
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
    # An empty message is its number alone: no line of the rendered script ends in a space (YAML
    # would then quote the whole script instead of writing it as a block).
    said = [f"{number} {text}".rstrip() for text, number in messages.items()]
    return "\n".join(lines), "\n".join(said)
