"""The order and the gates of a move from one Slurm release to the next, as data.

SchedMD's upgrade guide (https://slurm.schedmd.com/upgrades.html) fixes the order: slurmdbd first
(it converts the accounting database), then slurmctld (it converts its state files), then the
slurmd, then the clients; each may be at most two releases older than the daemons it talks to,
and a release upgrades in place from the three major releases before it. What sunk adds: the
database is dumped before slurmdbd moves, StateSaveLocation is copied with checksums before
slurmctld moves, and a slurmd is replaced only once it runs no job (drained first), so jobs
running when the upgrade starts finish on the slurmd they started on.

`upgrade_plan` is pure: the drill (runtime/harness/upgrade.py) executes it on real daemons,
`sunk upgrade-plan STACK` prints it, and docs/upgrading.md explains it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sunk import keys
from sunk.images import release_of
from sunk.spec.cluster import ClusterSpec
from sunk.spec.upgrade import UPGRADE_FROM, upgrade_problems

__all__ = ["UPGRADE_FROM", "Step", "UpgradePlan", "plan_text", "upgrade_plan"]

DRAIN_REASON = "sunk-upgrade"
"""The prefix of the drain reason the slurmd step sets (owned drains carry a prefix: a drain
someone else set is never resumed)."""


@dataclass(frozen=True)
class Step:
    """One step: what it changes, what must hold before the next step starts, and the way back."""

    name: str
    does: str
    waits_for: str
    """What must be true before this step starts (besides the step before it having passed)."""
    gate: str
    """What must be true before the next step starts; a step whose gate fails stops the upgrade."""
    gate_timeout_s: int | None
    """How long the gate is waited for; None: as long as running jobs run (no limit sunk sets)."""
    rollback: str
    """How to undo this step when its gate fails."""


@dataclass(frozen=True)
class UpgradePlan:
    cluster: str
    source: str
    target: str
    steps: tuple[Step, ...]

    def step(self, name: str) -> Step:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(f"no step {name!r} in the plan ({', '.join(s.name for s in self.steps)})")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.steps)


BACKUP_TIMEOUT = 3600
"""A dump of a large accounting database (years of jobs) takes minutes to tens of minutes."""
CONVERT_TIMEOUT = 7200
"""SchedMD: the database conversion may take hours for millions of job records."""
CONTROLLER_TIMEOUT = 600
"""slurmctld reads every job's state at start; nodes re-register within their SlurmdTimeout."""
CLIENT_TIMEOUT = 600
"""A login, slurmrestd or runtime pod replaced and ready."""


