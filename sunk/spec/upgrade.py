"""Which moves between Slurm releases a stack may ask for (SlurmSpec.upgrade_from): the rule is
here, beside the spec; the steps of a move are sunk.upgrade's."""

from __future__ import annotations

from sunk.problem import Problem

MAX_RELEASES_BACK = 3
"""Slurm upgrades in place from the three major releases before it (since 24.11; upgrades.html)."""

UPGRADE_FROM = "upgradeFrom"
"""The field (under `slurm`) naming the release a cluster runs before a deploy: the only way an offline check
(`sunk validate`) knows the running release, so the only place a downgrade can be refused."""


def release_index(version: str) -> int:
    """Slurm majors come every six months, in May and November (YY.05, YY.11): their position
    in that sequence, so two releases' distance is a subtraction."""
    year, _, month = version.partition(".")
    return int(year) * 2 + (1 if int(month) >= 11 else 0)


def upgrade_problems(source: str | None, target: str) -> list[Problem]:
    """Why moving a cluster that runs `source` to `target` is refused (empty: allowed). A
    downgrade is refused: slurmdbd and slurmctld convert the database and the state files to the
    new release's formats, which no older release reads."""
    if source is None or source == target:
        return []
    distance = release_index(target) - release_index(source)
    if distance < 0:
        return [
            Problem(
                UPGRADE_FROM,
                f"{source!r} is newer than slurm.version {target!r}: Slurm can't be downgraded (the newer "
                "slurmdbd and slurmctld have converted the accounting database and the state files, "
                f"which {target} can't read); to go back, restore the database backup and the state "
                "snapshot taken before the upgrade (docs/upgrading.md), or keep slurm.version "
                f"{source!r}",
            )
        ]
    if distance > MAX_RELEASES_BACK:
        return [
            Problem(
                UPGRADE_FROM,
                f"{source!r} is {distance} releases before {target!r}; Slurm upgrades in place from the "
                f"{MAX_RELEASES_BACK} releases before it only: upgrade through a release in between first",
            )
        ]
    return []


RELEASE_OUTPUT = "slurmRelease"
"""The stack output naming the release a deployment ran (slurm.version): the next `pulumi up`
reads it back (release_change_problems)."""


def release_change_problems(previous: str | None, version: str, upgrade_from: str | None) -> list[Problem]:
    """Why a deploy of `version` is refused where the stack's previous deployment ran `previous`
    (its `slurmRelease` output; None: a first deploy, or one by a sunk that didn't export it).
    A change of release is allowed only where `slurm.upgradeFrom` announces it: forward with
    upgradeFrom the previous release, or back (after a failed upgrade) with upgradeFrom and
    version both the release gone back to, older than the previous one. Without that, a stack
    that left slurm.version to a default that moved, or a plain set-back, would convert (or meet
    converted) state and database with no dump, no snapshot and no gate."""
    if previous is None or previous == version:
        return []
    if upgrade_from == previous:
        return []
    if upgrade_from == version and release_index(previous) > release_index(version):
        return []
    back = release_index(version) < release_index(previous)
    way = (
        f'to go back after a failed upgrade, say so: slurm: {{version: "{version}", upgradeFrom: "{version}"}}'
        if back
        else f'to upgrade, announce it: slurm: {{version: "{version}", upgradeFrom: "{previous}"}}'
    )
    said = "unset" if upgrade_from is None else repr(upgrade_from)
    return [
        Problem(
            "version",
            f"{version!r} differs from the release the previous deployment ran ({previous!r}, its "
            f"{RELEASE_OUTPUT} output) and slurm.{UPGRADE_FROM} is {said}: a change of release nobody announced "
            f'is refused. To keep running {previous}, set slurm: {{version: "{previous}"}}; {way}',
        )
    ]
