"""slurmctld: a StatefulSet (stable hostnames = the SlurmctldHost lines: one pod restarted by
Kubernetes, or with `controller.replicas` 2-3 a primary and backups sharing a ReadWriteMany state
claim), its state PVC, the headless Service that gives each pod a DNS name, and a
PodDisruptionBudget."""

from __future__ import annotations

from sunk import keys, naming
from sunk.manifests import scripts, upgrade
from sunk.manifests.auth import AuthRefs
from sunk.manifests.config import controller_hash, slurm_projection
from sunk.manifests.meta import (
    SLURM_UID,
    Manifest,
    bound_role,
    exec_probe,
    fixed_resources,
    labels,
    metadata,
    obj,
    read_only,
    resources,
    selector,
    tcp_probe,
)
from sunk.manifests.pods import auth_mounts, auth_sidecars, auth_volumes, shared_volumes, slurm_pod_security
from sunk.manifests.podsettings import apply_pod, apply_service, object_meta
from sunk.manifests.sssd import with_sssd
from sunk.spec.cluster import ClusterSpec

COMPONENT = "controller"


def state_claim_name(spec: ClusterSpec) -> str:
    return naming.controller_state_claim(spec)


def state_claim(spec: ClusterSpec) -> Manifest:
    storage = spec.controller.state_storage
    mode = storage.access_mode or "ReadWriteOnce"
    claim: Manifest = {"accessModes": [mode], "resources": {"requests": {"storage": storage.size}}}
    if storage.storage_class:
        claim["storageClassName"] = storage.storage_class
    meta = object_meta(metadata(spec, state_claim_name(spec), COMPONENT), spec.controller)
    return obj("v1", "PersistentVolumeClaim", meta, spec=claim)


def headless_service(spec: ClusterSpec) -> Manifest:
    """Gives `<cluster>-controller-<i>.<cluster>-controller.<ns>.svc` to each pod. Addresses are
    published whatever the readiness: slurmd and clients must resolve slurmctld while it starts,
    and with backups every SlurmctldHost must resolve while its pod is a standby (not ready) or
    even dead, or a client's walk down the list would stop at the name it can't resolve."""
    service = obj(
        "v1",
        "Service",
        object_meta(metadata(spec, naming.controller(spec), COMPONENT), spec.controller),
        spec={
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector(spec, COMPONENT),
            "ports": [
                {
                    "name": "slurmctld",
                    "port": naming.SLURMCTLD_PORT,
                    "targetPort": "slurmctld",
                    "protocol": "TCP",
                }
            ],
        },
    )
    return apply_service(service, spec.controller.service)


