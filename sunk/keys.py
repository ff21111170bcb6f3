"""Every label, annotation, condition type and key name sunk writes or reads, in one place, under
one prefix (`slurm.sunk.dev/`, the NodeSet API group). Object names live in sunk.naming.

Migration from the releases that also used `sunk.dev/` (LEGACY): Pulumi relabels its objects in
place on the next `up` (selectors use only app.kubernetes.io labels, so nothing is replaced); the
renamed pod-template annotation (config-hash) restarts each Deployment and StatefulSet once, and
slurmd pods roll through the operator (drained first) because their template changes. Readers
accept the legacy spelling where an old object may still carry it: a tenant namespace's label
(the operator's policy) and the pod reference in a Slurm node's `extra` (the syncer rewrites it)."""

from __future__ import annotations

DOMAIN = "slurm.sunk.dev"
PREFIX = f"{DOMAIN}/"
OWN_DOMAIN = "sunk.dev"
"""Every key whose prefix is this domain or one under it is sunk's: today's PREFIX, the legacy
`sunk.dev/` spelling, and any it may add."""


def is_sunks(key: str) -> bool:
    """Whether a label or annotation key is under sunk's own domain (slurm.sunk.dev/, the legacy
    sunk.dev/, or any other subdomain of sunk.dev): users may neither set nor shadow those."""
    prefix, slash, _ = key.rpartition("/")
    return bool(slash) and (prefix == OWN_DOMAIN or prefix.endswith("." + OWN_DOMAIN))


# --- the recommended Kubernetes labels, on every object --------------------------------------
APP_NAME = "app.kubernetes.io/name"
APP_INSTANCE = "app.kubernetes.io/instance"
APP_COMPONENT = "app.kubernetes.io/component"
APP_PART_OF = "app.kubernetes.io/part-of"
APP_MANAGED_BY = "app.kubernetes.io/managed-by"

