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

if TYPE_CHECKING:
    from ._k8s import late
    from .accounting import Accounting
    from .auth import Auth
    from .cluster import SlurmCluster
    from .config import SlurmConfig
    from .controller import Controller
    from .controller import Controller as ControlPlane  # noqa: F401  (deprecated name)
    from .keygen import KeyGenerator
    from .login import Login
    from .monitoring import Monitoring
    from .network import NetworkPolicies
    from .nodesets import NodeSets
    from .operator import Operator
    from .operator import Operator as SunkOperator  # noqa: F401  (deprecated name)
    from .program import stack_program
    from .restapi import RestApi
    from .runtime import Runtime

_WHERE = {
    "late": "_k8s",
    "Accounting": "accounting",
    "Auth": "auth",
    "SlurmCluster": "cluster",
    "SlurmConfig": "config",
    "Controller": "controller",
    "KeyGenerator": "keygen",
    "Login": "login",
    "Monitoring": "monitoring",
    "NetworkPolicies": "network",
    "NodeSets": "nodesets",
    "Operator": "operator",
    "stack_program": "program",
    "RestApi": "restapi",
    "Runtime": "runtime",
}

__all__ = [
    "Accounting",
    "Auth",
    "Controller",
    "KeyGenerator",
    "Login",
    "Monitoring",
    "NetworkPolicies",
    "NodeSets",
    "Operator",
    "RestApi",
    "Runtime",
    "SlurmCluster",
    "SlurmConfig",
    "late",
    "stack_program",
]


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
