"""A platform team's own Pulumi program: sunk as a library, not as the sunk project.

The platform's own Kubernetes provider (the components inherit it, never construct one), the
tenant Namespace and a StorageClass the program creates itself and hands to sunk as Outputs
(`late`), an image registry computed by the program, an external accounting database whose
Secret the program also manages, no login pods, monitoring on, and the operator in the
platform's namespace. `depends_on=[namespace]` makes every child wait for the Namespace.
Checked with `mypy --strict` against the installed wheel (tests/test_wheel_program.py)."""

import pulumi
import pulumi_kubernetes as k8s

from sunk.api import ClusterSpec, Operator, OperatorSpec, SlurmCluster, TenantPolicy, late

config = pulumi.Config()
platform = k8s.Provider("platform", context="platform-prod", namespace="default")
on_platform = pulumi.ResourceOptions(provider=platform)

namespace = k8s.core.v1.Namespace(
    "initech-batch",
    metadata={"name": "initech-batch", "labels": {"slurm.sunk.dev/tenant": "initech"}},
    opts=on_platform,
)
fast = k8s.storage.v1.StorageClass(
    "fast-ssd",
    metadata={"name": "fast-ssd"},
    provisioner="ebs.csi.aws.com",
    volume_binding_mode="WaitForFirstConsumer",
    opts=on_platform,
)
db_password = k8s.core.v1.Secret(
    "hpc-db",
    metadata={"name": "hpc-db", "namespace": namespace.metadata.name},
    string_data={"pw": config.get_secret("dbPassword") or pulumi.Output.secret("offline-placeholder")},
    opts=on_platform,
)
registry = pulumi.Output.from_input(config.get("registry") or "registry.initech.internal/hpc")

spec = ClusterSpec.model_validate(
    {
        "name": "hpc",
        "tenant": "initech",
        "namespace": late(namespace.metadata.name),
        "createNamespace": False,
        "images": {"registry": late(registry)},
        "controller": {"stateStorage": {"storageClass": late(fast.metadata.name)}},
        "login": {"enabled": False},
        "accounting": {
            "external": {
                "host": "db.initech.internal",
                "passwordSecret": {"name": late(db_password.metadata.name), "key": "pw"},
            }
        },
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
operator = Operator(
    "platform-sunk",
    OperatorSpec(
        namespace="platform-sunk",
        replicas=2,
        policy=TenantPolicy(image_prefixes=["registry.initech.internal/hpc/"]),
    ),
    opts=on_platform,
)
cluster = SlurmCluster(
    "initech-hpc",
    spec,
    operator_namespace="platform-sunk",
    nodeset_crd=operator.crd,
    opts=pulumi.ResourceOptions(provider=platform, depends_on=[namespace]),
)
pulumi.export("namespace", cluster.namespace)
pulumi.export("controller", cluster.controller_host)
if cluster.slurmrestd_url is not None:
    pulumi.export("slurmrestd", cluster.slurmrestd_url)
assert cluster.login is None  # disabled parts are None, not placeholder strings
