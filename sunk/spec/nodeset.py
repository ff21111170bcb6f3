"""NodeSet: a group of identical slurmd pods. The same model is the NodeSet CRD's spec."""

from __future__ import annotations

import math
import re
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from sunk.images import DEFAULT_ARCH, Arch
from sunk.kubefit import parse_quantity
from sunk.problem import Problem, Problems
from sunk.spec.base import (
    DnsLabel,
    Feature,
    Image,
    Model,
    PositiveQuantity,
    Quantity,
    ResourceList,
    Resources,
    SlurmName,
    _matcher,
    dns_label,
    quantity_value,
    resources,
)
from sunk.spec.capacity import INSTANCE_TYPES, Available, cpu_text
from sunk.spec.pod import PodRole, PodSettings, Toleration, VolumeSpec
from sunk.spec.slurmtext import MAX_U32

MAX_GPUS_PER_NODE = 16
ARCH_LABEL = "kubernetes.io/arch"
"""The Node label every kubelet sets to its GOARCH (amd64, arm64)."""


SlurmCount = Annotated[int, Field(gt=0, le=65533)]
"""CPUs, sockets, cores and threads: Slurm keeps each in 16 bits (65534 and up mean "unset")."""
S6_ANNOTATION_BYTES = 200_000
"""s6 scripts ride in pod annotations (256 KiB in all); the rest is left for sunk's and users'."""
POD_ANNOTATION_BUDGET = 250_000
"""Of the API server's 262144 bytes of annotations per pod, what s6 scripts and podAnnotations
may take together; the rest is sunk's (hashes, ordinal, Node)."""
MAX_MEMORY_MIB = 2**40
"""1 EiB: Kubernetes quantities stop at 2**63 bytes, far above any node."""


