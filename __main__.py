"""The Pulumi program: one tenant's Slurm cluster per stack (stacks/Pulumi.<tenant>-<env>.yaml).

A composition root and nothing else: stack config -> validated spec -> components -> exports.
A bad spec stops here, before any resource is registered, with every problem and its field path."""

import pulumi
from sunk.components import SlurmCluster, SunkOperator

from sunk.spec.errors import SpecError
from sunk.stackfile import CLUSTER_KEY, OPERATOR_KEY, parse_config

config = pulumi.Config()
settings = {key: config.get(key.split(":", 1)[1]) for key in (CLUSTER_KEY, OPERATOR_KEY)}
try:
    spec, operator_spec = parse_config(
        {k: v for k, v in settings.items() if v is not None}, f"stack {pulumi.get_stack()}"
    )
except SpecError as err:
    raise pulumi.RunError(str(err)) from None

crd = None
if operator_spec is not None:
    operator = SunkOperator("sunk-operator", operator_spec)
    crd = operator.crd

cluster = SlurmCluster(spec.name, spec, nodeset_crd=crd)

pulumi.export("namespace", cluster.namespace)
pulumi.export("loginEndpoint", cluster.login_endpoint)
pulumi.export("slurmrestdUrl", cluster.slurmrestd_url)
pulumi.export("controllerHost", cluster.controller_host)
pulumi.export("clusterName", spec.name)
