"""The scripts of an upgrade's safety copies (sunk.upgrade's backup and snapshot steps): the
accounting database dumped before slurmdbd moves, StateSaveLocation copied before slurmctld
moves, and the two restores. Each is a shipped script (scripts/) filled with its paths; the
real-Slurm drill (runtime/harness/upgrade.py) runs exactly these."""

from __future__ import annotations

from dataclasses import dataclass

from sunk import naming
from sunk.render.script import render

BACKUP_DIR = "/backup"
"""Where the backup volume (a PVC) is mounted: the dumps and the state snapshots."""


@dataclass(frozen=True)
class Database:
    """How the backup reaches the accounting database (slurmdbd.conf's Storage* values)."""

    host: str
    port: int
    name: str
    user: str
    password_file: str


def _db(action: str, db: Database, name: str, directory: str) -> str:
    """accounting-db.sh doing `action`: the dump and the restore share their connection lines."""
    return render(
        "accounting-db.sh",
        ACTION=action,
        HOST=db.host,
        PORT=str(db.port),
        DATABASE=db.name,
        USER=db.user,
        PASSWORD_FILE=db.password_file,
        DIR=directory,
        NAME=name,
    )


def db_backup(db: Database, name: str, directory: str = BACKUP_DIR, *, keep: bool = False) -> str:
    """`<directory>/<name>.sql` and its sha256, renamed into place once complete. `keep`: an
    existing dump of that name is kept, not taken again (the dump before a conversion is never
    replaced by one of the converted database)."""
    return _db("backup-once" if keep else "backup", db, name, directory)


def db_restore(db: Database, name: str, directory: str = BACKUP_DIR) -> str:
    """The database dropped and loaded from the dump, once its checksum matches."""
    return _db("restore", db, name, directory)


def state_snapshot(name: str, directory: str = BACKUP_DIR, state: str = naming.STATE_SAVE) -> str:
    """state-snapshot.sh: `<directory>/<name>/` and `<name>.sha256` (every file's checksum)."""
    return render("state-snapshot.sh", STATE=state, DIR=directory, NAME=name)


def state_restore(name: str, directory: str = BACKUP_DIR, state: str = naming.STATE_SAVE) -> str:
    """state-restore.sh: StateSaveLocation emptied and filled from the snapshot, checksums verified
    before and after."""
    return render("state-restore.sh", STATE=state, DIR=directory, NAME=name)
