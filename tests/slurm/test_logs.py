"""The rendered files boot without errors or deprecation warnings: every error or fatal line the
daemons logged is one of the few known to be harmless here, and no line says an option of ours is
deprecated or obsolete, so a renderer change (or a Slurm release) that Slurm dislikes shows up."""

from __future__ import annotations

import re

import pytest
from sunk.runtime.harness import LocalSlurm

pytestmark = pytest.mark.slurm

HARMLESS = [
    # First start: no state to recover yet.
    r"Could not open \w+ state file",
    r"NOTE: Trying backup state save file",
    r"No fed_mgr state file",
    # topology.conf may name dynamic nodes before they register (then `scontrol reconfigure`).
    r"_find_node_record: lookup failure for node",
    # The deploy-time topology.conf has no switch until nodes exist (the operator re-renders it).
    r"No switches configured",
    # slurmd caches the hwloc topology in /var/spool/slurmd (not the per-node %n folder); here
    # several slurmd share that folder and may read it while another writes it, then fall back
    # to probing the hardware. Pods each have their own spool folder.
    r"xcpuinfo_hwloc_topo_load: hwloc_topology_set_xml\(\) failed",
    # test_rest_without_a_token_is_refused asks slurmrestd without a token on purpose (24.11 and
    # 26.05 word it differently).
    r"authentication failed: Authentication (does not apply to request|failure)",
    r"wrap_on_data: .* on_data returned rc: Authentication failure",
    # No mail program in the image (nor in the cluster's images).
    r"Configured MailProg is invalid",
    # With AccountingStorageEnforce=qos slurmctld checks AllowQos at its first start, before the
    # accounting setup has created the spec's QOS; it applies them once they exist (measured:
    # test_accounting_lifecycle submits -p gpu -q high right after the setup).
    r"Ignoring invalid Allow/DenyQOS value: (high|low)$",
    # slurmdbd pushes association updates while slurmctld is still loading them.
    r"We can't find assoc \d+ on cluster",
    r"SLURMDB_MODIFY_ASSOC: assoc \d+.* not found",
]


OUTDATED = re.compile(r"deprecat|obsolete|no longer (supported|used|needed)|has been (removed|renamed)", re.IGNORECASE)
"""How Slurm words an option it will drop or has dropped, at any log level."""


def test_daemons_log_no_unexpected_errors(acme: LocalSlurm) -> None:
    harmless = re.compile("|".join(HARMLESS))
    bad = []
    for log in sorted(acme.log_dir.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if (re.search(r"\b(error|fatal):", line) and not harmless.search(line)) or OUTDATED.search(line):
                bad.append(f"{log.name}: {line}")
    assert not bad, "\n".join(bad)
