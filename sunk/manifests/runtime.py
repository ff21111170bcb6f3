"""The per-tenant runtime: the syncer and the scheduler, each a Deployment of the one runtime
image with its ServiceAccount, least-privilege RBAC and a metrics Service.

Kubernetes Nodes are cluster-scoped, so the node permissions need a ClusterRole: one per tenant
(named after its namespace, so tenants never share or overwrite one), bound only to that
tenant's ServiceAccount, with only the verbs the controller uses. Everything about pods stays in
a namespaced Role: a tenant's runtime can touch no pod outside its namespace."""

from __future__ import annotations

from typing import Literal

from sunk import keys, naming, roles
from sunk.manifests.auth import AuthRefs
from sunk.manifests.config import file_source, nodeset_config_maps
from sunk.manifests.meta import (
    RBAC,
    RUNTIME_UID,
    Manifest,
    bound_role,
    http_probe,
    labels,
    metadata,
    obj,
    resources,
    restricted,
    selector,
)
from sunk.manifests.podsettings import apply_pod, object_meta
from sunk.manifests.restapi import url
from sunk.spec.cluster import ClusterSpec

Controller = Literal["syncer", "scheduler"]
CONTROLLERS: tuple[Controller, ...] = ("syncer", "scheduler")
METRICS_PORT = roles.METRICS_PORT
SCHEDULER_NAME = "sunk-scheduler"
"""schedulerName of pods that Slurm places."""
JWT_DIR = f"{naming.SLURM_ETC}/jwt"
SLURM_CONF_DIR = f"{naming.SLURM_ETC}/conf"
"""slurm.conf of the syncer (for `scontrol show nodes`, runtime/slurmrest/nodetext.py) and the
exporter (for `squeue`, runtime/slurmrest/jobtext.py), beside JWT_DIR."""

POD_RULES: dict[Controller, list[Manifest]] = {
    "syncer": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get", "patch"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ],
    "scheduler": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get", "patch"]},
        {"apiGroups": [""], "resources": ["pods/binding", "pods/eviction"], "verbs": ["create"]},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ],
}


