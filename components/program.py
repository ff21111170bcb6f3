"""The body of the Pulumi program that deploys one stack file: stack config -> validated spec ->
Operator and SlurmCluster -> exports.

The program of sunk's own project, the program `sunk init` writes and the tests' fixture
project are each two lines that call `stack_program()`, so what `sunk render` runs for a stack
under Pulumi's mocks is what `pulumi up` deploys for it, in every project."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from sunk.spec.cluster import ClusterSpec
from sunk.spec.errors import SpecError
from sunk.spec.operator import OperatorSpec
from sunk.spec.upgrade import RELEASE_OUTPUT, release_change_problems
from sunk.stackfile import KEYS, PROJECT, allows_state_replacement, keys_from, parse_config

from .cluster import SlurmCluster
from .operator import Operator

READ_STACK_OUTPUTS = "pulumi:pulumi:readStackOutputs"
"""The engine's built-in function returning a stack's outputs (what a StackReference reads), called
synchronously, so the previous deployment's release is known before any resource is registered."""

OPERATOR_NAME = "sunk-operator"
"""The Operator's resource name: its URN, and so every released stack's CRD, hangs on it."""


@dataclass(frozen=True)
class StackProgram:
    """What `stack_program` built, for a program that adds its own resources or exports."""

    spec: ClusterSpec
    cluster: SlurmCluster
    operator: Operator | None
    """None unless the stack installs the operator (`sunk:operator`)."""
    operator_spec: OperatorSpec | None


def stack_settings() -> dict[str, str]:
    """The stack's `sunk:*` settings (sunk.stackfile.KEYS) as Pulumi hands them to a program: text,
    structured values as JSON. Only the set ones."""
    config = pulumi.Config(PROJECT)
    values = {key: config.get(key.split(":", 1)[1]) for key in KEYS}
    return {key: value for key, value in values.items() if value is not None}


def previous_release() -> str | None:
    """The release this stack's previous deployment ran: its own `slurmRelease` output, read back
    through the engine (the stack referencing itself). None on a first deploy, after a deploy by a
    sunk that didn't export it, or where the backend can't be read (then a warning says the check
    was skipped; the pods' own guards still refuse a change nobody announced)."""
    name = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    try:
        result = pulumi.runtime.invoke(READ_STACK_OUTPUTS, {"name": name})
    except Exception as err:  # any failure of the engine's read: the check is skipped, and said so
        pulumi.log.warn(
            f"the previous deployment's {RELEASE_OUTPUT} output could not be read ({err}); the release "
            "check of `pulumi up` is skipped (the pods' state and database guards still run)"
        )
        return None
    outputs = (result.value or {}).get("outputs") or {}
    value = outputs.get(RELEASE_OUTPUT)
    return value if isinstance(value, str) else None


def stack_program() -> StackProgram:
    """Deploy this stack's `sunk:cluster` (and the operator, where `sunk:operator` asks for it),
    honouring every stack setting (`sunk:allowStateReplacement`, `sunk:keys`), and export
    `namespace`, `loginEndpoint`, `slurmrestdUrl`, `controllerHost`, `clusterName` and `slurmRelease`
    (the release deployed: the next deploy refuses a different one unless slurm.upgradeFrom says so).

    A bad spec stops here, before any resource is registered, with every problem and its field
    path (a pulumi.RunError: Pulumi prints it without a traceback)."""
    settings = stack_settings()
    try:
        spec, operator_spec = parse_config(settings, f"stack {pulumi.get_stack()}")
    except SpecError as err:
        raise pulumi.RunError(str(err)) from None
    # Before any resource: a release change the stack didn't announce (slurm.upgradeFrom) is refused.
    changed = release_change_problems(previous_release(), spec.slurm.version, spec.slurm.upgrade_from)
    if changed:
        raise pulumi.RunError("\n".join(str(p.under("slurm")) for p in changed))
    operator = Operator(OPERATOR_NAME, operator_spec) if operator_spec is not None else None
    cluster = SlurmCluster(
        spec.name,
        spec,
        nodeset_crd=operator.crd if operator is not None else None,
        allow_state_replacement=allows_state_replacement(settings),
        keys_in_cluster=keys_from(settings) == "cluster",
    )
    pulumi.export("namespace", cluster.namespace)
    if cluster.login_endpoint is not None:
        pulumi.export("loginEndpoint", cluster.login_endpoint)
    if cluster.slurmrestd_url is not None:
        pulumi.export("slurmrestdUrl", cluster.slurmrestd_url)
    pulumi.export("controllerHost", cluster.controller_host)
    pulumi.export("clusterName", spec.name)
    pulumi.export("slurmRelease", spec.slurm.version)  # RELEASE_OUTPUT, read back next time
    return StackProgram(spec=spec, cluster=cluster, operator=operator, operator_spec=operator_spec)
