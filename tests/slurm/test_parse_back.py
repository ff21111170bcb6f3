"""Real slurmctld is the oracle for the one Slurm-file writer: stacks with verbatim lines (spaces
around '=', tuning defaults replaced, keys of their own, comments) and a sample the fuzzer's
strategy draws are booted, and `scontrol show config` must report, for every setting of the
rendered slurm.conf it prints, the value sunk meant (read by tests.support.slurmread, not
by the writer's own functions). What the harness itself overrides to run on one host is left out.

What this can't model: slurmdbd.conf's own keys (the harness boots without accounting here; its
lines go through the same writer and checks)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sunk.runtime.harness import LocalSlurm

from sunk.render import render_slurm_conf
from sunk.spec import SpecError
from sunk.spec.cluster import ClusterSpec
from sunk.stackfile import parse_config
from tests.support.slurmread import settings as slurm_settings

pytestmark = pytest.mark.slurm

BASE: dict[str, Any] = {
    "name": "research",
    "tenant": "acme",
    "accounting": {"enabled": False},
    "scheduling": {"preemptType": "none"},
    "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 2, "memoryMib": 2048}],
    "partitions": [{"name": "batch", "nodesets": ["cpu"], "default": True}],
}
RECORDS = frozenset({"nodename", "nodeset", "partitionname", "downnodes"})
HARNESS = {
    # runtime/harness/overrides.py: one host, free ports, no cgroups, loopback.
    "slurmctldhost", "slurmctldport", "slurmdport", "slurmdspooldir", "slurmdpidfile", "proctracktype",
    "taskplugin", "slurmdparameters", "logtimeformat", "jobacctgathertype", "accountingstoragehost",
    "accountingstorageport", "accountingstoragetype", "accountingstoreflags", "accountingstoragetres",
    "accountingstorageenforce", "statesavelocation", "slurmuser", "slurmduser", "slurmctldpidfile",
}  # fmt: skip
"""Keys the harness sets itself to run every daemon on one host (and paths it moves)."""

VERBATIM: dict[str, dict[str, Any]] = {
    "tuning and keys of their own": {
        "controller": {
            "extraSlurmConf": ["MessageTimeout = 30", "InactiveLimit=120", "# site tuning", "BatchStartTimeout=20"]
        },
        "scheduling": {"preemptType": "none", "schedulerParameters": ["batch_sched_delay=0", "bf_interval=45"]},
    },
    "escaped and quoted values": {
        "controller": {"extraSlurmConf": ['JobCompLoc="/var/log/slurm comp.log"', "KillWait=\\40"]},
    },
}


def _config(slurm: LocalSlurm) -> dict[str, str]:
    out = {}
    for line in slurm.run("scontrol", "show", "config", check=True).stdout.splitlines():
        key, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[A-Za-z0-9_.]+", key.strip()):
            out[key.strip().lower()] = value.strip()
    return out


def _same(ours: str, theirs: str) -> bool:
    """A value slurmctld prints as it holds it: case aside, with a unit (`30 sec`), as a list, or
    `(null)` for none."""
    a, b = ours.lower(), theirs.lower()
    if b == "(null)":  # how slurmctld prints a plugin or mode of `none`
        return a.rpartition("/")[2] == "none"
    return b == a or b.startswith(a + " ") or set(a.split(",")) == set(b.split(","))


def parse_back(spec: ClusterSpec) -> tuple[list[str], set[str]]:
    """What slurmctld holds otherwise than the rendered slurm.conf says, and the keys compared."""
    meant = {k: v for k, v in slurm_settings(render_slurm_conf(spec), RECORDS).items() if k not in HARNESS}
    with LocalSlurm.start(spec, accounting=False, restapi=False) as slurm:
        held = _config(slurm)
    compared = {key for key in meant if key in held}
    wrong = [f"{key}: sunk wrote {meant[key]!r}, slurmctld holds {held[key]!r}" for key in sorted(compared)
             if not _same(meant[key], held[key])]  # fmt: skip
    return wrong, compared


def _verbatim_keys(spec: ClusterSpec) -> set[str]:
    return {line.split("=")[0].strip().replace("\\", "").lower() for line in spec.controller.extra_slurm_conf
            if "=" in line and not line.startswith("#")}  # fmt: skip


@pytest.mark.parametrize("case", sorted(VERBATIM))
def test_slurmctld_holds_what_the_writer_meant(case: str) -> None:
    data = copy.deepcopy(BASE)
    data.update(VERBATIM[case])
    spec, _ = parse_config({"sunk:cluster": data}, case)
    wrong, compared = parse_back(spec)
    assert wrong == []
    assert _verbatim_keys(spec) <= compared and len(compared) > 20, compared


def _fuzzed_lines() -> st.SearchStrategy[list[str]]:
    key = st.sampled_from(["MessageTimeout", "InactiveLimit", "KillWait", "BatchStartTimeout", "TCPTimeout"])
    value = st.integers(1, 300).map(str)
    space = st.sampled_from(["=", " = ", "= "])
    return st.lists(st.builds(lambda k, s, v: f"{k}{s}{v}", key, space, value), min_size=1, max_size=3)


@settings(
    max_examples=3,
    database=None,
    derandomize=True,
    deadline=None,
    phases=(Phase.generate,),
    suppress_health_check=list(HealthCheck),
)
@given(lines=_fuzzed_lines())
def test_a_sample_of_fuzzed_lines_reads_back_through_slurmctld(lines: list[str]) -> None:
    data = copy.deepcopy(BASE)
    data["controller"] = {"extraSlurmConf": lines}
    try:
        spec, _ = parse_config({"sunk:cluster": data}, "fuzzed")
    except SpecError:
        return  # refused (a key twice): nothing reaches slurmctld
    wrong, compared = parse_back(spec)
    assert wrong == []
    assert _verbatim_keys(spec) <= compared, compared
