"""The tests' own stack files (tests/fixtures/stacks/), kept apart from the demo stacks in stacks/
so that editing an example never breaks a test whose subject is something else. They began as
copies of the demo stacks; they change only when a test needs them to.

Only the tests whose subject is the demo stacks themselves read stacks/ (`DEMO_STACKS`)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_PROJECT = ROOT / "tests" / "fixtures"
"""A Pulumi project (Pulumi.yaml, `stackConfigDir: stacks`) whose program is the repository's
__main__.py (a link): CLI tests run inside it, so stacks named without a path are fixture stacks."""
FIXTURE_STACKS = FIXTURE_PROJECT / "stacks"
"""The fixture stacks: acme-dev, acme-prod, globex-dev, globex-prod."""
DEMO_STACKS = ROOT / "stacks"
"""The demo stacks users read and `sunk demo` runs; only tests about them read this folder."""

_SMALL_STACK = """config:
  sunk:cluster:
    name: research
    tenant: acme
    slurm: {SLURM}
    nodesets: [{name: cpu, cpus: 2, memoryMib: 1024}]
    partitions: [{name: batch, nodesets: [cpu]}]
"""


def small_stack(folder: Path, slurm: str) -> Path:
    """Pulumi.acme-dev.yaml in `folder`: one small NodeSet and partition, with `slurm` (a flow
    mapping such as `{version: "26.05", upgradeFrom: "24.11"}`) as its slurm section. The upgrade
    tests vary only that section."""
    path = folder / "Pulumi.acme-dev.yaml"
    path.write_text(_SMALL_STACK.replace("{SLURM}", slurm))
    return path
