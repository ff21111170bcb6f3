"""A platform team's own Pulumi program: sunk as a library, not as the sunk project.

Its own cluster spec in code, its own Kubernetes provider (the components inherit it, never
construct one), a namespace the platform manages, an external accounting database, no login
pods, monitoring on, and the operator in the platform's namespace."""

import pulumi
import pulumi_kubernetes as k8s
from sunk.components import SlurmCluster, SunkOperator

from sunk.manifests.operator import OperatorSpec
from sunk.spec import ClusterSpec

platform = k8s.Provider("platform", context="platform-prod", namespace="default")
spec = ClusterSpec.model_validate(
    {
        "name": "hpc",
        "tenant": "initech",
        "namespace": "initech-batch",
        "createNamespace": False,
        "login": {"enabled": False},
        "accounting": {"external": {"host": "db.initech.internal", "passwordSecret": {"name": "hpc-db", "key": "pw"}}},
        "auth": {"type": "slurm"},
        "monitoring": {"enabled": True, "dashboard": False},
        "nodesets": [
            {
                "name": "a100",
                "replicas": 4,
                "instanceType": "A100x8",
                "cpus": 94,
                "memoryMib": 900000,
                "gpus": {"type": "a100", "count": 8},
            }
        ],
        "partitions": [{"name": "gpu", "nodesets": ["a100"], "default": True}],
    }
)
operator = SunkOperator(
    "platform-sunk", OperatorSpec(namespace="platform-sunk", replicas=2), opts=pulumi.ResourceOptions(provider=platform)
)
cluster = SlurmCluster(
    "initech-hpc",
    spec,
    operator_namespace="platform-sunk",
    nodeset_crd=operator.crd,
    opts=pulumi.ResourceOptions(provider=platform),
)
pulumi.export("slurmrestd", cluster.slurmrestd_url)
pulumi.export("login", cluster.login_endpoint)
