"""Node health: Slurm's HealthCheckProgram with sunk's checks, and Kubernetes Node conditions
that drain Slurm nodes (https://slurm.schedmd.com/slurm.conf.html#OPT_HealthCheckProgram)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from sunk.problem import Problem, Problems
from sunk.spec.base import AbsPath, DnsLabel, Model, _matcher

HEALTH_REASON_PREFIX = "sunk-health:"
"""Every drain reason the health program sets starts with this: it resumes only such drains, never
an administrator's or the syncer's (`sunk:`)."""

SLURMD_HEALTH_LIMIT = 60
"""slurmd kills the HealthCheckProgram after 60 seconds (slurm.conf(5)); sunk's program stops
starting checks well before, so it always gets to drain or resume."""
CHECK_BUDGET = 50
"""Seconds the checks of one node may take in all (their timeouts summed): 10 s under slurmd's
limit are left for `scontrol show node` and the drain or resume."""

BUILTIN_CHECKS = ("gpus", "disk", "memory", "nvidia-smi", "dcgm")
"""Names of sunk's own checks: a user check cannot take one (nor a name starting with `sunk`)."""

NodeState = Literal["any", "idle", "alloc", "mixed", "nondrained_idle", "cycle"]


class DiskCheck(Model):
    """Free space on one path, as `df` sees it inside the slurmd container."""

    path: AbsPath
    """A folder in the slurmd container (a volume it mounts: /tmp, a scratch hostPath). Required."""
    min_free_mib: Annotated[int, Field(ge=1, le=2**40)]
    """Drain when less than this many MiB are free. Required."""

    @model_validator(mode="after")
    def _no_edge_space(self) -> DiskCheck:
        if self.path != self.path.strip():
            raise Problems(
                [Problem("path", f"{self.path!r} starts or ends with a space; write the folder's real name")]
            )
        return self


