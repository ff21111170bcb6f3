"""The health check files under /etc/slurm: sunk's HealthCheckProgram (health-check.sh, one for
the cluster) and one executable file per check of the stack's own (spec.healthCheck)."""

from __future__ import annotations

import shlex

from sunk import naming
from sunk.render.script import render
from sunk.spec.cluster import ClusterSpec
from sunk.spec.health import HEALTH_REASON_PREFIX, HealthCheck, HealthCheckSpec

HEALTH_DIR = "health.d"
"""Under /etc/slurm: the program and the stack's checks, executable (a folder's files are)."""
PROGRAM = f"{HEALTH_DIR}/sunk-health.sh"
PROGRAM_PATH = f"{naming.SLURM_ETC}/{PROGRAM}"
"""HealthCheckProgram. User checks cannot be named sunk*, so none takes this file."""


def check_path(check: HealthCheck) -> str:
    return f"{HEALTH_DIR}/{check.name}.sh"


def check_file(check: HealthCheck) -> str:
    """A check's file: its script as given, or its command run without a shell, each word
    shell-quoted, so no word of it is ever read as shell syntax."""
    if check.script is not None:
        return check.script.rstrip("\n") + "\n"
    return "#!/bin/sh\nexec " + " ".join(shlex.quote(word) for word in check.command) + "\n"


def check_lines(spec: ClusterSpec, health: HealthCheckSpec) -> list[str]:
    """The program's `checks` input: `<nodesets or *> <name> <timeout> <kind> [<arg>...]`. Names,
    numbers and device prefixes hold no space; a disk path, which may, is the last field (`read`
    gives it the rest of the line) and holds no line break (validated)."""
    lines = []
    if health.gpus:
        by_pattern: dict[str, list[str]] = {}
        for ns in spec.nodesets:
            if ns.gpus is not None:
                by_pattern.setdefault(ns.gpus.device_pattern, []).append(ns.name)
        for pattern, names in sorted(by_pattern.items()):
            lines.append(f"{','.join(names)} gpus 5 gpus {pattern}")
    for d in health.disk:
        lines.append(f"* disk 5 disk {d.min_free_mib} {d.path}")
    if health.min_available_memory_mib is not None:
        lines.append(f"* memory 5 memory {health.min_available_memory_mib}")
    if health.nvidia_smi:
        lines.append("* nvidia-smi 10 nvidia-smi")
    if health.dcgm:
        lines.append("* dcgm 25 dcgm")
    for c in health.checks:
        lines.append(f"{','.join(c.nodesets) or '*'} {c.name} {c.timeout} user")
    return lines


def render_health_files(spec: ClusterSpec) -> dict[str, str]:
    """health.d/sunk-health.sh and health.d/<check>, or nothing without spec.healthCheck."""
    health = spec.health_check
    if health is None or not health.enabled:
        return {}
    program = render(
        "health-check.sh",
        PREFIX=HEALTH_REASON_PREFIX,
        CHECKS="\n".join(check_lines(spec, health)),
        CHECKS_DIR=f"{naming.SLURM_ETC}/{HEALTH_DIR}",
    )
    return {PROGRAM: program, **{check_path(c): check_file(c) for c in health.checks}}


def health_conf_lines(spec: ClusterSpec) -> list[str]:
    """slurm.conf's HealthCheck* lines."""
    health = spec.health_check
    if health is None or not health.enabled:
        return []
    return [
        f"HealthCheckProgram={PROGRAM_PATH}",
        f"HealthCheckInterval={health.interval}",
        f"HealthCheckNodeState={','.join(s.upper() for s in health.node_state)}",
    ]
