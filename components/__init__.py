"""Pulumi ComponentResources for a SUNK cluster (installed as `sunk.components`; needs
`pip install sunk[pulumi]`).

Most programs need two names: `SlurmCluster` (one tenant's cluster, from a validated
`sunk.spec.ClusterSpec`) and `SunkOperator` (once per Kubernetes cluster); `late` puts values the
program computes (Outputs) into a spec. The parts are exported for programs that compose their
own cluster.

Names load on first use (PEP 562), so `sunk stacks` and `sunk render` start without importing
Pulumi's SDK up front; type checkers read the imports below."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._k8s import late
    from .accounting import Accounting
    from .auth import Auth
    from .cluster import SlurmCluster
    from .config import SlurmConfig
    from .controlplane import ControlPlane
    from .keygen import KeyGenerator
    from .login import Login
    from .monitoring import Monitoring
    from .network import NetworkPolicies
    from .nodesets import NodeSets
    from .operator import SunkOperator
    from .restapi import RestApi
    from .runtime import Runtime

_WHERE = {
    "late": "_k8s",
    "Accounting": "accounting",
    "Auth": "auth",
    "SlurmCluster": "cluster",
    "SlurmConfig": "config",
    "ControlPlane": "controlplane",
    "KeyGenerator": "keygen",
    "Login": "login",
    "Monitoring": "monitoring",
    "NetworkPolicies": "network",
    "NodeSets": "nodesets",
    "SunkOperator": "operator",
    "RestApi": "restapi",
    "Runtime": "runtime",
}

__all__ = [
    "Accounting",
    "Auth",
    "ControlPlane",
    "KeyGenerator",
    "Login",
    "Monitoring",
    "NetworkPolicies",
    "NodeSets",
    "RestApi",
    "Runtime",
    "SlurmCluster",
    "SlurmConfig",
    "SunkOperator",
    "late",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