# --- sunk's labels ------------------------------------------------------------------------------
TENANT = PREFIX + "tenant"
"""Every object of a tenant's cluster, and the tenant namespaces the operator serves (sunk.policy)."""
CLUSTER = PREFIX + "cluster"
"""Every object of one Slurm cluster, slurmd pods included."""
NODESET = PREFIX + "nodeset"
"""NodeSet objects, their slurmd pods, Services and PodDisruptionBudgets."""
NODE = PREFIX + "node"
"""A slurmd pod's Slurm node name, also its hostname (its PodDisruptionBudget selects it)."""
RESOURCE_MODE = PREFIX + "resource-mode"
"""On every slurmd pod: its NodeSet's resourceMode, exclusive or shared (sunk.spec.nodeset). The sunk
scheduler reads it from the slurmd pod of a Slurm node and never binds a pod to the Node of an
`exclusive` one."""
METRICS = PREFIX + "metrics"
"""Services the ServiceMonitor scrapes."""
SHARED = PREFIX + "shared"
"""The NoSchedule taint (`slurm.sunk.dev/shared=true`) of the shared NodeSets' Nodes where pods of
opted-in namespaces run (docs/how-to/inference.md): the default scheduler places no pod there that
does not tolerate it, so a pod the webhook missed stays Pending; the sunk scheduler's Bindings pass
it (the kubelet enforces NoExecute taints only). Shared NodeSets' slurmd pods tolerate it."""
SHARED_TOLERATION = {"key": SHARED, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
MAINTAINED_BY = PREFIX + "maintained-by"
"""ConfigMaps a controller keeps up to date after Pulumi created them (topology.conf)."""

# --- annotations ----------------------------------------------------------------------------
SSSD_HASH = PREFIX + "sssd-hash"
"""Pod templates with the sssd sidecar: sssd.conf's hash; a change rolls the pods (sssd reads its
file once)."""
CONFIG_HASH = PREFIX + "config-hash"
"""Pod templates and slurmd pods: what a reconfigure cannot apply; a change replaces the pods."""
TEMPLATE_HASH = PREFIX + "template-hash"
"""slurmd pods: everything the pod was built from; a change is a rolling update."""
ORDINAL = PREFIX + "ordinal"
KUBE_NODE = PREFIX + "kube-node"
"""all-matching-nodes slurmd pods: the Kubernetes Node the pod was made for."""
GRES_CONF = PREFIX + "gres-conf"
"""all-matching-nodes slurmd pods with gpus.fromNodeLabels: the node's own gres.conf, from its
Node's GPU feature discovery labels, projected to /etc/slurm/gres.conf."""
SLURM_FILE = PREFIX + "slurm-file"
"""Per-file ConfigMaps: the file's path under /etc/slurm (the ConfigMap's key is only its name)."""
S6_SERVICE_PREFIX = f"s6.{DOMAIN}/"
"""slurmd pods: one annotation per s6 service script (`s6.slurm.sunk.dev/<name>`)."""
S6_ONESHOT_PREFIX = f"s6-oneshot.{DOMAIN}/"
"""slurmd pods: one annotation per s6 one-shot script (`s6-oneshot.slurm.sunk.dev/<name>`)."""
CORDON_REASON = PREFIX + "cordon-reason"
"""On a Node an admin cordons: text that becomes part of the Slurm drain reason."""
SLURM_STATE = PREFIX + "slurm-state"
"""slurmd pods (syncer): idle, allocated, mixed, drain, down, future, unknown, error or missing."""
SLURM_STATE_DETAIL = PREFIX + "slurm-state-detail"
"""slurmd pods (syncer): Slurm's full state joined as sinfo does (IDLE+DRAIN)."""
SLURM_REASON = PREFIX + "slurm-reason"
"""slurmd pods (syncer): Slurm's reason, only while the node is drained or down."""
LEGACY_NODE_DRAIN = PREFIX + "slurm-drain"
"""The Node annotation every tenant's syncer wrote before keys were per tenant; the syncer removes it."""
LEGACY_NODE_CONDITION = "SlurmDrain"
"""The Node condition every tenant's syncer wrote before keys were per tenant; the syncer removes it."""
GENERATED_BY = PREFIX + "generated-by"
"""Secrets the in-cluster key generator made (sunk.manifests.keygen): `keygen`."""
MADE_AT_DEPLOY = PREFIX + "made-at-deploy"
"""A rendered Secret's keys whose values Pulumi generates at deploy time (comma-separated): the
render leaves them out, so applying it never installs a placeholder a daemon would take."""
TOPOLOGY_WRITTEN = PREFIX + "topology-written"
"""The topology ConfigMap: when the operator last changed its text (UTC, ISO 8601)."""
TOPOLOGY_RECONFIGURED = PREFIX + "reconfigured"
"""The topology ConfigMap: hash of the text and registered nodes the last reconfigure covered."""

# Scheduler: requests a pod (or its Namespace) makes, and what the scheduler writes on binding.
PARTITION = PREFIX + "partition"
QOS = PREFIX + "qos"
ACCOUNT = PREFIX + "account"
TIME_LIMIT = PREFIX + "time-limit"
"""A Slurm time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED."""
NICE = PREFIX + "nice"
"""Slurm nice (-2147483645..2147483645); lower runs first."""
PRIORITY = PREFIX + "priority"
"""Admin priority: a fixed job priority (the scheduler's Slurm user must be an operator)."""
GPU_TYPE = PREFIX + "gpu-type"
"""GRES type, e.g. h100: `--gres=gpu:h100:N` instead of `--gres=gpu:N`."""
GPUS = PREFIX + "gpus"
"""GPUs per pod counted by Slurm alone (1..64), instead of an `nvidia.com/gpu` request: the device
plugin then never picks devices for the pod, and the container gets exactly Slurm's GPUs through
NVIDIA_VISIBLE_DEVICES from `gpu-indices` (the NVIDIA container runtime's environment-variable
device selection). Setting both is refused."""
# All-or-nothing groups (pod annotations only).
GROUP = PREFIX + "group"
"""Pods of one namespace sharing this value are placed together by one Slurm job, or not at all."""
GROUP_SIZE = PREFIX + "group-size"
"""How many pods the group has; the job is submitted once that many are pending."""
GROUP_START = PREFIX + "group-start"
"""`first-member`: the group's job (all group-size nodes) is submitted as soon as one member is
pending, and later members are bound to its free nodes as they come. For controllers that create
the rest of a group only once its first pod runs (LeaderWorkerSet's LeaderReady, JobSet's
InOrder): waiting for every member would wait for ever. Default: every member pending first."""
# Written by the scheduler at binding time.
JOB_ID = PREFIX + "job-id"
SLURM_NODE = PREFIX + "slurm-node"
JOB_START = PREFIX + "job-start"
"""The job's start time (epoch seconds) when the pod was bound: a requeued job restarts later.
Empty for an allocation granted on a node the scheduler named, which was not read back (never
requeued: runtime/scheduler/room.py)."""
GPU_INDICES = PREFIX + "gpu-indices"
"""The GPU indices Slurm allocated to the job on this pod's node, e.g. "0,1" (GRES IDX, the
order of gres.conf's File= devices: /dev/nvidia0, /dev/nvidia1). Absent when the job has no GPUs."""

# Slurm node `extra` (JSON): which pod runs the node's slurmd.
POD_REF = PREFIX + "pod"
POD_REF_UID = PREFIX + "pod-uid"

# --- condition types ------------------------------------------------------------------------
SLURM_NODE_READY = "SlurmNodeReady"
"""slurmd pods (syncer): True when Slurm may start jobs on the node."""
READY = "Ready"
PODS_FIT = "PodsFit"
SPEC_VALID = "SpecValid"
TEMPLATE_VALID = "TemplateValid"
SLURM_REACHABLE = "SlurmReachable"
CONFIG_FOUND = "ConfigFound"
POLICY_ALLOWED = "PolicyAllowed"
"""NodeSets: False while the operator's tenant policy refuses the NodeSet (reason PolicyViolation)."""
TENANT_PREFIX = f"tenants.{DOMAIN}"
"""Keys on shared Nodes are per tenant: `<namespace>.tenants.slurm.sunk.dev/<name>`."""


def tenant_key(namespace: str, name: str) -> str:
    """A key one tenant owns on an object all tenants share (a Kubernetes Node); a namespace is
    a DNS label, so the prefix is a valid DNS subdomain."""
    return f"{namespace}.{TENANT_PREFIX}/{name}"


# --- the local cluster's Nodes (runtime/local/inventory.py) -------------------------------------
LOCAL_POOL = PREFIX + "local-pool"
"""Label of a local cluster's Node: `system`, or the NodeSet object whose pool it is."""
LOCAL_COMPUTE = PREFIX + "local-compute"
"""PreferNoSchedule taint of a local cluster's compute Nodes (value: the NodeSet object)."""
LOCAL_DEVICES = PREFIX + "local-devices"
"""Annotation of a local cluster's Node: its GPUs' device files, comma-separated."""

# --- Secret and ConfigMap keys ----------------------------------------------------------------
MUNGE_KEY = "munge.key"
SLURM_KEY = "slurm.key"
JWT_KEY = "jwt_hs256.key"
PULUMI_SKIP_AWAIT = "pulumi.com/skipAwait"
"""Pulumi's Kubernetes provider registers the object without waiting for it to be ready: on the
controller StatefulSet with backups, whose standbys are never Ready (only the primary passes the
readiness probe), so the provider's wait (readyReplicas = replicas) would time out every `pulumi up`."""
LOCAL_PROVISIONER = PREFIX + "local-host-path"
"""The provisioner of the local cluster's StorageClasses on the real control plane
(runtime/local/provisioner.py), and its volumes' `pv.kubernetes.io/provisioned-by`."""
DB_PASSWORD = "password"
DB_ROOT_PASSWORD = "root-password"

# Kubernetes' own keys on a Job's pods (Kubernetes v1.36.3, k8s.io/api v0.36.3 batch/v1/types.go):
# the webhook recognises an indexed Job's pods by them, and the local cluster's Job controller sets them.
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
"""Annotation and label of an Indexed Job's pod: its index (JobCompletionIndexAnnotation, line 34)."""
JOB_NAME = "batch.kubernetes.io/job-name"
"""Label of a Job's pod: the Job's name (JobNameLabel, line 48)."""
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
"""Label of a Job's pod: the Job's uid (ControllerUidLabel, line 51)."""

LEGACY = {
    TENANT: "sunk.dev/tenant",
    CLUSTER: "sunk.dev/cluster",
    NODESET: "sunk.dev/nodeset",
    METRICS: "sunk.dev/metrics",
    MAINTAINED_BY: "sunk.dev/maintained-by",
    CONFIG_HASH: "sunk.dev/config-hash",
    SLURM_FILE: "sunk.dev/slurm-file",
    POD_REF: "sunk.dev/pod",
    POD_REF_UID: "sunk.dev/pod-uid",
}
"""Each key -> its spelling before the single prefix, for readers of objects written then."""
