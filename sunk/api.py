"""sunk's public API: what a program or a tool written against sunk imports, from one place.

    from sunk.api import ClusterSpec, Operator, OperatorSpec, SlurmCluster, TenantPolicy, late

The models (the cluster spec and its parts, the operator's spec, the tenant policy, the NodeSet
resource) and `keys` need only the core install (`pip install sunk`). The components and `late`
need Pulumi (`pip install 'sunk[pulumi]'`); they load on first use (PEP 562), so importing this
module never imports Pulumi, and naming one of them without Pulumi installed says which extra to
install. Names not listed in `__all__` are internal and may change in any release.

This is a module beside the core, not the `sunk` package itself: every controller and the CLI
import `sunk.<module>`, which runs `sunk/__init__.py` first; keeping that file empty keeps their
start-up free of the models they do not use and of any path to Pulumi."""

from __future__ import annotations

from typing import Any

from sunk import components, keys
from sunk.nodeset_resource import NodeSetResourceSpec, NodeSetStatus
from sunk.spec import (
    ClusterSpec,
    GpuSpec,
    Image,
    NodeSetSpec,
    PartitionSpec,
    QosSpec,
    Resources,
    SecretRef,
    SpecError,
    TopologySpec,
    load_spec,
)
from sunk.spec.operator import OperatorSpec, TenantPolicy

PULUMI_EXTRA = "sunk[pulumi]"
"""The extra that installs what the components and `late` need."""

PULUMI_BOUND = tuple(components.__all__)
"""Names that load from sunk.components on first use: its components (from the table of the
cluster's parts, sunk.manifests.parts), `late` and `stack_program`. Importing the package
sunk.components imports no Pulumi; each name's module does, when the name is first used."""

__all__ = [
    "ClusterSpec",
    "GpuSpec",
    "Image",
    "NodeSetResourceSpec",
    "NodeSetSpec",
    "NodeSetStatus",
    "OperatorSpec",
    "PartitionSpec",
    "QosSpec",
    "Resources",
    "SecretRef",
    "SpecError",
    "TenantPolicy",
    "TopologySpec",
    "keys",
    "load_spec",
    *PULUMI_BOUND,
]


class PulumiMissing(ImportError):
    """A Pulumi-bound name was asked for where Pulumi's SDK is not installed."""


def __getattr__(name: str) -> Any:
    if name not in PULUMI_BOUND:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from sunk import components

        value = getattr(components, name)
    except ModuleNotFoundError as err:
        if not (err.name or "").startswith("pulumi"):
            raise
        raise PulumiMissing(
            f"sunk.api.{name} needs Pulumi's SDK ({err.name} is not installed): pip install '{PULUMI_EXTRA}'",
            name=err.name,
        ) from err
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
