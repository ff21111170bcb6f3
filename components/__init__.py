"""Pulumi ComponentResources for a SUNK cluster (installed as `sunk.components`).

Most programs need two names: `SlurmCluster` (one tenant's cluster, from a validated
`sunk.spec.ClusterSpec`) and `SunkOperator` (once per Kubernetes cluster). The parts are
exported for programs that compose their own cluster."""

from .accounting import Accounting
from .auth import Auth
from .cluster import SlurmCluster
from .config import SlurmConfig
from .controlplane import ControlPlane
from .login import Login
from .monitoring import Monitoring
from .network import NetworkPolicies
from .nodesets import NodeSets
from .operator import SunkOperator
from .restapi import RestApi
from .runtime import Runtime

__all__ = [
    "Accounting",
    "Auth",
    "ControlPlane",
    "Login",
    "Monitoring",
    "NetworkPolicies",
    "NodeSets",
    "RestApi",
    "Runtime",
    "SlurmCluster",
    "SlurmConfig",
    "SunkOperator",
]
