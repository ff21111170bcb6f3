"""The generated reference (docs/reference/): every spec field, CLI command and option,
controller environment variable, metric and alert, read from the code that defines them.

`python -m sunk.reference` (`make docs-ref`) writes the pages; tests/docs/test_reference.py
regenerates them and compares byte for byte. A tool of the composition root: it reads the CLI's
parser, the controllers' settings and metrics (runtime) and the core's models and renderers, and
writes nothing but the pages it is asked to."""

from __future__ import annotations

from dataclasses import dataclass

from sunk.cli import build_parser
from sunk.spec import ClusterSpec
from sunk.spec.operator import OperatorSpec, TenantPolicy

from .commands import cli_page
from .environment import environment_page
from .markdown import GENERATED
from .metrics import metrics_page
from .specpages import spec_page


@dataclass(frozen=True)
class Reference:
    pages: dict[str, str]
    """File name under docs/reference/ -> its text."""
    figures: dict[str, int]
    """What the pages list: fields, commands, options, variables, metrics, alerts."""


CLUSTER_INTRO = """
Every field of a cluster spec: the `sunk:cluster` mapping of a stack file, or
`sunk.api.ClusterSpec` in a program. Paths are the YAML keys (camelCase); in Python each is the
snake_case attribute of the same name (`memoryMib` is `memory_mib`). `[]` stands for each item of
a list, `<name>` for each key of a map. Each model has one section; a model used in several places
(an image, resources, a toleration) is described once, where it is first met, and lists where else
it is used. Cross-field rules (a partition names an existing NodeSet, GPUs fit the instance type)
are checked too; `sunk validate` names the field and what would be valid.
"""

OPERATOR_INTRO = """
The `sunk:operator` value of a stack file (`true` for every default, or a mapping of these fields;
`sunk.api.OperatorSpec` in a program): the cluster-wide operator that one stack per Kubernetes
cluster installs in its own namespace.
"""

POLICY_INTRO = """
What a tenant's NodeSet may ask of the Nodes (`sunk:operator`'s `policy`, `sunk.api.TenantPolicy`;
the operator reads it as JSON from SUNK_OPERATOR_POLICY). The operator refuses a NodeSet outside it
and says why on the NodeSet; `sunk validate` checks a stack's own NodeSets against it.
"""

INDEX = """
Generated from the code by `make docs-ref`; a test regenerates these pages and fails when they
differ from the code, so they are never out of date.

| Page | What it lists |
|---|---|
| [Cluster spec](cluster-spec.md) | {cluster} fields of `sunk:cluster` (ClusterSpec) |
| [Operator spec](operator-spec.md) | {operator} fields of `sunk:operator` (OperatorSpec) |
| [Tenant policy](tenant-policy.md) | {policy} fields of the operator's tenant policy (TenantPolicy) |
| [CLI](cli.md) | {commands} commands, {options} options and arguments |
| [Environment variables](environment.md) | {variables} variables the controllers read |
| [Metrics and alerts](metrics.md) | {metrics} metrics, {alerts} alerts |
"""


def build() -> Reference:
    cluster, n_cluster = spec_page(ClusterSpec, "Cluster spec", CLUSTER_INTRO)
    operator, n_operator = spec_page(OperatorSpec, "Operator spec", OPERATOR_INTRO)
    policy, n_policy = spec_page(TenantPolicy, "Tenant policy", POLICY_INTRO)
    cli, n_commands, n_options = cli_page(build_parser())
    environment, n_variables = environment_page()
    metrics, n_metrics, n_alerts = metrics_page()
    figures = {
        "cluster": n_cluster,
        "operator": n_operator,
        "policy": n_policy,
        "commands": n_commands,
        "options": n_options,
        "variables": n_variables,
        "metrics": n_metrics,
        "alerts": n_alerts,
    }
    index = f"{GENERATED}\n\n# Reference\n\n{INDEX.strip().format(**figures)}\n"
    pages = {
        "index.md": index,
        "cluster-spec.md": cluster,
        "operator-spec.md": operator,
        "tenant-policy.md": policy,
        "cli.md": cli,
        "environment.md": environment,
        "metrics.md": metrics,
    }
    return Reference(pages, figures)