def disruption_budget(spec: ClusterSpec) -> Manifest:
    """No automated eviction (node drains, autoscaler) takes the only slurmctld away; an admin
    deletes the pod deliberately. A crash-looping pod may still be evicted. With backups only the
    primary is ready (ready_probe), so the same budget lets a drain evict any standby (unhealthy
    pods may always be evicted) and never the primary: a voluntary disruption costs no takeover."""
    return obj(
        "policy/v1",
        "PodDisruptionBudget",
        object_meta(metadata(spec, naming.controller(spec), COMPONENT), spec.controller),
        spec={
            "minAvailable": 1,
            "selector": {"matchLabels": selector(spec, COMPONENT)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    )


def ready_probe(spec: ClusterSpec) -> Manifest:
    """One slurmctld: ready when `scontrol ping` reaches it. With backups: ready when this pod is
    the primary, which `scontrol ping` names (`Slurmctld(primary) at <host> is UP`, whatever the
    others' states; measured on 26.05 in tests/slurm/test_controller_ha.py). A healthy standby is
    then not ready and a dead one fails liveness too: the TCP probes tell those apart."""
    if not spec.controller.ha:
        return exec_probe(["scontrol", "ping"], period=10, timeout=10)
    return exec_probe(scripts.sh(scripts.primary_probe()), period=5, timeout=10)


SPREAD_KEY = "kubernetes.io/hostname"


def spread(spec: ClusterSpec) -> Manifest:
    """At most one slurmctld per Node, or the extra pod stays Pending: a backup on its primary's
    Node survives no Node loss. A hard topology spread rather than a required pod anti-affinity,
    with the same effect here (`minDomains` = replicas counts missing Nodes as empty, so a
    second pod on the only Node is refused), because it adds to the user's `affinity` (a node
    pool, a zone) where sunk's own affinity would replace it."""
    return {
        "maxSkew": 1,
        "minDomains": spec.controller.replicas,
        "topologyKey": SPREAD_KEY,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": selector(spec, COMPONENT)},
    }


FENCE_MODULE = "sunk.runtime.fence"


def fenced(spec: ClusterSpec) -> bool:
    """With backups every controller pod holds a fence (sunk.fence): its ServiceAccount, Role and
    RoleBinding, its token, and the `fence` container. One controller needs none."""
    return spec.controller.ha


def fence_container(spec: ClusterSpec) -> Manifest:
    """sunk.runtime.fence in the runtime's image, as the slurm user: it reads the primary mark and
    writes the stop file in the pod's /run/slurmctld (primary-mark.sh starts the watcher that
    acts on it). The pod's ServiceAccount token (its only grant: this cluster's Lease) is
    Kubernetes' usual mount, which the official client reads."""
    env = {
        "SUNK_NAMESPACE": spec.ns,
        "SUNK_LEASE": naming.controller_fence(spec),
        "SUNK_PRIMARY_MARK": naming.PRIMARY_MARK,
        "SUNK_STOP_FILE": naming.FENCE_STOP,
    }
    return {
        "name": "fence",
        "image": spec.images.runtime.ref,
        "command": ["python", "-m", FENCE_MODULE],
        "env": [
            *({"name": k, "value": v} for k, v in env.items()),
            {"name": "SUNK_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "SUNK_POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
        ],
        "securityContext": read_only(SLURM_UID),
        "resources": fixed_resources("10m", "48Mi", "128Mi"),
        "volumeMounts": [{"name": "run", "mountPath": "/run/slurmctld"}],
    }


def fence_access(spec: ClusterSpec) -> list[Manifest]:
    """The fence's ServiceAccount and its one grant: get and update this cluster's Lease, by name,
    and create it (Kubernetes can't restrict a create to a name: RBAC sees no name in it)."""
    if not fenced(spec):
        return []
    name = naming.controller_fence(spec)
    group = "coordination.k8s.io"
    rules = [
        {"apiGroups": [group], "resources": ["leases"], "resourceNames": [name], "verbs": ["get", "update"]},
        {"apiGroups": [group], "resources": ["leases"], "verbs": ["create"]},
    ]
    return [
        obj("v1", "ServiceAccount", metadata(spec, name, COMPONENT), automountServiceAccountToken=False),
        *bound_role(metadata(spec, name, COMPONENT), rules, name, spec.ns),
    ]


def statefulset(spec: ClusterSpec, refs: AuthRefs) -> Manifest:
    image = spec.images.controller.ref
    shared_vols, shared_mounts = shared_volumes(spec, "controller")
    config_mount = {"name": "slurm-config", "mountPath": naming.SLURM_ETC, "readOnly": True}
    slurmctld: Manifest = {
        "name": "slurmctld",
        "image": image,
        # `slurmctld -D` under the lock an upgrade's state-guard waits on (slurmctld-start.sh).
        "command": scripts.sh(scripts.slurmctld_start()),
        "ports": [{"name": "slurmctld", "containerPort": naming.SLURMCTLD_PORT, "protocol": "TCP"}],
        "securityContext": read_only(SLURM_UID),
        "resources": resources(spec.controller.resources),
        # Loading a large state directory can take minutes (10 allowed); liveness starts after it.
        # A standby listens on the port too (it answers pings), so the TCP probes hold for it as
        # well. Every 2 s: readiness starts only once this passes, and slurmctld is seldom
        # listening at the first probe, so a period of 10 s held each start's Ready (a failover's
        # new primary named) up to 10 s past the moment slurmctld answered.
        "startupProbe": tcp_probe("slurmctld", period=2, failures=300),
        "readinessProbe": ready_probe(spec),
        "livenessProbe": tcp_probe("slurmctld", period=20, failures=6),
        "volumeMounts": [
            config_mount,
            {"name": "state", "mountPath": naming.STATE_SAVE},
            {"name": "run", "mountPath": "/run/slurmctld"},
            # EpilogSlurmctld and PrologSlurmctld scripts write their scratch files here.
            {"name": "tmp", "mountPath": "/tmp"},
            *auth_mounts(spec),
            *shared_mounts,
        ],
    }
    watcher = {
        "name": "reconfigure",
        "image": image,
        "command": scripts.sh(scripts.reconfigure_watcher()),
        "securityContext": read_only(SLURM_UID),
        "resources": fixed_resources("10m", "16Mi", "64Mi"),
        "livenessProbe": exec_probe(scripts.heartbeat_probe_command(), period=30),
        "readinessProbe": exec_probe(scripts.heartbeat_probe_command(), period=30),
        "volumeMounts": [config_mount, {"name": "tmp", "mountPath": "/tmp"}, *auth_mounts(spec)],
    }
    sidecars = auth_sidecars(spec, image)
    if upgrade.upgrading(spec) and spec.accounting.enabled:
        # After munge (sacctmgr authenticates), before the state is touched: slurmdbd converts first.
        sidecars.append(upgrade.wait_release_container(spec, "slurmdbd", image, [config_mount, *auth_mounts(spec)]))
    # Every render: a release change nobody announced is refused before slurmctld reads the state.
    sidecars.append(upgrade.state_guard_container(spec, image))
    qos = scripts.partition_qos(spec)
    if spec.accounting.enabled and qos:
        # After the auth sidecars (munge answers sacctmgr), before slurmctld: see wait-qos.sh.
        sidecars.append(
            {
                "name": "wait-qos",
                "image": image,
                "command": scripts.sh(scripts.wait_qos(qos)),
                "securityContext": read_only(SLURM_UID),
                "resources": fixed_resources("10m", "16Mi", "64Mi"),
                "volumeMounts": [
                    config_mount,
                    {"name": "state", "mountPath": naming.STATE_SAVE, "readOnly": True},
                    *auth_mounts(spec),
                ],
            }
        )
    volumes = [
        slurm_projection(spec, "controller", auth_key=refs.auth, jwt_key=refs.jwt),
        {"name": "state", "persistentVolumeClaim": {"claimName": state_claim_name(spec)}},
        {"name": "run", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}},
        *auth_volumes(spec, refs.auth),
        *shared_vols,
        *([upgrade.backup_volume(spec, COMPONENT)] if upgrade.guarded(spec) else []),
    ]
    # slurmctld resolves users and groups: AllowGroups, and the uids of accounting associations.
    sssd_hash = with_sssd(spec, image, sidecars, volumes, slurmctld["volumeMounts"])
    annotations = {keys.CONFIG_HASH: controller_hash(spec), **({keys.SSSD_HASH: sssd_hash} if sssd_hash else {})}
    pod: Manifest = {
        "metadata": {"labels": labels(spec, COMPONENT), "annotations": annotations},
        "spec": {
            "automountServiceAccountToken": False,
            "enableServiceLinks": False,
            # slurmctld saves its state on SIGTERM; give it time on a big cluster.
            "terminationGracePeriodSeconds": 120,
            "securityContext": slurm_pod_security(),
            "initContainers": sidecars,
            "containers": [slurmctld, watcher],
            "volumes": volumes,
        },
    }
    if fenced(spec):
        # The token is mounted in every container of the pod (the one way every cluster sunk runs
        # on provides it with its CA); what it may do is write this cluster's Lease, nothing else.
        pod["spec"] |= {"serviceAccountName": naming.controller_fence(spec), "automountServiceAccountToken": True}
        pod["spec"]["containers"].append(fence_container(spec))
    pod = apply_pod(
        pod,
        spec.controller,
        main="slurmctld",
        pull_secrets=spec.images.pull_secrets,
        extra_args=spec.controller.extra_args,
    )
    ha = spec.controller.ha
    if ha:
        constraints = pod["spec"].setdefault("topologySpreadConstraints", [])
        if not any(c.get("topologyKey") == SPREAD_KEY for c in constraints):
            constraints.append(spread(spec))
    meta = object_meta(metadata(spec, naming.controller(spec), COMPONENT), spec.controller)
    if ha:
        # Only the primary is ever Ready: Pulumi's wait for readyReplicas = replicas would time
        # out every `pulumi up` (sunk.keys.PULUMI_SKIP_AWAIT).
        meta["annotations"] = {**(meta.get("annotations") or {}), keys.PULUMI_SKIP_AWAIT: "true"}
    return obj(
        "apps/v1",
        "StatefulSet",
        meta,
        spec={
            "replicas": spec.controller.replicas,
            "serviceName": naming.controller(spec),
            "selector": {"matchLabels": selector(spec, COMPONENT)},
            # Backups start beside the primary, not once it is ready: standbys are never ready.
            "podManagementPolicy": "Parallel" if ha else "OrderedReady",
            # A rolling update would run two Slurm releases against one state folder, and the
            # state-guard would copy it while a peer writes it: with backups every pod is replaced
            # only when deleted, all of them together (docs/how-to/ha.md, upgrades).
            "updateStrategy": {"type": "OnDelete" if ha else "RollingUpdate"},
            "template": pod,
        },
    )


def backup_claims(spec: ClusterSpec) -> list[Manifest]:
    """The state snapshot's volume while slurm.upgradeFrom is set (sunk.manifests.upgrade), which
    also holds the state guards' turns with backups."""
    if not upgrade.guarded(spec):
        return []
    storage = spec.controller.state_storage
    # With backups every controller pod mounts it (one state guard copies, the others read that
    # the copy exists), on Nodes of their own: the state's ReadWriteMany class.
    mode = "ReadWriteMany" if spec.controller.ha else "ReadWriteOnce"
    return [upgrade.backup_claim(spec, COMPONENT, storage.size, storage.storage_class, mode)]


def controller_manifests(spec: ClusterSpec, refs: AuthRefs) -> list[Manifest]:
    return [
        state_claim(spec),
        *backup_claims(spec),
        headless_service(spec),
        disruption_budget(spec),
        *fence_access(spec),
        statefulset(spec, refs),
    ]
