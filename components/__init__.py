"""Pulumi ComponentResources for a SUNK cluster (installed as `sunk.components`; needs
`pip install sunk[pulumi]`).

Most programs need two names: `SlurmCluster` (one tenant's cluster, from a validated
`sunk.spec.ClusterSpec`) and `Operator` (once per Kubernetes cluster); `late` puts values the
program computes (Outputs) into a spec. The parts are exported for programs that compose their
own cluster. Programs import them from `sunk.api`, with the models.

Names load on first use (PEP 562), so `sunk stacks` and `sunk render` start without importing
Pulumi's SDK up front; type checkers read the imports below."""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from sunk.manifests.parts import components

if TYPE_CHECKING:  # what type checkers read; tests/test_api.py holds it equal to _WHERE
    from ._k8s import late as late
    from .accounting import Accounting as Accounting
    from .auth import Auth as Auth
    from .cluster import SlurmCluster as SlurmCluster
    from .config import SlurmConfig as SlurmConfig
    from .controller import Controller as ControlPlane  # noqa: F401  (deprecated name)
    from .controller import Controller as Controller
    from .keygen import KeyGenerator as KeyGenerator
    from .login import Login as Login
    from .monitoring import Monitoring as Monitoring
    from .network import NetworkPolicies as NetworkPolicies
    from .nodesets import NodeSets as NodeSets
    from .operator import Operator as Operator
    from .operator import Operator as SunkOperator  # noqa: F401  (deprecated name)
    from .program import stack_program as stack_program
    from .restapi import RestApi as RestApi
    from .runtime import Runtime as Runtime
    from .webhook import Webhook as Webhook

_WHERE = {**components(), "late": "_k8s", "stack_program": "program"}
"""Each public name -> its module here: the parts' components and the two a program creates come
from the table of the cluster's parts (sunk.manifests.parts), so no list here can miss one."""

__all__ = sorted(_WHERE)


_RENAMED = {"ControlPlane": "Controller", "SunkOperator": "Operator"}
"""Earlier names, kept for one release: each warns and gives the renamed class (which registers
under its new type token, with an alias to the old one)."""


def __getattr__(name: str) -> Any:
    if name in _RENAMED:
        new = _RENAMED[name]
        warnings.warn(
            f"sunk.components.{name} is deprecated: use {new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return __getattr__(new)
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
