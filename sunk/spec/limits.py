"""The largest stack sunk accepts. Past a cap, validation refuses the stack, naming the field and
the limit, before any resource or file exists; each is set where the largest allowed stack still
validates in seconds (bench/validate_bench.py times `sunk validate` at the caps: 1,000 NodeSets
and 30,000 accounts, each in a stack file under the byte cap).

The stack file itself is capped by its reader: sunk.strictyaml.MAX_BYTES (1 MiB), the same for a
file and for the text Pulumi hands a program."""

from __future__ import annotations

MAX_NODESETS = 1_000
"""NodeSets in one cluster. Each is a NodeSet resource, a gres file and its ConfigMap, a node line
in slurm.conf and a slurmd pod template the pod gate checks: validation grows with the count (about
2 s of CPU at 1,000 on the bench's machine). A node pool per NodeSet, 1,000 is far past any cluster
we know of; a larger fleet is several clusters."""
MAX_ACCOUNTS = 30_000
"""Slurm accounts in one cluster (each with its users and limits, created by sacctmgr in one
script). About 0.6 s of validation at 30,000 in one parent chain, the deepest tree."""