def _node_rules(spec: ClusterSpec, controller: Controller) -> list[Manifest]:
    if controller == "syncer":
        # Cordon-driven drains are read from Nodes; Slurm-side drains are written back as an
        # annotation (patch nodes) and a condition (patch nodes/status). No create, no delete.
        return [
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
            {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
        ]
    # The scheduler maps Slurm nodes to Kubernetes Nodes and reads its namespace's defaults. Before
    # binding it sums the requests of every pod on the chosen Node, in any namespace, as the
    # kubelet's admission does, from a watch of the pods that have a Node (`spec.nodeName!=`, as
    # kube-scheduler's own informer): read-only, the same access kube-scheduler has. Writes to
    # pods stay in the tenant's namespaces (the Role).
    return [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"], "resourceNames": pod_namespaces(spec)},
    ]


def pod_namespaces(spec: ClusterSpec) -> list[str]:
    """Where the scheduler places pods: its own namespace and the opted-in ones (inference.namespaces)."""
    return [spec.ns, *sorted(n.name for n in spec.inference.namespaces)]


def name(spec: ClusterSpec, controller: Controller) -> str:
    return naming.runtime_controller(spec, controller)


def cluster_role_name(spec: ClusterSpec, controller: Controller) -> str:
    return f"sunk-{spec.ns}-{spec.name}-{controller}"


def rbac(spec: ClusterSpec, controller: Controller) -> list[Manifest]:
    n = name(spec, controller)
    subject = [{"kind": "ServiceAccount", "name": n, "namespace": spec.ns}]
    cr = cluster_role_name(spec, controller)
    return [
        obj("v1", "ServiceAccount", metadata(spec, n, controller), automountServiceAccountToken=True),
        *bound_role(metadata(spec, n, controller), POD_RULES[controller], n, spec.ns),
        obj(
            f"{RBAC}/v1",
            "ClusterRole",
            metadata(spec, cr, controller, namespaced=False),
            rules=_node_rules(spec, controller),
        ),
        obj(
            f"{RBAC}/v1",
            "ClusterRoleBinding",
            metadata(spec, cr, controller, namespaced=False),
            roleRef={"apiGroup": RBAC, "kind": "ClusterRole", "name": cr},
            subjects=subject,
        ),
    ]


def runtime_env(spec: ClusterSpec) -> list[Manifest]:
    return [
        {"name": "SUNK_CLUSTER", "value": spec.name},
        {"name": "SUNK_NAMESPACE", "value": spec.ns},
        {"name": "SUNK_SLURMRESTD_URL", "value": url(spec)},
        {"name": "SUNK_JWT_KEY_FILE", "value": f"{JWT_DIR}/{keys.JWT_KEY}"},
        {"name": "SUNK_SLURM_USER", "value": naming.RUNTIME_SLURM_USER},
        {"name": "SUNK_METRICS_PORT", "value": str(METRICS_PORT)},
    ]


def runtime_container(image: str, module: str, env: list[Manifest], limits: Manifest) -> Manifest:
    return {
        "name": module.rsplit(".", 1)[-1],
        "image": image,
        "command": ["python", "-m", module],
        "env": env,
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "securityContext": {**restricted(RUNTIME_UID), "readOnlyRootFilesystem": True},
        "resources": limits,
        "readinessProbe": http_probe("/readyz", "metrics"),
        "livenessProbe": http_probe("/healthz", "metrics", period=20, failures=6),
    }


SYNC_INTERVAL = "1"
"""Seconds between syncer cycles (SUNK_SYNC_INTERVAL). One second holds the propagation
goal (a cordon drained in Slurm, a Slurm drain shown in Kubernetes, within 2 s p99: at most one
interval of waiting plus one cycle). It is affordable because a quiet cycle makes one Slurm
read and no Kubernetes request (Nodes and pods come from watches) and plans nothing, and the Slurm
read is `scontrol show nodes` with a token rather than slurmrestd's JSON: at 10,000 nodes ~0.1 s
of syncer and scontrol CPU, where slurmrestd alone would spend 1.5 s serialising the list
(docs/concepts/syncer.md, bench/RESULTS.md)."""


def immediate_allocation(spec: ClusterSpec) -> bool:
    """Whether the scheduler may place pods as immediate allocations (docs/concepts/scheduler.md):
    they have no srun attached, so slurmctld's InactiveLimit would end them; sunk renders
    InactiveLimit=0 and only controller.extraSlurmConf can change it."""
    return not any(
        line.split("=", 1)[0].strip().lower() == "inactivelimit" for line in spec.controller.extra_slurm_conf
    )


def runtime_pod(
    spec: ClusterSpec, refs: AuthRefs, component: str, container: Manifest, *, service_account: str, token: bool = True
) -> Manifest:
    """The pod template every runtime process runs in (syncer, scheduler, exporter): non-root, the
    runtime default seccomp profile, the cluster's JWT key mounted read-only at JWT_DIR; `token`:
    whether the ServiceAccount token is mounted (not for a process that needs no Kubernetes API)."""
    container["volumeMounts"] = [{"name": "jwt", "mountPath": JWT_DIR, "readOnly": True}]
    pod_spec: Manifest = {"serviceAccountName": service_account}
    if not token:
        pod_spec["automountServiceAccountToken"] = False
    pod_spec |= {
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "fsGroup": RUNTIME_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [
            {
                "name": "jwt",
                "secret": {
                    "secretName": refs.jwt.secret,
                    "defaultMode": 0o440,
                    "items": [{"key": refs.jwt.key, "path": keys.JWT_KEY}],
                },
            }
        ],
    }
    return {"metadata": {"labels": labels(spec, component)}, "spec": pod_spec}


SLURM_CONF_ENV = {"name": "SUNK_SLURM_CONF_FILE", "value": f"{SLURM_CONF_DIR}/slurm.conf"}
"""Where mount_slurm_conf puts slurm.conf, for the process's settings."""


def mount_slurm_conf(spec: ClusterSpec, pod: Manifest) -> Manifest:
    """A runtime pod (runtime_pod) with the cluster's slurm.conf at SLURM_CONF_DIR (its container
    sets SLURM_CONF_ENV): slurm.conf only, no key. Its Slurm client (scontrol, squeue) finds
    slurmctld there and authenticates with a token minted from the JWT key."""
    container = pod["spec"]["containers"][0]
    container["volumeMounts"].append({"name": "slurm-config", "mountPath": SLURM_CONF_DIR, "readOnly": True})
    pod["spec"]["volumes"].append(
        {"name": "slurm-config", "projected": {"defaultMode": 0o444, "sources": [file_source(spec, "slurm.conf")]}}
    )
    return pod


def gang_topology(spec: ClusterSpec) -> tuple[str, int]:
    """(kind, nodes of the largest block) of the topology the scheduler places gangs in: the
    cluster's one topology, or the default of `topologies` (a partition naming another is placed
    by Slurm in that one all the same; the scheduler's block check then uses the default's)."""
    kind: str
    if spec.topologies:
        chosen = next((t for t in spec.topologies if t.default), spec.topologies[0])
        kind, sizes = chosen.plugin, chosen.block_sizes
    else:
        kind, sizes = spec.topology.plugin, spec.topology.block_sizes
    if kind not in ("tree", "block"):
        return "none", 0
    return kind, (sizes[-1] if kind == "block" and sizes else 0)


def deployment(spec: ClusterSpec, refs: AuthRefs, controller: Controller) -> Manifest:
    n = name(spec, controller)
    env = runtime_env(spec)
    if controller == "scheduler":
        env.append({"name": "SUNK_SCHEDULER_NAME", "value": SCHEDULER_NAME})
        if spec.inference.namespaces:
            env.append({"name": "SUNK_POD_NAMESPACES", "value": ",".join(pod_namespaces(spec))})
        if immediate_allocation(spec):
            env.append({"name": "SUNK_IMMEDIATE_ALLOCATION", "value": "true"})
        kind, block_nodes = gang_topology(spec)
        if kind != "none":
            env.append({"name": "SUNK_GANG_TOPOLOGY", "value": kind})
        if block_nodes:
            env.append({"name": "SUNK_GANG_BLOCK_NODES", "value": str(block_nodes)})
    if controller == "syncer":
        env.append({"name": "SUNK_SYNC_INTERVAL", "value": SYNC_INTERVAL})
        env.append(dict(SLURM_CONF_ENV))
        conditions = spec.health_check.node_conditions if spec.health_check is not None else []
        if conditions:
            env.append({"name": "SUNK_DRAIN_CONDITIONS", "value": ",".join(conditions)})
    container = runtime_container(
        spec.images.runtime.ref, f"sunk.runtime.{controller}", env, resources(spec.runtime.resources)
    )
    pod = runtime_pod(spec, refs, controller, container, service_account=n)
    if controller == "syncer":
        pod = mount_slurm_conf(spec, pod)  # every node read through scontrol
    pod = apply_pod(pod, spec.runtime, main=controller, pull_secrets=spec.images.pull_secrets)
    return obj(
        "apps/v1",
        "Deployment",
        object_meta(metadata(spec, n, controller), spec.runtime),
        spec={
            "replicas": 1,
            # One actor per tenant: the old pod stops before the new one starts acting.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector(spec, controller)},
            "template": pod,
        },
    )


def metrics_service(spec: ClusterSpec, controller: Controller) -> Manifest:
    return obj(
        "v1",
        "Service",
        object_meta(
            metadata(spec, name(spec, controller), controller, extra_labels={keys.METRICS: "true"}), spec.runtime
        ),
        spec={
            "selector": selector(spec, controller),
            "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}],
        },
    )


def operator_access(
    spec: ClusterSpec, refs: AuthRefs, operator_namespace: str, operator_account: str
) -> list[Manifest]:
    """What the cluster-wide operator may do in this tenant's namespace beyond pods, by name:
    read the JWT key (and no other Secret) to drain nodes through this tenant's slurmrestd, read
    the ConfigMaps of the Slurm files the NodeSets mount, and keep the topology ConfigMap in step
    with the Nodes. `create` cannot be limited by name; the operator only creates the topology
    ConfigMap if it is gone."""
    n = naming.operator_access(spec)
    rules: list[Manifest] = [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": [refs.jwt.secret]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": nodeset_config_maps(spec)},
    ]
    if spec.topology_file is not None:
        topology = naming.topology_config_map(spec.name)
        rules += [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "verbs": ["get", "patch", "update"],
                "resourceNames": [topology],
            },
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        ]
    return bound_role(metadata(spec, n, "operator-access"), rules, operator_account, operator_namespace)


def runtime_manifests(spec: ClusterSpec, refs: AuthRefs, controller: Controller) -> list[Manifest]:
    return [*rbac(spec, controller), deployment(spec, refs, controller), metrics_service(spec, controller)]