def _extended_resource(name: str) -> str:
    """A Kubernetes extended resource name: <domain>/<name>, not under kubernetes.io."""
    prefix, _, short = name.rpartition("/")
    ok = (
        bool(prefix)
        and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", prefix) is not None
        and len(prefix) <= 253
        and not (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"))
        and re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", short) is not None
        and len(short) <= 63
    )
    if not ok:
        raise ValueError(
            f"{name!r} is not an extended resource name: <domain>/<name> such as nvidia.com/gpu, the domain a "
            "DNS subdomain outside kubernetes.io"
        )
    return name


class GpuSpec(Model):
    """GPUs per node, exposed to Slurm as GRES `gpu:<type>:<count>` (https://slurm.schedmd.com/gres.html)."""

    type: Annotated[str, _matcher(r"[a-z0-9][a-z0-9_]*", "a lowercase GRES type such as h100 or a100_80g", 32)]
    """GRES type, e.g. h100. Required."""
    count: Annotated[int, Field(ge=1, le=MAX_GPUS_PER_NODE)]
    """GPUs per node (1-16). Required."""
    resource_name: Annotated[str, AfterValidator(_extended_resource)] = "nvidia.com/gpu"
    """Kubernetes extended resource requested by each slurmd pod. Default: nvidia.com/gpu."""
    device_pattern: Annotated[str, _matcher(r"/dev/[A-Za-z0-9_-]+", "a device prefix such as /dev/nvidia")] = (
        "/dev/nvidia"
    )
    """Device file prefix; gres.conf gets File=<prefix>[0-N]. Default: /dev/nvidia."""
    autodetect: Literal["off", "nvml"] = "off"
    """`nvml`: gres.conf gets `AutoDetect=nvml` and slurmd finds each GPU's device file, type,
    cores and links through NVML (the slurmd image ships Debian's slurm-wlm-nvml-plugin; the
    NVIDIA container toolkit mounts libnvidia-ml.so.1). Needed for MIG. Without an NVIDIA driver
    slurmd falls back to the File= lines (see the docs' GPU NodeSets page). Default: off."""
    shards_per_gpu: Annotated[int, Field(ge=0, le=128)] = 0
    """Slurm shards (https://slurm.schedmd.com/gres.html#Sharding): each GPU also counts as this many
    `shard` GRES, so jobs can share a GPU (`--gres=shard:N`). Default: 0 (no shards)."""
    from_node_labels: bool = False
    """mode all-matching-nodes: the operator reads the Node's GPU feature discovery labels
    (nvidia.com/gpu.product, nvidia.com/gpu.count, nvidia.com/mig.strategy and
    nvidia.com/mig-<profile>.count, nvidia.com/gpu.replicas) when it builds the node's slurmd pod,
    and registers what they say: GPU type and count, MIG profiles as types, shards from the
    time-slicing replicas. A Node without the labels gets type and count from this spec.
    Default: false."""


class EnvVar(Model):
    """An environment variable of a sidecar."""

    name: Annotated[str, _matcher(r"[A-Za-z_][A-Za-z0-9_]*", "a letter or '_', then letters, digits, '_'")]
    """Required."""
    value: str = ""
    """Default: empty."""


class Sidecar(Model):
    """An extra container in each slurmd pod."""

    name: DnsLabel
    """Container name; not slurmd, munge or init. Required."""
    image: Image
    """Required."""
    command: list[str] = []
    """Entrypoint override. Default: the image's."""
    args: list[str] = []
    """Default: the image's."""
    env: list[EnvVar] = []
    """Default: none."""
    resources: Resources = resources("50m", "64Mi", "256Mi")
    """Default: requests 50m/64Mi, limit 256Mi memory."""


def _max_unavailable(value: int | str) -> int | str:
    """A count from 1 to 100000 or a percentage from 1% to 100%."""
    ok = 1 <= value <= 100_000 if isinstance(value, int) else re.fullmatch(r"(100|[1-9][0-9]?)%", value) is not None
    if not ok:
        raise ValueError(f"{value!r} is not valid: a count from 1 to 100000 or a percentage from 1% to 100%")
    return value


class UpdateStrategy(Model):
    """How the operator replaces pods when the template changes."""

    type: Literal["RollingUpdate", "OnDelete"] = "RollingUpdate"
    """`RollingUpdate`: the operator drains outdated pods, at most maxUnavailable at a time, and
    replaces each once idle. `OnDelete`: it never replaces an outdated pod; one someone deletes
    (`kubectl delete pod`, a node upgrade) comes back with the new template, and status.outdated
    counts those still waiting (as a StatefulSet's OnDelete). Default: RollingUpdate."""
    max_unavailable: Annotated[int | str, AfterValidator(_max_unavailable)] = 1
    """Pods drained and replaced at once: a count or a percentage. RollingUpdate only. Default: 1."""
    force: bool = False
    """Replace pods without waiting for their jobs to finish. RollingUpdate only. Default: false."""
    maintenance_reservation: SlurmName | None = None
    """A Slurm reservation (https://slurm.schedmd.com/reservations.html) that holds the rolling
    update to a maintenance window: an outdated pod is replaced only while that reservation is
    active, has the MAINT flag and lists its node (`scontrol create reservation
    ReservationName=maint-cpu Flags=MAINT,IGNORE_JOBS Nodes=cpu-[0-7] StartTime=... Duration=...`);
    outside it updates wait (status.outdated counts them). RollingUpdate only. Default: none
    (update at once)."""

    @model_validator(mode="after")
    def _on_delete(self) -> UpdateStrategy:
        if self.type == "OnDelete":
            given = [f for f in ("max_unavailable", "force", "maintenance_reservation") if f in self.model_fields_set]
            if given:
                name = {
                    "max_unavailable": "maxUnavailable",
                    "force": "force",
                    "maintenance_reservation": "maintenanceReservation",
                }[given[0]]
                raise Problems([Problem(f"{name}", "only with type RollingUpdate (OnDelete replaces no pod itself)")])
        return self


class PowerSpec(Model):
    """Scale to zero that Slurm sees: the NodeSet's `maxNodes` nodes are in slurm.conf as CLOUD
    nodes (`sinfo` shows them `idle~`, powered down, and a job needing more is refused at submit),
    and Slurm's power saving decides which run: a job pending for them powers nodes up, the
    operator sees that in Slurm and creates their pods; a node idle for `suspendTime` is powered
    down, and the operator deletes its pod (Slurm powers down idle nodes only, so no job is lost)
    (https://slurm.schedmd.com/power_save.html)."""

    min_nodes: Annotated[int, Field(ge=0, le=100_000)] = 0
    """Nodes kept running even when idle (the first ones, `<nodeset>-0` up; Slurm SuspendExcNodes).
    Default: 0."""
    suspend_time: Annotated[int, Field(ge=10, le=31_536_000)] = 600
    """Seconds a node stays idle before Slurm powers it down and its pod goes (SuspendTime; one
    value for the cluster: every NodeSet with `power` must agree). Default: 600."""
    resume_timeout: Annotated[int, Field(ge=30, le=86_400)] = 900
    """Seconds from Slurm powering a node up to its slurmd registering (image pull, scheduling,
    start): later, Slurm marks the node DOWN and requeues its job (ResumeTimeout; one value for the
    cluster). Default: 900."""


RESERVED_CONTAINERS = frozenset({"slurmd", "munge", "init"})

ResourceMode = Literal["exclusive", "shared"]
SHARED_FEATURE = "sunk_shared"
"""Slurm feature of every node of a `shared` NodeSet: the sunk scheduler can submit its placeholder
jobs with `--constraint=sunk_shared`, so Slurm never gives it a node of an exclusive NodeSet in a
partition that mixes both. Reserved: a NodeSet cannot list it in `features`."""
SLURMD_OVERHEAD = ResourceList(cpu="500m", memory="1Gi")
"""What slurmd, slurmstepd and the s6 services use of their own on a busy node (slurmd idles near
50m and 100Mi; slurmstepd adds a few MiB per step, and a node running dozens of steps with
pyxis/enroot imports peaks around 1Gi)."""
SLURMD_MEMORY_HEADROOM_MIB = 1024
"""Above RealMemory in the memory limit: slurmd, slurmstepd and munged live in the same pod as
the jobs, and a limit equal to RealMemory would OOM-kill the pod when a job uses all of it."""
MUNGE_RESOURCES = resources("10m", "32Mi", "128Mi")
"""The munged sidecar of every auth/munge slurmd pod. The admission check counts it for auth/slurm
pods too (10m and 32Mi too many): the NodeSet spec does not know the cluster's auth type."""
SSSD_RESOURCES = resources("20m", "64Mi", "256Mi")
"""The sssd sidecar of slurmd pods in a cluster with auth.ldap (the cluster spec adds it to the
admission check: a NodeSet alone does not know about LDAP)."""


class NodeAllocatable(Model):
    """What one slurmd pod may request on an otherwise empty Node of this NodeSet: the Nodes'
    `status.allocatable` (`kubectl get node <n> -o jsonpath='{.status.allocatable}'`) minus the
    requests of the DaemonSet pods there (https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/)."""

    cpu: PositiveQuantity
    """CPUs, e.g. `126` or `126500m`. Required."""
    memory: PositiveQuantity
    """Memory, e.g. `1900Gi` (quantities as `kubectl` prints them, such as `2063891028Ki`). Required."""
    gpus: Annotated[int, Field(ge=0, le=1024)] = 0
    """GPUs of the NodeSet's `gpus.resourceName`. Default: 0."""


class NodeSetSpec(PodSettings):
    """A group of identical Slurm compute nodes, one slurmd pod each (https://slurm.schedmd.com/slurm.conf.html#SECTION_NODE-CONFIGURATION).
    Its pod settings (sunk.spec.pod.PodSettings: nodeSelector, tolerations, affinity, volumes,
    env and securityContext of slurmd, ...) reach the slurmd pods through the NodeSet object and
    the operator's pod builder."""

    POD_ROLE: ClassVar[PodRole] = "compute"

    name: Annotated[str, dns_label(40)]
    """NodeSet name; also its Slurm feature and the prefix of its pods. Required."""
    mode: Literal["replicas", "all-matching-nodes"] = "replicas"
    """`replicas`: a fixed number of pods with stable ordinals (like a StatefulSet);
    `all-matching-nodes`: one pod per matching Kubernetes Node (like a DaemonSet). Default: replicas."""
    replicas: Annotated[int, Field(ge=0, le=10_000)] | None = None
    """Pods in `replicas` mode; must be unset in all-matching-nodes. Default: 1 in replicas mode."""
    max_nodes: Annotated[int, Field(ge=1, le=100_000)] = 256
    """Upper bound on this NodeSet's Slurm nodes, in either mode: its share of slurm.conf's MaxNodeCount.
    Scaling replicas up to it changes no slurm.conf line, so it rolls nothing; changing it restarts
    slurmctld (a reconfigure that changes MaxNodeCount kills slurmctld). Default: 256."""
    instance_type: str | None = None
    """A known node shape (H100x8, A100x8, ...) to check CPUs, memory and GPUs against. Default: none."""
    architecture: Arch = DEFAULT_ARCH
    """CPU architecture of this NodeSet's Nodes: `amd64` or `arm64`. Picks the slurmd image built for
    it (tag suffix `-arm64`) and adds `kubernetes.io/arch: <architecture>` to the pods' nodeSelector
    (https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-arch). An image set
    in the stack (`image`, images.slurmd) is used as given and must run on it. Default: amd64."""
    cpus: SlurmCount
    """Slurm CPUs per node. Required."""
    sockets: SlurmCount | None = None
    """Default: unset (Slurm infers)."""
    cores_per_socket: SlurmCount | None = None
    """Default: unset."""
    threads_per_core: SlurmCount | None = None
    """Default: unset."""
    memory_mib: Annotated[int, Field(gt=0, le=MAX_MEMORY_MIB)]
    """Slurm RealMemory in MiB. Required."""
    gpus: GpuSpec | None = None
    """Default: none."""
    features: list[Feature] = []
    """Extra Slurm features; the NodeSet name is always one. Default: none."""
    weight: Annotated[int, Field(ge=1, le=65533)] = 1
    """Slurm node Weight: lower is scheduled first. Default: 1."""
    sidecars: list[Sidecar] = []
    """Extra containers in each slurmd pod. Default: none."""
    s6_oneshots: dict[DnsLabel, str] = {}
    """One-shot scripts (name -> script starting with '#!'), at /etc/cont-init.d/<name>: the slurmd
    image's sunk-init runs them to completion, in name order, before the s6 services and slurmd;
    one failing stops the slurmd container (the kubelet restarts it). Default: none."""
    s6_scripts: dict[DnsLabel, str] = {}
    """s6 services (name -> run script starting with '#!'), at /etc/services.d/<name>/run: the
    slurmd image's sunk-init supervises them beside slurmd with Debian's s6, restarting one that
    exits. Default: none."""
    image: Image | None = None
    """slurmd image override. Default: cluster images.slurmd."""
    resource_mode: ResourceMode = "exclusive"
    """How the slurmd pod shares its Node with other pods
    (https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/).
    `exclusive`: the slurmd pod requests what Slurm hands to jobs (cpus, memoryMib and
    `gpus.count` of `gpus.resourceName`), so no other pod can take it, and the sunk scheduler never
    places pods on the Node. `shared`: the slurmd pod requests only slurmd's own overhead
    (slurmdOverhead) and no GPUs, with no CPU limit and a memory limit of memoryMib plus 1 GiB
    (jobs run in its cgroup); the device plugin's GPUs stay free for pods, and Slurm's accounting
    of the node keeps Slurm jobs and the pods the sunk scheduler places there through Slurm apart.
    Default: exclusive, because it is correct with any scheduler: on a shared Node a pod placed by
    kube-scheduler (or any pod not placed through Slurm) takes CPUs, memory and GPUs Slurm still
    believes free. Choose shared where every pod on those Nodes goes through the sunk scheduler."""
    slurmd_overhead: ResourceList | None = None
    """resourceMode shared: the slurmd container's requests. Must be unset in exclusive mode.
    Default: 500m CPU, 1Gi memory."""
    node_allocatable: NodeAllocatable | None = None
    """What one pod may request on an otherwise empty Node of this NodeSet, checked against the
    slurmd pod's requests and, in either mode, the Slurm node (cpus, memoryMib, gpus): a kubelet
    rejects a pod whose requests do not fit. Overrides the figures of instanceType (see
    sunk.spec.capacity for how those are derived). Default: from instanceType, else unchecked."""
    resources: Resources | None = None
    """slurmd container resources, used as given in either mode. Default: derived from
    resourceMode, cpus, memoryMib and slurmdOverhead."""
    external_scaling: bool = False
    """Replicas are driven from outside the stack (`kubectl scale`, an HPA, KEDA) through the
    NodeSet's scale subresource: `replicas` is only the initial count and Pulumi never resets it.
    Replicas mode only. Default: false (the stack owns replicas)."""
    power: PowerSpec | None = None
    """Scale to zero through Slurm power saving (see PowerSpec): replicas follow Slurm's demand
    between `power.minNodes` and `maxNodes`; `replicas` and `externalScaling` must be unset.
    Replicas mode only. Default: none (a fixed replica count)."""
    slurmd_args: list[str] = []
    """Extra slurmd command-line options, appended after the ones sunk sets (`-D -Z -N <node>
    --conf ...`; https://slurm.schedmd.com/slurmd.html). Allowed: `-v` to `-vvvvv` (log detail),
    `-M` (mlock slurmd), `-s` (work in the log or spool folder), `-n <nice>` (-20..19),
    `-L <log file>`, and `--extra <text>` / `--extra=<text>` (the node's Extra field, e.g. JSON
    that `--extra` job filters match). Refused: what sunk sets (-D, -Z, -N, -f, --conf, -F,
    --conf-server) and what prints and exits (-C, -G, -V, -h). Default: none."""
    extra_node_conf: dict[str, str] = {}
    """Extra node-definition parameters for the `--conf` of this NodeSet's slurmd
    (https://slurm.schedmd.com/slurm.conf.html#SECTION_NODE-CONFIGURATION), e.g.
    `{CoreSpecCount: "2", MemSpecLimit: "4096"}`. Allowed keys: CoreSpecCount (cores kept for
    slurmd and the system, fewer than the node has), CpuSpecList (CPU ids kept likewise), MemSpecLimit
    (MiB kept, below memoryMib), CpuBind (none, socket, ldom, core, thread). What sunk renders from
    the spec is refused with the field that sets it (CPUs: cpus, RealMemory: memoryMib,
    Feature: features, ...). Values are one word: no space or '=', so nothing can be added to the
    line. Default: none."""
    update_strategy: UpdateStrategy = UpdateStrategy()
    """Default: maxUnavailable 1, no force."""
    tmp_disk_mib: Annotated[int, Field(ge=0, le=MAX_U32)] = 0
    """Slurm TmpDisk. Default: 0."""

    @model_validator(mode="after")
    def _rules(self) -> NodeSetSpec:
        """A NodeSet's own rules, phase by phase: how it scales (mode, power, replicas), its
        nodes' shape (CPU topology, instance type), what needs which mode, what Kubernetes would
        refuse at admission (one problem per field), the names it uses, what its pods carry
        (memory limit, scripts, annotations), and slurmd's arguments and node settings."""
        errors = self._scaling_problems() + self._shape_problems() + self._mode_problems()
        for problem in self.admission():  # one problem per field: the first says the most
            if problem.path not in {e.path for e in errors}:
                errors.append(problem)
        errors += self._name_problems() + self._carried_problems()
        errors += slurmd_args_problems(self.slurmd_args)
        errors += node_conf_problems(self)
        if errors:
            raise Problems(errors)
        return self

    def _scaling_problems(self) -> list[Problem]:
        """How it scales: mode, power, replicas and externalScaling agree; replicas within maxNodes."""
        errors: list[Problem] = []
        if self.mode == "all-matching-nodes" and self.replicas is not None:
            errors.append(Problem("replicas", "must be unset in mode all-matching-nodes (one pod per matching Node)"))
        if self.mode == "all-matching-nodes" and self.external_scaling:
            errors.append(Problem("externalScaling", "only in mode replicas (all-matching-nodes follows the Nodes)"))
        if self.power is not None:
            if self.mode == "all-matching-nodes":
                errors.append(Problem("power", "only in mode replicas (all-matching-nodes follows the Nodes)"))
            if self.replicas is not None:
                errors.append(
                    Problem("replicas", "must be unset with power (Slurm's demand sets the pods); drop replicas")
                )
            if self.external_scaling:
                errors.append(
                    Problem("externalScaling", "power already scales this NodeSet (Slurm's demand); drop one")
                )
            if self.gpus is not None and self.gpus.from_node_labels:
                errors.append(
                    Problem(
                        "gpus.fromNodeLabels",
                        "not with power: its CLOUD nodes are defined in slurm.conf, "
                        "GRES included, before any Node's labels are known; give gpus type and count",
                    )
                )
            if self.power.min_nodes > self.max_nodes:
                errors.append(Problem("power.minNodes", f"{self.power.min_nodes} exceeds maxNodes {self.max_nodes}"))
        replicas = self.desired_replicas
        if replicas is not None and replicas > self.max_nodes:
            errors.append(
                Problem(
                    "replicas",
                    f"{replicas} exceeds maxNodes {self.max_nodes} (this NodeSet's share of MaxNodeCount); "
                    f"raise maxNodes to at least {replicas}",
                )
            )
        return errors

    def _shape_problems(self) -> list[Problem]:
        """The nodes' shape: sockets*coresPerSocket*threadsPerCore is cpus; within the instance type."""
        errors: list[Problem] = []
        topo = (self.sockets, self.cores_per_socket, self.threads_per_core)
        if any(v is not None for v in topo):
            if None in topo:
                errors.append(Problem("sockets", "sockets, coresPerSocket and threadsPerCore go together"))
            else:
                s, c, t = (v or 1 for v in topo)
                if s * c * t != self.cpus:
                    errors.append(
                        Problem("cpus", f"{self.cpus} != sockets*coresPerSocket*threadsPerCore = {s * c * t}")
                    )
        if self.instance_type is not None:
            it = INSTANCE_TYPES.get(self.instance_type)
            if it is None:
                errors.append(
                    Problem(
                        "instanceType", f"{self.instance_type!r} is unknown; known: {', '.join(sorted(INSTANCE_TYPES))}"
                    )
                )
            else:
                if self.cpus > it.cpus:
                    errors.append(
                        Problem("cpus", f"{self.cpus} exceeds the {it.cpus} CPUs of instance type {self.instance_type}")
                    )
                if self.memory_mib > it.memory_mib:
                    errors.append(
                        Problem(
                            "memoryMib",
                            f"{self.memory_mib} exceeds the {it.memory_mib} MiB of instance type {self.instance_type}",
                        )
                    )
                if self.gpus is not None:
                    if self.gpus.count > it.gpus:
                        errors.append(
                            Problem(
                                "gpus.count",
                                f"{self.gpus.count} exceeds the {it.gpus} GPUs of instance type {self.instance_type}",
                            )
                        )
                    if it.gpu_type is not None and self.gpus.type != it.gpu_type:
                        errors.append(
                            Problem(
                                "gpus.type",
                                f"{self.gpus.type!r} but instance type {self.instance_type} has {it.gpu_type!r}",
                            )
                        )
        return errors

    def _mode_problems(self) -> list[Problem]:
        """Settings that only one mode uses: fromNodeLabels (all-matching-nodes), slurmdOverhead (shared)."""
        errors: list[Problem] = []
        if self.gpus is not None and self.gpus.from_node_labels and self.mode != "all-matching-nodes":
            errors.append(
                Problem(
                    "gpus.fromNodeLabels",
                    "only in mode all-matching-nodes (a replicas pod's Node is chosen after "
                    "the operator builds it, so its labels are unknown then)",
                )
            )
        if self.slurmd_overhead is not None and self.resource_mode == "exclusive":
            errors.append(
                Problem(
                    "slurmdOverhead",
                    "only used in resourceMode shared (an exclusive slurmd pod requests "
                    "cpus and memoryMib); drop it or set resourceMode: shared",
                )
            )
        return errors

    def _name_problems(self) -> list[Problem]:
        """The names it uses: the architecture selector, sidecar names, features."""
        errors: list[Problem] = []
        arch = self.node_selector.get(ARCH_LABEL)
        if arch is not None and arch != self.architecture:
            errors.append(
                Problem(
                    "nodeSelector",
                    f"{ARCH_LABEL} {arch} contradicts architecture {self.architecture}, which picks "
                    f"the image; set architecture: {arch} (it adds the selector) and drop this key",
                )
            )
        errors += _unique("sidecars", [s.name for s in self.sidecars], "name")
        errors += [
            Problem(f"sidecars[{i}].name", f"{s.name!r} is reserved for sunk's own containers")
            for i, s in enumerate(self.sidecars)
            if s.name in RESERVED_CONTAINERS
        ]
        errors += [
            Problem(f"features[{i}]", f"{f!r} repeats the NodeSet name, which is always a feature")
            for i, f in enumerate(self.features)
            if f == self.name
        ]
        errors += [
            Problem(f"features[{i}]", f"{f!r} is reserved for the nodes of shared NodeSets; set resourceMode: shared")
            for i, f in enumerate(self.features)
            if f == SHARED_FEATURE
        ]
        return errors

    def _carried_problems(self) -> list[Problem]:
        """What its pods carry: a memory limit over memoryMib, the s6 scripts and annotations within the pod's budget."""
        errors: list[Problem] = []
        limit = self.resources.limits.memory if self.resources is not None else None
        if limit is not None and parse_quantity(limit) < self.memory_mib * 2**20:
            # Jobs run inside the slurmd container's cgroup: a limit under RealMemory OOM-kills them
            # as soon as they use what Slurm gave them.
            errors.append(
                Problem(
                    "resources.limits.memory",
                    f"{limit} is below memoryMib {self.memory_mib} (the RealMemory Slurm "
                    f"hands to jobs in this container); use at least {self.memory_mib}Mi, or lower memoryMib",
                )
            )
        carried = sum(len(body.encode()) for body in (*self.s6_scripts.values(), *self.s6_oneshots.values()))
        if carried > S6_ANNOTATION_BYTES:
            # The scripts travel in the slurmd pod's annotations, which the API server caps at 256 KiB.
            errors.append(
                Problem(
                    "s6Scripts",
                    f"with s6Oneshots {carried} bytes; pod annotations carry them and hold at most 262144 "
                    f"in all, so at most {S6_ANNOTATION_BYTES} here",
                )
            )
        own = sum(len(k.encode()) + len(v.encode()) for k, v in self.pod_annotations.items())
        if carried + own > POD_ANNOTATION_BUDGET:
            # sunk's hashes and the s6 scripts share the slurmd pod's 256 KiB with podAnnotations.
            errors.append(
                Problem(
                    "podAnnotations",
                    f"{own} bytes beside {carried} of s6 scripts; the slurmd pod's annotations hold "
                    f"262144 in all, sunk's own included, so at most {POD_ANNOTATION_BUDGET - carried} here",
                )
            )
        errors += [
            Problem(f"s6Oneshots.{n}", "a one-shot script must start with '#!'")
            for n, body in self.s6_oneshots.items()
            if not body.startswith("#!")
        ]
        errors += [
            Problem(f"s6Scripts.{n}", "a run script must start with '#!'")
            for n, body in self.s6_scripts.items()
            if not body.startswith("#!")
        ]
        return errors

    def admission(self, extra: ResourceList | None = None) -> list[Problem]:
        """What a kubelet would reject: the slurmd pod's requests above what a Node gives one pod,
        or a Slurm node whose jobs (or the pods placed through them) could not fit beside it.
        `extra`: requests of a sidecar the cluster adds (sssd with auth.ldap)."""
        avail = self.available
        if avail is None:
            return []
        own_cpu, own_mem = self.pod_requests
        if extra is not None:
            own_cpu, own_mem = own_cpu + _millicores(extra.cpu), own_mem + _mib(extra.memory)
        slurmd = self.slurmd_resources.requests
        extra_cpu = own_cpu - _millicores(slurmd.cpu)
        extra_mem = own_mem - _mib(slurmd.memory)
        errors: list[Problem] = []
        of = f"a pod may request on {avail.source}"
        if self.resources is not None:
            cpu_field, mem_field = "resources.requests.cpu", "resources.requests.memory"
        elif self.resource_mode == "shared":
            cpu_field, mem_field = "slurmdOverhead.cpu", "slurmdOverhead.memory"
        else:
            cpu_field, mem_field = "cpus", "memoryMib"
        # The Slurm node must fit too: in exclusive mode beside the pod's other containers, in
        # shared mode beside the whole slurmd pod (a pod Slurm places here may ask for all of it).
        # One message per resource: the pod's own when it does not fit at all, unless the pod's
        # request is the Slurm node itself (exclusive, no resources), where "at most N" says more.
        beside_cpu, beside_mem = (extra_cpu, extra_mem) if self.resource_mode == "exclusive" else (own_cpu, own_mem)
        why = "munge and sidecars" if self.resource_mode == "exclusive" else "the slurmd pod"
        derived = self.resources is None and self.resource_mode == "exclusive"
        if own_cpu > avail.cpu_m and not derived:
            errors.append(
                Problem(
                    f"{cpu_field}",
                    f"the slurmd pod requests {cpu_text(own_cpu)} CPUs ({cpu_text(extra_cpu)} of them "
                    f"munge and sidecars), above the {cpu_text(avail.cpu_m)} {of}; a kubelet would reject it "
                    f"(OutOfcpu)",
                )
            )
        elif self.cpus * 1000 + beside_cpu > avail.cpu_m:
            most = (avail.cpu_m - beside_cpu) // 1000
            errors.append(
                Problem(
                    "cpus",
                    f"{self.cpus} plus {cpu_text(beside_cpu)} for {why} exceed the {cpu_text(avail.cpu_m)} CPUs "
                    f"{of} in resourceMode {self.resource_mode}; at most {most} fit",
                )
            )
        if own_mem > avail.memory_mib and not derived:
            errors.append(
                Problem(
                    f"{mem_field}",
                    f"the slurmd pod requests {own_mem} MiB ({extra_mem} of them munge and sidecars), "
                    f"above the {avail.memory_mib} MiB {of}; a kubelet would reject it (OutOfmemory)",
                )
            )
        elif self.memory_mib + beside_mem > avail.memory_mib:
            most = avail.memory_mib - beside_mem
            errors.append(
                Problem(
                    "memoryMib",
                    f"{self.memory_mib} plus {beside_mem} MiB for {why} exceed the {avail.memory_mib} MiB "
                    f"{of} in resourceMode {self.resource_mode}; at most {most} fit",
                )
            )
        if self.gpus is not None and self.gpus.count > avail.gpus:
            errors.append(
                Problem("gpus.count", f"{self.gpus.count} exceeds the {avail.gpus} {self.gpus.resource_name} {of}")
            )
        return errors

    @property
    def slurm_features(self) -> list[str]:
        """The node's Slurm features: the NodeSet name first (the operator recognises its nodes by
        it), then `features`, then sunk_shared in resourceMode shared."""
        return [self.name, *self.features, *([SHARED_FEATURE] if self.resource_mode == "shared" else [])]

    @property
    def available(self) -> Available | None:
        """What one pod may request on this NodeSet's Nodes: nodeAllocatable, else the instance
        type's derived figures, else None (unknown: nothing is checked)."""
        if self.node_allocatable is not None:
            a = self.node_allocatable
            return Available(_millicores(a.cpu), _mib(a.memory), a.gpus, "Nodes of the given nodeAllocatable")
        it = INSTANCE_TYPES.get(self.instance_type or "")
        if it is None:
            return None
        derived = it.available
        return Available(
            derived.cpu_m,
            derived.memory_mib,
            derived.gpus,
            f"{self.instance_type} Nodes (after kube-reserved, the eviction threshold and DaemonSets)",
        )

    @property
    def slurmd_resources(self) -> Resources:
        """The slurmd container's requests and limits (without extended resources)."""
        if self.resources is not None:
            return self.resources
        limits = ResourceList(memory=f"{self.memory_mib + SLURMD_MEMORY_HEADROOM_MIB}Mi")
        if self.resource_mode == "shared":
            return Resources(requests=self.slurmd_overhead or SLURMD_OVERHEAD, limits=limits)
        return Resources(requests=ResourceList(cpu=str(self.cpus), memory=f"{self.memory_mib}Mi"), limits=limits)

    @property
    def slurmd_extended(self) -> dict[str, int]:
        """Extended resources the slurmd container requests: the GPUs in exclusive mode only."""
        if self.gpus is None or self.resource_mode == "shared":
            return {}
        return {self.gpus.resource_name: self.gpus.count}

    @property
    def pod_requests(self) -> tuple[int, int]:
        """(millicores, MiB) the whole slurmd pod requests: slurmd, munge and the sidecars."""
        parts = [
            self.slurmd_resources.requests,
            MUNGE_RESOURCES.requests,
            *(s.resources.requests for s in self.sidecars),
        ]
        return sum(_millicores(r.cpu) for r in parts), sum(_mib(r.memory) for r in parts)

    @property
    def desired_replicas(self) -> int | None:
        """Pods wanted in replicas mode; None in all-matching-nodes."""
        if self.mode == "all-matching-nodes":
            return None
        if self.power is not None:
            return self.power.min_nodes  # at least; Slurm powers up more
        return 1 if self.replicas is None else self.replicas

    @property
    def pod_node_selector(self) -> dict[str, str]:
        """nodeSelector of the slurmd pods, sorted: kubernetes.io/arch of `architecture` and node_selector."""
        return dict(sorted({ARCH_LABEL: self.architecture, **self.node_selector}.items()))

    @property
    def node_bound(self) -> int:
        """Most Slurm nodes this NodeSet can have at once (replicas never exceed it)."""
        return self.max_nodes


SLURMD_OWN_ARGS = {
    "-D": "sunk runs slurmd in the foreground",
    "-Z": "sunk registers every node as a dynamic node",
    "-N": "the node name is the pod's (its hostname)",
    "-f": "slurm.conf is mounted at /etc/slurm",
    "--conf": "sunk renders it; add parameters with extraNodeConf",
    "-F": "features come from the NodeSet name and `features`",
    "--conf-server": "slurm.conf is mounted at /etc/slurm, not fetched",
    "-C": "it prints the node's configuration and exits",
    "-G": "it prints the node's GRES and exits",
    "-V": "it prints the version and exits",
    "--version": "it prints the version and exits",
    "-h": "it prints help and exits",
    "--help": "it prints help and exits",
    "--systemd": "pods have no systemd",
}
"""slurmd options sunk refuses in slurmdArgs -> why."""
_SLURMD_FLAGS = re.compile(r"-v{1,5}|-M|-s")
_SLURMD_VALUED = ("-n", "-L", "--extra")
_OWN_VALUED = ("-N", "-f", "--conf", "--conf-server")
_PRINTABLE = re.compile(r"[^\x00-\x1f\x7f]+")


def slurmd_args_problems(args: list[str]) -> list[Problem]:
    """Why `slurmdArgs` is refused: options sunk sets, options that exit, unknown options, or a
    value missing or out of range. argv words, never a shell line, so only the option matters."""
    errors: list[Problem] = []
    allowed = "-v..-vvvvv, -M, -s, -n <nice>, -L <file>, --extra <text>"
    i = 0
    while i < len(args):
        word = args[i]
        at = f"slurmdArgs[{i}]"
        i += 1
        option, eq, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        if option in SLURMD_OWN_ARGS or (option[:2] in SLURMD_OWN_ARGS and not option.startswith("--")):
            key = option if option in SLURMD_OWN_ARGS else option[:2]
            errors.append(Problem(f"{at}", f"{word!r} is not allowed: {SLURMD_OWN_ARGS[key]}"))
            if word in _OWN_VALUED:
                i += 1  # its value is part of the same refusal
            continue
        if _SLURMD_FLAGS.fullmatch(word):
            continue
        if option not in _SLURMD_VALUED:
            errors.append(Problem(f"{at}", f"{word!r} is not a slurmd option sunk passes; allowed: {allowed}"))
            continue
        if eq:
            value = attached
        elif i < len(args):
            value, i = args[i], i + 1
        else:
            errors.append(Problem(f"{at}", f"{option} needs a value after it"))
            continue
        if option == "-n" and not (re.fullmatch(r"-?[0-9]{1,2}", value) and -20 <= int(value) <= 19):
            errors.append(Problem(f"{at}", f"-n {value!r}: a nice value from -20 to 19"))
        elif option == "-L" and not re.fullmatch(r"/[A-Za-z0-9_./%-]+", value):
            errors.append(Problem(f"{at}", f"-L {value!r}: an absolute log file path"))
        elif not _PRINTABLE.fullmatch(value):
            errors.append(Problem(f"{at}", f"{option} {value!r}: printable characters, not empty"))
    return errors


NODE_CONF_EXTRA = {
    "CoreSpecCount": r"[1-9][0-9]{0,4}",
    "CpuSpecList": r"[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*",
    "MemSpecLimit": r"[1-9][0-9]{0,12}",
    "CpuBind": r"none|socket|ldom|core|thread",
}
"""Node-line parameters extraNodeConf may add -> the value Slurm takes."""
NODE_CONF_OWNED = {
    "nodename": "the pod (its hostname)",
    "nodeaddr": "the pod (its IP)",
    "nodehostname": "the pod (its hostname)",
    "port": "the cluster (SlurmdPort)",
    "state": "Slurm and the operator",
    "cpus": "cpus",
    "procs": "cpus",
    "boards": "sockets, coresPerSocket and threadsPerCore",
    "sockets": "sockets",
    "socketsperboard": "sockets",
    "corespersocket": "coresPerSocket",
    "threadspercore": "threadsPerCore",
    "realmemory": "memoryMib",
    "tmpdisk": "tmpDiskMib",
    "gres": "gpus",
    "feature": "features",
    "features": "features",
    "weight": "weight",
}
"""Node-line keys sunk renders (lower case, as Slurm matches them) -> the field that sets each."""


def node_conf_problems(ns: NodeSetSpec) -> list[Problem]:
    errors: list[Problem] = []
    known = {k.lower(): k for k in NODE_CONF_EXTRA}
    for key, value in ns.extra_node_conf.items():
        at = f"extraNodeConf.{key}"
        if key.lower() in NODE_CONF_OWNED:
            errors.append(Problem(f"{at}", f"sunk renders it from {NODE_CONF_OWNED[key.lower()]}; set that instead"))
            continue
        name = known.get(key.lower())
        if name is None:
            errors.append(Problem(f"{at}", f"not a node parameter sunk passes; allowed: {', '.join(NODE_CONF_EXTRA)}"))
            continue
        if name != key:
            errors.append(Problem(f"{at}", f"write it {name}"))
            continue
        if not re.fullmatch(NODE_CONF_EXTRA[name], value):
            errors.append(Problem(f"{at}", f"{value!r} is not valid; expected {NODE_CONF_EXTRA[name]}"))
            continue
        if name == "CoreSpecCount" and int(value) >= ns.cpus:
            errors.append(Problem(f"{at}", f"{value} cores kept would leave none of the {ns.cpus} CPUs for jobs"))
        if name == "MemSpecLimit" and int(value) >= ns.memory_mib:
            errors.append(Problem(f"{at}", f"{value} MiB kept would leave none of memoryMib {ns.memory_mib} for jobs"))
        if name == "CpuSpecList" and any(int(n) >= ns.cpus for n in re.findall(r"[0-9]+", value)):
            errors.append(
                Problem(f"{at}", f"{value!r} names a CPU id beyond the node's {ns.cpus} CPUs (0-{ns.cpus - 1})")
            )
    if {"CoreSpecCount", "CpuSpecList"} <= set(ns.extra_node_conf):
        errors.append(Problem("extraNodeConf.CpuSpecList", "give CoreSpecCount or CpuSpecList, not both"))
    return errors


def _millicores(q: str | None) -> int:
    return 0 if q is None else math.ceil(round(quantity_value(q) * 1000, 6))


def _mib(q: str | None) -> int:
    return 0 if q is None else math.ceil(round(quantity_value(q) / 2**20, 6))


def _unique(field: str, values: list[str], attr: str) -> list[Problem]:
    seen: dict[str, int] = {}
    errors: list[Problem] = []
    for i, v in enumerate(values):
        if v in seen:
            errors.append(Problem(f"{field}[{i}].{attr}", f"{v!r} repeats {field}[{seen[v]}]"))
        else:
            seen[v] = i
    return errors


__all__ = [
    "ARCH_LABEL",
    "INSTANCE_TYPES",
    "SHARED_FEATURE",
    "GpuSpec",
    "NodeAllocatable",
    "NodeSetSpec",
    "PowerSpec",
    "Quantity",
    "SlurmName",
    "Toleration",
    "VolumeSpec",
]