def upgrade_plan(spec: ClusterSpec, source: str) -> UpgradePlan:
    """The steps that move `spec`'s cluster from `source` to `spec.slurm.version`, in order.
    ValueError (with the problems) where the move is refused; no steps where nothing changes."""
    target = spec.slurm.version
    problems = upgrade_problems(source, target)
    if problems:
        raise ValueError("; ".join(str(p.under("slurm")) for p in problems))
    if source == target:
        return UpgradePlan(spec.name, source, target, ())
    new = release_of(target).slurm
    steps: list[Step] = []
    if spec.accounting.enabled:
        steps += [
            Step(
                "backup",
                f"dump the accounting database ({source}'s schema) to the backup volume, with a checksum",
                "nothing: the cluster keeps running on " + source,
                "the dump is complete (mariadb-dump's closing line) and its checksum written",
                BACKUP_TIMEOUT,
                "nothing changed yet",
            ),
            Step(
                "slurmdbd",
                f"stop slurmdbd {source}; slurmdbd {new} converts the database schema at its first start",
                "the backup",
                f"slurmdbd answers sacctmgr and reports {target}; slurmctld {source} keeps running and "
                "queues its accounting records meanwhile",
                CONVERT_TIMEOUT,
                f"by itself: slurmdbd's db-guard restores the dump and holds slurmdbd {new} from starting "
                f'again; then set the stack back (slurm: {{version: "{source}", upgradeFrom: "{source}"}}) and '
                f"slurmdbd {source} starts on the restored database (before this gate passes nothing else has moved)",
            ),
        ]
    steps += [
        Step(
            "snapshot",
            _stop_and_copy(spec, source),
            "slurmdbd on " + target if spec.accounting.enabled else "nothing",
            "the copy's checksums match the files",
            CONTROLLER_TIMEOUT,
            f"start {_controllers(spec, source)} again from the untouched files",
        ),
        Step(
            "slurmctld",
            f"{_controllers(spec, new)} starts from the saved state (it converts the "
            "state files; pending and running jobs are kept)" + (", pod 0 the primary" if spec.controller.ha else ""),
            "the snapshot",
            f"slurmctld answers and reports {target}, every job it had is known, every node that "
            "answered before answers again",
            CONTROLLER_TIMEOUT,
            f"stop {_controllers(spec, new)}; restore StateSaveLocation from the snapshot (checksums verified); start "
            f"{_controllers(spec, source)}",
        ),
        Step(
            "slurmd",
            f"drain every node ({DRAIN_REASON}); replace each slurmd with {new} once it runs no job, "
            "then resume it. Running jobs finish on their old slurmd",
            f"slurmctld on {target} (it accepts slurmd of {source})",
            f"every node registered with slurmd {target} and resumed",
            None,
            f"nodes replaced stay on {target} (slurmctld {target} runs them); nodes not yet replaced keep {source}",
        ),
        Step(
            "clients",
            f"login, slurmrestd and the runtime (operator, syncer, scheduler, exporter) on {target}",
            f"slurmctld on {target} (a client may not be newer than the daemons it calls)",
            f"each reports {target} and answers",
            CLIENT_TIMEOUT,
            f"the {source} images again (clients keep no state)",
        ),
    ]
    return UpgradePlan(spec.name, source, target, tuple(steps))


def _controllers(spec: ClusterSpec, release: str) -> str:
    """slurmctld `release`, or with backups every controller of that release: they share one
    StateSaveLocation, so none may run while it is copied or converted, and two releases never
    run on it together. The controller StatefulSet is then OnDelete: its pods are replaced only
    once deleted, all of them (docs/how-to/ha.md), and each pod's state guard waits until no
    controller answers before it copies (sunk.manifests.upgrade)."""
    if not spec.controller.ha:
        return f"slurmctld {release}"
    backups = spec.controller.replicas - 1
    return f"every slurmctld {release} (the primary and its {'backup' if backups == 1 else f'{backups} backups'})"


def _stop_and_copy(spec: ClusterSpec, source: str) -> str:
    if not spec.controller.ha:
        return f"stop slurmctld {source} (it saves its state) and copy StateSaveLocation with a sha256 of every file"
    return (
        f"delete every controller pod (kubectl delete pod -n {spec.ns} -l {keys.APP_INSTANCE}={spec.name},"
        f"{keys.APP_COMPONENT}=controller: the StatefulSet is OnDelete), so {_controllers(spec, source)} stops "
        "and saves its state; once every slurmctld has exited and no controller answers, one new pod's state guard "
        "copies StateSaveLocation "
        "with a sha256 of every file (the others wait their turn and find the copy)"
    )


def plan_text(plan: UpgradePlan) -> str:
    """The plan as `sunk upgrade-plan` prints it."""
    if not plan.steps:
        return f"{plan.cluster}: runs Slurm {plan.target} already; nothing to upgrade\n"
    lines = [f"{plan.cluster}: Slurm {plan.source} -> {plan.target}, {len(plan.steps)} steps, in this order:"]
    for number, step in enumerate(plan.steps, 1):
        wait = "as long as running jobs run" if step.gate_timeout_s is None else f"up to {step.gate_timeout_s} s"
        lines += [
            f"{number}. {step.name}: {step.does}",
            f"   waits for: {step.waits_for}",
            f"   gate ({wait}): {step.gate}",
            f"   if the gate fails: {step.rollback}",
        ]
    lines.append(
        "Before the slurmdbd step passes, going back is free. After it, going back means restoring the "
        "dump (accounting records written since are lost) and, after slurmctld, the state snapshot "
        "(jobs submitted since are lost)."
    )
    return "\n".join(lines) + "\n"
