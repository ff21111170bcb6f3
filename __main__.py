"""The Pulumi program: one tenant's Slurm cluster per stack (stacks/Pulumi.<tenant>-<env>.yaml).

A composition root and nothing else: stack config -> validated spec -> components -> exports.
A bad spec stops here, before any resource is registered, with every problem and its field path."""

import pulumi

from sunk.api import Operator, SlurmCluster, SpecError
from sunk.stackfile import KEYS, allows_state_replacement, keys_from, parse_config

config = pulumi.Config()
settings = {key: config.get(key.split(":", 1)[1]) for key in KEYS}
settings = {k: v for k, v in settings.items() if v is not None}
try:
    spec, operator_spec = parse_config(settings, f"stack {pulumi.get_stack()}")
except SpecError as err:
    raise pulumi.RunError(str(err)) from None

crd = None
if operator_spec is not None:
    operator = Operator("sunk-operator", operator_spec)
    crd = operator.crd

cluster = SlurmCluster(
    spec.name,
    spec,
    nodeset_crd=crd,
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
