"""Warnings: settings that are valid and may be meant, but that a reader should see said out loud
(`sunk validate` prints them; nothing fails on them)."""

from __future__ import annotations

from sunk.problem import Problem
from sunk.spec.cluster import ClusterSpec

OPEN_TO_ALL = ("0.0.0.0/0", "::/0")
ASSOCIATION_ENFORCING = ("associations", "limits", "qos", "safe")
"""Each of these in AccountingStorageEnforce lets only users with an association run jobs."""


def warnings(spec: ClusterSpec) -> list[Problem]:
    found = []
    if "version" not in spec.slurm.model_fields_set:
        # The default moves with sunk (24.11 to 26.05 once): a stack that never named its release
        # would be upgraded by a sunk upgrade, not by its own change.
        found.append(
            Problem(
                "slurm.version",
                f"unset, so this stack runs Slurm {spec.slurm.version}, sunk's default today; pin it "
                f'(slurm: {{version: "{spec.slurm.version}"}}) so that a new sunk never upgrades it unasked '
                "(docs/upgrading.md)",
            )
        )
    login = spec.login
    if login.enabled and login.service_kind == "LoadBalancer":
        field = "service.sourceRanges" if login.service.source_ranges else "sourceRanges"
        ranges = login.ranges
        for i, cidr in enumerate(ranges):
            if cidr in OPEN_TO_ALL:
                found.append(
                    Problem(
                        f"login.{field}[{i}]",
                        f"{cidr} lets anyone who reaches the load balancer try sshd; list narrower ranges "
                        "unless that is meant",
                    )
                )
    enforcing = [e for e in spec.accounting.enforce if e in ASSOCIATION_ENFORCING]
    if spec.auth.ldap is not None and spec.accounting.enabled and enforcing and not any(a.users for a in spec.accounts):
        # Without a directory only root logs in, and root has its association.
        found.append(
            Problem(
                "accounts",
                f"accounting.enforce ({', '.join(enforcing)}) lets only users with an association run jobs, and "
                "no account lists users, so the directory's users can log in but not run jobs; add accounts with "
                "users (accounts: [{name: research, users: [ada]}]), or set accounting.enforce: [] to let anyone "
                "who logs in run jobs",
            )
        )
    return found