class HealthCheck(Model):
    """A check of the stack's own: a command or a script, run by the health program as root in the
    slurmd container; exit status 0 passes, anything else (or the timeout) drains the node with the
    last line the check printed."""

    name: Annotated[str, _matcher(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", "a DNS-1123 label such as ib-links", 40)]
    """Shown in the drain reason (`sunk-health: <name>: <detail>`). Required."""
    command: list[str] = []
    """argv, run without a shell (each word passed as given). Give command or script. Default: none."""
    script: str | None = None
    """A whole script starting with '#!'. Give command or script. Default: none."""
    timeout: Annotated[int, Field(ge=1, le=CHECK_BUDGET)] = 10
    """Seconds before the check is killed and fails. Default: 10."""
    nodesets: list[DnsLabel] = []
    """Run only on these NodeSets' nodes. Default: every NodeSet."""

    @model_validator(mode="after")
    def _one_of(self) -> HealthCheck:
        errors: list[Problem] = []
        if bool(self.command) == (self.script is not None):
            errors.append(Problem("command", "give exactly one of command (argv) or script"))
        if self.script is not None and not self.script.startswith("#!"):
            errors.append(Problem("script", "must start with '#!'"))
        if self.name in BUILTIN_CHECKS or self.name.startswith("sunk"):
            errors.append(
                Problem(
                    "name",
                    f"{self.name!r} is sunk's own; built-in checks are {', '.join(BUILTIN_CHECKS)} "
                    "and names starting with 'sunk' are reserved",
                )
            )
        if any("\n" in word or "\0" in word for word in self.command):
            errors.append(Problem("command", "a word may not hold a line break or NUL"))
        if errors:
            raise Problems(errors)
        return self


class HealthCheckSpec(Model):
    """slurmd runs sunk's health program every `interval` seconds on each node
    (HealthCheckProgram, HealthCheckInterval, HealthCheckNodeState). A failing check drains the
    node with the reason `sunk-health: <check>: <detail>`; a run where every check passes resumes
    the node only if its drain reason starts with `sunk-health:`. Drains by anyone else are left
    alone, and a node someone else drained keeps that reason."""

    enabled: bool = True
    """The health program (nodeConditions apply either way). Default: true (with the section present)."""
    interval: Annotated[int, Field(ge=10, le=86_400)] = 300
    """HealthCheckInterval in seconds. Default: 300."""
    node_state: list[NodeState] = ["any"]
    """HealthCheckNodeState: on which nodes slurmd runs it (any, idle, alloc, mixed,
    nondrained_idle; cycle spreads the runs over the interval). Default: any."""
    gpus: bool = True
    """On NodeSets with gpus: the node's GPU device files (`<devicePattern>N`, e.g. /dev/nvidia0)
    number the NodeSet's gpus.count. Default: true."""
    disk: list[DiskCheck] = []
    """Free space checks. Default: none."""
    min_available_memory_mib: Annotated[int, Field(ge=1, le=2**40)] | None = None
    """Drain when the host's MemAvailable (/proc/meminfo) falls below this. Default: unchecked."""
    nvidia_smi: bool = True
    """Where `nvidia-smi` is on the slurmd container's PATH (the NVIDIA container toolkit mounts
    it): `nvidia-smi -L` must succeed within 10 s. Skipped where absent. Default: true."""
    dcgm: bool = False
    """Where `dcgmi` is present and a DCGM host engine reachable: `dcgmi diag -r 1` (quick
    software and PCIe checks, a few seconds) must pass within 25 s. Skipped where absent.
    Default: false."""
    checks: list[HealthCheck] = []
    """The stack's own checks, run after the built-in ones. Default: none."""

    node_conditions: list[
        Annotated[str, _matcher(r"[A-Za-z0-9][A-Za-z0-9./_-]*", "a Node condition type such as KernelDeadlock", 100)]
    ] = []
    """Kubernetes Node condition types (for example KernelDeadlock, ReadonlyFilesystem from Node
    Problem Detector) that drain the tenant's Slurm nodes on that Node while their status is
    True, through the syncer, with the reason `sunk: Node <node> condition <type> (<message>)`;
    the syncer resumes its drain when the condition clears (not an admin's). Independent of
    `enabled`. Default: none."""

    @model_validator(mode="after")
    def _rules(self) -> HealthCheckSpec:
        errors: list[Problem] = []
        seen: dict[str, int] = {}
        for i, c in enumerate(self.checks):
            if c.name in seen:
                errors.append(Problem(f"checks[{i}].name", f"{c.name!r} repeats checks[{seen[c.name]}]"))
            seen.setdefault(c.name, i)
        worst = self.builtin_seconds + sum(c.timeout for c in self.checks)
        if worst > CHECK_BUDGET:
            errors.append(
                Problem(
                    "checks",
                    f"the timeouts add up to {worst} s with the built-in checks' ({self.builtin_seconds} s); "
                    f"slurmd kills the health program after {SLURMD_HEALTH_LIMIT} s, so at most {CHECK_BUDGET} fit: "
                    "lower the timeouts or split the work",
                )
            )
        if len(set(self.node_state)) != len(self.node_state) or ("any" in self.node_state and len(self.node_state) > 1):
            errors.append(Problem("nodeState", "list each state once; any stands alone"))
        if self.node_state == ["cycle"]:
            errors.append(Problem("nodeState", "cycle goes with a state (any, idle, ...), e.g. [idle, cycle]"))
        if "Ready" in self.node_conditions:
            errors.append(
                Problem(
                    "nodeConditions", "Ready is the syncer's already (a NotReady Node drains); list problem conditions"
                )
            )
        if errors:
            raise Problems(errors)
        return self

    @property
    def builtin_seconds(self) -> int:
        """The longest the built-in checks can take: 5 s each for the GPU files, every disk path and
        memory, 10 s nvidia-smi, 25 s DCGM."""
        files = self.gpus + len(self.disk) + (self.min_available_memory_mib is not None)
        return 5 * files + 10 * self.nvidia_smi + 25 * self.dcgm


__all__ = ["HEALTH_REASON_PREFIX", "DiskCheck", "HealthCheck", "HealthCheckSpec"]
