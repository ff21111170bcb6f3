"""A platform team's Pulumi program: one Slurm cluster per team, built in code through sunk's
public API (`sunk.api`) with its typed constructors, not YAML or dicts.

The program owns what a platform owns: the teams and their quotas (TEAMS), each team's Namespace
(created here, labelled for the operator's tenant policy, and handed to sunk as an Output with
`late`), and the one operator of the Kubernetes cluster, whose CRD every cluster waits for.
`pulumi up` deploys it; tests/docs/test_examples.py runs it under Pulumi's mock engine."""

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from sunk.api import (
    ClusterSpec,
    GpuSpec,
    NodeSetSpec,
    Operator,
    OperatorSpec,
    PartitionSpec,
    QosSpec,
    SlurmCluster,
    TenantPolicy,
    keys,
    late,
)


@dataclass(frozen=True)
class Team:
    cpu_nodes: int
    h100_nodes: int
    gpus_per_user: int


TEAMS = {
    "vision": Team(cpu_nodes=2, h100_nodes=4, gpus_per_user=16),
    "speech": Team(cpu_nodes=4, h100_nodes=0, gpus_per_user=0),
}
"""The platform's own inventory: who gets a cluster and how big."""


def nodesets(team: Team) -> list[NodeSetSpec]:
    out = [NodeSetSpec(name="cpu", replicas=team.cpu_nodes, cpus=16, memory_mib=65536)]
    if team.h100_nodes:
        out.append(
            NodeSetSpec(
                name="h100",
                replicas=team.h100_nodes,
                instance_type="H100x8",
                cpus=96,
                memory_mib=1_000_000,
                gpus=GpuSpec(type="h100", count=8),
                node_selector={"node.kubernetes.io/instance-type": "H100x8"},
            )
        )
    return out


def partitions(team: Team) -> list[PartitionSpec]:
    out = [PartitionSpec(name="cpu", nodesets=["cpu"], default=True)]
    if team.h100_nodes:
        out.append(PartitionSpec(name="gpu", nodesets=["h100"], max_time="3-00:00:00"))
    return out


def qos(team: Team) -> list[QosSpec]:
    if not team.gpus_per_user:
        return []
    return [QosSpec(name="gpu", priority=100, max_tres_per_user={"gres/gpu": team.gpus_per_user})]


operator = Operator(
    "platform-sunk",
    OperatorSpec(
        namespace="platform-sunk",
        replicas=2,
        # The teams' namespaces below carry the label this policy asks for.
        policy=TenantPolicy(image_prefixes=["ghcr.io/sunk-dev/"]),
    ),
)

for name, team in TEAMS.items():
    namespace = k8s.core.v1.Namespace(
        f"{name}-hpc",
        metadata={"name": f"{name}-hpc", "labels": {keys.TENANT: name}},
    )
    spec = ClusterSpec(
        name="hpc",
        tenant=name,
        namespace=late(namespace.metadata.name),
        create_namespace=False,
        nodesets=nodesets(team),
        partitions=partitions(team),
        qos=qos(team),
    )
    cluster = SlurmCluster(
        f"{name}-hpc",
        spec,
        operator_namespace="platform-sunk",
        nodeset_crd=operator.crd,
        opts=pulumi.ResourceOptions(depends_on=[namespace]),
    )
    pulumi.export(f"{name}.controllerHost", cluster.controller_host)
