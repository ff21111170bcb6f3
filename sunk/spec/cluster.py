"""ClusterSpec: one SUNK cluster for one tenant, the root of every stack's configuration."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field, model_validator

from sunk import naming
from sunk.images import DEFAULT_SLURM, PYXIS_VARIANT, Release, release_of, releases_where, supported_release
from sunk.problem import Problem, Problems
from sunk.spec.base import DnsLabel, Image, Model, dns_label
from sunk.spec.health import HealthCheckSpec
from sunk.spec.inference import InferenceSpec, inference_problems
from sunk.spec.keyuse import key_use_problems
from sunk.spec.limits import MAX_ACCOUNTS, MAX_NODESETS
from sunk.spec.nodeset import SSSD_RESOURCES, NodeSetSpec, _unique
from sunk.spec.pod import UserLabels, secret_references
from sunk.spec.scheduling import (
    AccountSpec,
    CgroupSpec,
    ContainersSpec,
    ExtraConfig,
    NamedTopologySpec,
    PartitionSpec,
    PyxisSpec,
    QosSpec,
    SchedulingSpec,
    ScriptsSpec,
    SharedVolumeSpec,
    TopologySpec,
    account_problems,
    mib_per_cpu,
    partition_problems,
    topologies_problems,
    topology_file_of,
)
from sunk.spec.services import (
    AccountingSpec,
    AuthSpec,
    ControllerSpec,
    Images,
    LoginSpec,
    MonitoringSpec,
    NetworkSpec,
    RestApiSpec,
    RuntimeSpec,
)
from sunk.spec.upgrade import upgrade_problems

BUILTIN_QOS = "normal"


RESERVED_NAMES = (
    "accounting",
    "auth",
    "controller",
    "dashboard",
    "jwt",
    "login",
    "mariadb",
    "operator",
    "restapi",
    "runtime",
    "scheduler",
    "sssd",
    "syncer",
    "topology",
)
"""sunk names its own objects `<cluster>-<one of these>[-...]` (the slurmctld Service and pod
`<cluster>-controller(-0)`, its state claim `<cluster>-controller-state`, `<cluster>-mariadb-data`,
...). A NodeSet's Service and pods (`<cluster>-<nodeset>`, `<cluster>-<nodeset>-0`) and a shared
volume's claim (`<cluster>-<volume>`) must not take one of those names."""
RESERVED_NAMESPACES = ("sunk-system", "default")
"""The operator's namespace, and `default`, where nothing of a tenant belongs; `kube-*` too."""


def _quoted(version: str) -> str:
    return f'"{version}"'


def _either(versions: list[str]) -> str:
    """`"26.05"`, or `"26.05" or "26.11"`: the releases a message offers (none: says so)."""
    return " or ".join(_quoted(v) for v in versions) or "(none sunk supports has it)"


def _reserved(name: str) -> str | None:
    return next((r for r in RESERVED_NAMES if name == r or name.startswith(f"{r}-")), None)


def reserved_name_problems(spec: ClusterSpec) -> list[Problem]:
    """Names that would collide with sunk's own objects, and namespaces no tenant may use."""
    problems = []
    listed = ", ".join(RESERVED_NAMES)
    for i, ns in enumerate(spec.nodesets):
        if (hit := _reserved(ns.name)) is not None:
            problems.append(
                Problem(
                    f"nodesets[{i}].name",
                    f"{ns.name!r} would take sunk's own {spec.name}-{hit} objects; "
                    f"a NodeSet name may not be or start with (followed by '-') any of: {listed}",
                )
            )
    for i, vol in enumerate(spec.shared_volumes):
        if vol.create is not None and (hit := _reserved(vol.name)) is not None:
            problems.append(
                Problem(
                    f"sharedVolumes[{i}].name",
                    f"{vol.name!r} would name its claim like sunk's own {spec.name}-{hit}...; "
                    f"a created shared volume's name may not be or start with (followed by '-') any of: {listed}",
                )
            )
    if spec.ns in RESERVED_NAMESPACES or spec.ns.startswith("kube-"):
        problems.append(
            Problem(
                "namespace",
                f"{spec.ns!r} is reserved (kube-*, {', '.join(RESERVED_NAMESPACES)}); "
                "give the cluster a namespace of its own",
            )
        )
    return problems


def contradiction_problems(spec: ClusterSpec) -> list[Problem]:
    """NodeSets whose settings contradict each other although each is valid alone, one check per
    kind of contradiction: a feature named like another NodeSet, a volume where a shared one
    mounts, oci.conf given twice, power settings Slurm holds once per cluster, and Nodes claimed
    twice in all-matching-nodes mode."""
    return [
        *_feature_problems(spec),
        *_volume_problems(spec),
        *_oci_problems(spec),
        *_power_problems(spec),
        *_matching_problems(spec),
        *_cgroup_problems(spec),
    ]


def _cgroup_problems(spec: ClusterSpec) -> list[Problem]:
    """GPUs that Slurm hands out (gres/gpu) but cgroup.conf doesn't fence: without the device
    constraint a job reaches every GPU of its node, those Slurm gave another job or a pod included."""
    gpus = [ns.name for ns in spec.nodesets if ns.gpus is not None]
    if not gpus:
        return []
    if spec.cgroup.plugin == "disabled":
        field, what = "cgroup.plugin", "disabled turns off every cgroup constraint"
    elif not spec.cgroup.constrain_devices:
        field, what = "cgroup.constrainDevices", "false leaves the GPU devices open"
    else:
        return []
    return [
        Problem(
            field,
            f"{what}, while NodeSets {', '.join(gpus)} have GPUs that Slurm allocates per job: each job would reach "
            "every GPU of its node; keep cgroup/v2 with constrainDevices true",
        )
    ]


def _feature_problems(spec: ClusterSpec) -> list[Problem]:
    problems = []
    names = {ns.name for ns in spec.nodesets}
    for i, ns in enumerate(spec.nodesets):
        for j, feature in enumerate(ns.features):
            if feature in names and feature != ns.name:
                # Partitions select a NodeSet's nodes by `NodeSet=<name> Feature=<name>`.
                problems.append(
                    Problem(
                        f"nodesets[{i}].features[{j}]",
                        f"{feature!r} is NodeSet {feature}'s name, so these nodes would "
                        f"join its partitions; choose a feature that names no NodeSet",
                    )
                )
    return problems


def _volume_problems(spec: ClusterSpec) -> list[Problem]:
    problems = []
    on_compute = {v.mount_path: v.name for v in spec.shared_volumes if "compute" in v.mount_on}
    for i, ns in enumerate(spec.nodesets):
        for j, vol in enumerate(ns.volumes):
            if vol.mount_path in on_compute:
                problems.append(
                    Problem(
                        f"nodesets[{i}].volumes[{j}].mountPath",
                        f"{vol.mount_path} is also where shared volume "
                        f"{on_compute[vol.mount_path]} mounts on compute; one path, one volume",
                    )
                )
    return problems


def _oci_problems(spec: ClusterSpec) -> list[Problem]:
    if spec.containers.enabled and "oci.conf" in spec.extra_config.files:
        return [
            Problem(
                "extraConfig.files.oci.conf",
                "containers.enabled renders oci.conf; drop one of them "
                "(set containers.enabled false to bring your own oci.conf)",
            )
        ]
    return []


def _power_problems(spec: ClusterSpec) -> list[Problem]:
    problems = []
    powered = [(i, ns.power) for i, ns in enumerate(spec.nodesets) if ns.power is not None]
    for at, power in powered[1:]:
        lead, lead_power = powered[0]
        for field, attr in (("suspendTime", "suspend_time"), ("resumeTimeout", "resume_timeout")):
            if getattr(power, attr) != getattr(lead_power, attr):
                problems.append(
                    Problem(
                        f"nodesets[{at}].power.{field}",
                        f"{getattr(power, attr)} differs from nodesets[{lead}]'s "
                        f"{getattr(lead_power, attr)}; Slurm 24.11 has one {field[0].upper() + field[1:]} for the cluster",
                    )
                )
    return problems


def _matching_problems(spec: ClusterSpec) -> list[Problem]:
    problems = []
    matching = [(i, ns.pod_node_selector) for i, ns in enumerate(spec.nodesets) if ns.mode == "all-matching-nodes"]
    for j, i in sorted(overlapping_selectors(matching)):
        # In all-matching-nodes mode the Slurm node is named after the Kubernetes Node.
        problems.append(
            Problem(
                f"nodesets[{j}].nodeSelector",
                f"like nodesets[{i}] ({spec.nodesets[i].name}), it matches every Node of "
                "all-matching-nodes mode that the other may match; one Node would run two slurmd with one "
                "Slurm node name (the Node's). Give them a nodeSelector key with different values",
            )
        )
    return problems


Selector = dict[str, str]


def _disjoint(x: Selector, y: Selector) -> bool:
    """No Node matches both: some key both select on has different values."""
    return any(k in y and y[k] != v for k, v in x.items())


def overlapping_selectors(items: list[tuple[int, Selector]]) -> list[tuple[int, int]]:
    """(j, i) for each selector j that a Node may match together with an earlier one, i the first
    such. Linear in the selectors' size in practice: a key every selector of a group has splits the
    group by its value (selectors with different values never overlap; the arch label is the
    first such key), and only what no shared key tells apart is compared pair by pair."""
    found: list[tuple[int, int]] = []
    groups: list[tuple[list[tuple[int, Selector]], frozenset[str]]] = [(items, frozenset())]
    while groups:
        group, used = groups.pop()
        if len(group) < 2:
            continue
        shared = set(group[0][1]) - used
        for _, selector in group[1:]:
            shared &= selector.keys()
            if not shared:
                break
        split = next((k for k in sorted(shared) if len({sel[k] for _, sel in group}) > 1), None)
        if split is None:
            found += _pairwise(group)
            continue
        by_value: dict[str, list[tuple[int, Selector]]] = {}
        for item in group:
            by_value.setdefault(item[1][split], []).append(item)
        groups += [(members, used | {split}) for members in by_value.values()]
    return found


def _pairwise(group: list[tuple[int, Selector]]) -> list[tuple[int, int]]:
    """What no shared key separates: each selector against the earlier ones until one overlaps
    (selectors with no key in common overlap at the first comparison)."""
    found = []
    for b, (j, y) in enumerate(group):
        hit = next((i for i, x in group[:b] if not _disjoint(x, y)), None)
        if hit is not None:
            found.append((j, hit))
    return found


class SlurmSpec(Model):
    """Which Slurm the cluster runs (https://slurm.schedmd.com/upgrades.html)."""

    version: Annotated[str, AfterValidator(supported_release)] = DEFAULT_SLURM
    """The Slurm release: its images (one family per release, tagged with its version) and the
    files written for it (docs/slurm-releases.md). Default: "26.05"; also "24.11". Quote it in
    YAML (26.05 unquoted is a number)."""
    upgrade_from: Annotated[str, AfterValidator(supported_release)] | None = None
    """The release the running cluster has, when a deploy changes `version`: "24.11" with
    version "26.05". `sunk validate` is offline and can't see the running cluster, so this is
    how a downgrade (refused: the newer slurmdbd and slurmctld have converted the database and
    the state files) or a jump of more than three releases is caught before anything changes;
    `sunk upgrade-plan` prints the steps (docs/upgrading.md). Default: none."""
    accept_job_loss: bool = False
    """Going back (upgradeFrom equal to version, after an upgrade), restore slurmctld's state
    snapshot even where jobs were submitted after it was taken, losing them: without it the
    state guard refuses that restore, naming the next job id of each (docs/upgrading.md). Only
    with upgradeFrom equal to version. Default: false."""

    @model_validator(mode="after")
    def _upgrade(self) -> SlurmSpec:
        problems = upgrade_problems(self.upgrade_from, self.version)
        if self.accept_job_loss and self.upgrade_from != self.version:
            problems.append(
                Problem(
                    "acceptJobLoss",
                    "is only for going back after an upgrade, with slurm.upgradeFrom equal to slurm.version "
                    f'(slurm: {{version: "{self.version}", upgradeFrom: "{self.version}", acceptJobLoss: true}}); '
                    f"here upgradeFrom is {'unset' if self.upgrade_from is None else repr(self.upgrade_from)}: remove acceptJobLoss",
                )
            )
        if problems:
            raise Problems(problems)
        return self


class ClusterSpec(Model):
    """A whole Slurm cluster in one Kubernetes namespace."""

    name: Annotated[str, dns_label(30)]
    """Slurm ClusterName and the prefix of every object. At most 30 characters. Required."""
    tenant: DnsLabel
    """Who the cluster belongs to; a label on every object. Required."""
    namespace: DnsLabel | None = None
    """Kubernetes namespace. Default: `<tenant>-<name>`."""
    create_namespace: bool = True
    """Create the namespace. Default: true."""
    slurm: SlurmSpec = SlurmSpec()
    """Which Slurm release the cluster runs. Default: 26.05."""
    images: Images = Images()
    """Container image per role. Default: the images sunk builds, ghcr.io/sunk-dev/<role>:<tag>."""
    controller: ControllerSpec = ControllerSpec()
    """slurmctld. Default: 10Gi state storage, no extra lines."""
    accounting: AccountingSpec = AccountingSpec()
    """slurmdbd. Default: enabled, in-cluster MariaDB."""
    restapi: RestApiSpec = RestApiSpec()
    """slurmrestd. Default: enabled, 1 replica."""
    login: LoginSpec = LoginSpec()
    """SSH login pods. Default: 1 replica behind a LoadBalancer."""
    auth: AuthSpec = AuthSpec()
    """Default: auth/munge with generated munge and JWT keys, no LDAP."""
    nodesets: Annotated[list[NodeSetSpec], Field(min_length=1, max_length=MAX_NODESETS)]
    """Groups of identical compute nodes; at least one, at most 1,000 (sunk.spec.limits). Required."""
    partitions: Annotated[list[PartitionSpec], Field(min_length=1)]
    """Slurm partitions over the nodesets; at least one. Required."""
    qos: list[QosSpec] = []
    """QOS created in accounting; `normal` always exists. Default: none."""
    accounts: Annotated[list[AccountSpec], Field(max_length=MAX_ACCOUNTS)] = []
    """Slurm accounts and their users, created in accounting; at most 30,000 (sunk.spec.limits).
    With accounting.enforce (the default) a user needs an association to run jobs. Default: none
    (only root)."""
    scheduling: SchedulingSpec = SchedulingSpec()
    """Default: preempt/qos with requeue, priority/multifactor."""
    topology: TopologySpec = TopologySpec()
    """One topology, in topology.conf (every release). Default: plugin none."""
    topologies: list[NamedTopologySpec] = []
    """Several named topologies (tree, block or flat), one the default, in topology.yaml: Slurm
    26.05 only, and instead of `topology`. A partition picks one with its `topology`.
    https://slurm.schedmd.com/topology.yaml.html Default: none."""
    cgroup: CgroupSpec = CgroupSpec()
    """Default: cgroup/v2 constraining cores, devices and RAM."""
    scripts: ScriptsSpec = ScriptsSpec()
    """Prolog, epilog and job_submit.lua. Default: none."""
    pyxis: PyxisSpec = PyxisSpec()
    """Pyxis in srun, with the pyxis variant of our slurmd and login images. Default: disabled."""
    containers: ContainersSpec = ContainersSpec()
    """OCI containers in job steps (oci.conf with crun). Default: disabled."""
    shared_volumes: list[SharedVolumeSpec] = []
    """Volumes mounted on several roles (home, datasets). Default: none."""
    extra_config: ExtraConfig = ExtraConfig()
    """Lines appended to cgroup.conf, gres.conf, topology.conf, plugstack.conf. Default: none."""
    labels: UserLabels = {}
    """Extra labels on every object (not sunk's keys: they select pods). Default: none."""
    monitoring: MonitoringSpec = MonitoringSpec()
    """ServiceMonitor and Grafana dashboard. Default: disabled."""
    runtime: RuntimeSpec = RuntimeSpec()
    """Pod settings and resources of the syncer and scheduler. Default: none added."""
    network: NetworkSpec = NetworkSpec()
    """NetworkPolicies from the role table, and where the Kubernetes API is. Default: rendered,
    the API anywhere on 443 and 6443."""
    health_check: HealthCheckSpec | None = None
    """Node health: sunk's HealthCheckProgram with built-in and the stack's own checks
    and Node conditions that drain through the syncer (sunk.spec.health). Default: none."""
    inference: InferenceSpec = InferenceSpec()
    """Namespaces whose pods (Deployments, Jobs, JobSets, LeaderWorkerSets as users deploy them)
    run on the shared pool under sunk's scheduler, each charged to a Slurm account, through an
    admission webhook (sunk.spec.inference). Default: none."""

    @property
    def ns(self) -> str:
        return self.namespace or naming.namespace(self.tenant, self.name)

    def nodeset(self, name: str) -> NodeSetSpec:
        return self._nodesets_by_name[name]

    @functools.cached_property
    def _nodesets_by_name(self) -> dict[str, NodeSetSpec]:
        return {n.name: n for n in self.nodesets}

    def def_mem_per_cpu(self, partition: PartitionSpec) -> int:
        """The partition's DefMemPerCPU: its own, else the smallest MiB per CPU of its nodesets."""
        if partition.def_mem_per_cpu is not None:
            return partition.def_mem_per_cpu
        return min(mib_per_cpu(self.nodeset(name)) for name in partition.nodesets)

    @property
    def image_variant(self) -> str | None:
        """Tag variant of our slurmd and login images: pyxis when it is enabled, so the plugin
        plugstack.conf requires is in every image that reads it."""
        return PYXIS_VARIANT if self.pyxis.enabled else None

    def slurmd_image(self, ns: NodeSetSpec) -> Image:
        """The NodeSet's own image, else images.slurmd as set, else ours for its architecture
        (the pyxis variant with pyxis enabled)."""
        return ns.image or self.images.resolve("slurmd", ns.architecture, self.image_variant, self.slurm.version)

    @property
    def login_image(self) -> Image:
        """images.login as set, else ours (the pyxis variant with pyxis enabled)."""
        return self.images.resolve("login", variant=self.image_variant, release=self.slurm.version)

    @functools.cached_property
    def has_gpus(self) -> bool:
        # Cached: every NodeSet's gres.conf asks, so a plain property made rendering quadratic.
        return any(n.gpus for n in self.nodesets)

    @property
    def partition_qos(self) -> list[str]:
        """The QOS partitions name (QOS=), each once: they must exist before slurmctld starts."""
        return sorted({p.qos for p in self.partitions if p.qos is not None})

    RULES: ClassVar[tuple[Callable[[ClusterSpec], list[Problem]], ...]] = ()
    """The cross-field rules, each a step of its own (set below, once they are defined): with some
    fields invalid, sunk.spec.partial runs each step those fields don't feed."""

    @model_validator(mode="after")
    def _release_images(self) -> ClusterSpec:
        """Unset images default to the cluster's Slurm release's family (frozen model: its own
        validation filling a default, as Images does for a registry)."""
        if self.slurm.version != DEFAULT_SLURM:
            object.__setattr__(self, "images", self.images.for_release(self.slurm.version))
        return self

    @model_validator(mode="after")
    def _rules(self) -> ClusterSpec:
        """Every cross-field rule (RULES); all problems are reported at once."""
        errors = [problem for rule in self.RULES for problem in rule(self)]
        if errors:
            raise Problems(errors)
        return self

    @property
    def release(self) -> Release:
        """The row of the cluster's Slurm release (sunk.images.RELEASES): what it can run."""
        return release_of(self.slurm.version)

    def _release_problems(self) -> list[Problem]:
        """What the chosen Slurm release can't run (its row says)."""
        problems = []
        release = self.release
        if self.controller.metrics and not release.metrics:
            problems.append(
                Problem(
                    "controller.metrics",
                    "slurmctld's metrics endpoints (MetricsType) came with Slurm 25.11; slurm.version "
                    f"{release.version!r} has none (slurmctld exits on the key): set it false, or "
                    f"slurm.version {_either(releases_where(lambda r: r.metrics))}",
                )
            )
        problems += self._topologies_release_problems()
        if self.topology.plugin == "block" and not release.block_plugin_at_start:
            problems.append(
                Problem(
                    "topology.plugin",
                    f"block is not supported with slurm.version {release.version!r}: slurmctld {release.version} exits "
                    "at start unless a block holds a registered node, and NodeSet nodes register after it "
                    "starts; use plugin tree, "
                    + "".join(
                        f"slurm.version {_quoted(v)}, " for v in releases_where(lambda r: r.block_plugin_at_start)
                    )
                    + "or a block topology under `topologies` (written flat until a block fills)",
                )
            )
        return problems

    @property
    def topology_file(self) -> str | None:
        """The topology file Slurm reads: topology.yaml with `topologies`, topology.conf with a
        `topology` plugin, else none."""
        return topology_file_of(self.topology, self.topologies)

    def _topologies_release_problems(self) -> list[Problem]:
        """Several topologies need topology.yaml (26.05), and replace the single one and its lines."""
        problems = []
        if self.topologies and not self.release.named_topologies:
            problems.append(
                Problem(
                    "topologies",
                    f"Slurm {self.slurm.version} reads one topology, from topology.conf, and no topology.yaml: "
                    "describe one topology under `topology` (plugin, labelKeys), or set slurm.version "
                    f"{_either(releases_where(lambda r: r.named_topologies))} for several",
                )
            )
        elif self.topologies and self.topology.plugin != "none":
            problems.append(
                Problem(
                    "topology.plugin",
                    f"{self.topology.plugin} beside `topologies`: with topologies, Slurm reads topology.yaml "
                    "and ignores topology.conf; add this one to `topologies` and set plugin none",
                )
            )
        if self.topologies and self.extra_config.topology_conf:
            problems.append(
                Problem(
                    "extraConfig.topologyConf",
                    "lines for topology.conf, which Slurm ignores beside the topology.yaml `topologies` renders; drop them",
                )
            )
        if not self.topologies:
            problems += [
                Problem(
                    f"partitions[{i}].topology",
                    f"{p.topology!r} names a topology of `topologies`, which the spec has none of; add it "
                    f"(slurm.version {_either(releases_where(lambda r: r.named_topologies))}), or drop the "
                    "partition's topology",
                )
                for i, p in enumerate(self.partitions)
                if p.topology is not None
            ]
        return problems

    def _health_problems(self) -> list[Problem]:
        """A check scoped to NodeSets names existing ones."""
        if self.health_check is None:
            return []
        known = {n.name for n in self.nodesets}
        return [
            Problem(
                f"healthCheck.checks[{i}].nodesets[{j}]",
                f"{name!r} is not a NodeSet; known: {', '.join(sorted(known))}",
            )
            for i, c in enumerate(self.health_check.checks)
            for j, name in enumerate(c.nodesets)
            if name not in known
        ]

    @property
    def _qos_names(self) -> set[str]:
        return {q.name for q in self.qos} | {BUILTIN_QOS}

    def _identity_problems(self) -> list[Problem]:
        """Lengths and names that must be unique."""
        errors: list[Problem] = []
        if len(self.ns) > 63:
            errors.append(Problem("namespace", f"{self.ns!r} is longer than 63 characters; set namespace"))
        errors += _unique("nodesets", [n.name for n in self.nodesets], "name")
        errors += _unique("partitions", [p.name for p in self.partitions], "name")
        errors += _unique("qos", [q.name for q in self.qos], "name")
        errors += _unique("accounts", [a.name for a in self.accounts], "name")
        errors += _unique("sharedVolumes", [v.name for v in self.shared_volumes], "name")
        errors += _unique("sharedVolumes", [v.mount_path for v in self.shared_volumes], "mountPath")
        return errors

    def _default_partition_problems(self) -> list[Problem]:
        """At most one default partition."""
        defaults = [i for i, p in enumerate(self.partitions) if p.default]
        if len(defaults) > 1:
            return [
                Problem(
                    f"partitions[{defaults[1]}].default",
                    f"partitions[{defaults[0]}] is already the default; only one may be",
                )
            ]
        return []

    def _partition_problems(self) -> list[Problem]:
        """Known nodesets and QOS, preemption modes that apply: each partition's references, then
        its GPU defaults and preemption, then the tiers partition_prio needs across them."""
        errors: list[Problem] = []
        nodesets, qos = {n.name for n in self.nodesets}, self._qos_names
        for i, p in enumerate(self.partitions):
            errors += self._partition_references(i, p, nodesets, qos)
            errors += self._partition_settings(i, p, nodesets)
        if self.scheduling.preempt_type == "partition_prio" and len({p.priority_tier for p in self.partitions}) < 2:
            errors.append(
                Problem("scheduling.preemptType", "partition_prio needs partitions with different priorityTier values")
            )
        return errors

    def _partition_references(self, i: int, p: PartitionSpec, nodesets: set[str], qos: set[str]) -> list[Problem]:
        """The nodesets and QOS partition `i` names exist (QOS only with accounting)."""
        errors = [
            Problem(f"partitions[{i}].nodesets[{j}]", f"{ns!r} is not a nodeset; known: {', '.join(sorted(nodesets))}")
            for j, ns in enumerate(p.nodesets)
            if ns not in nodesets
        ]
        errors += [
            Problem(f"partitions[{i}].allowQos[{j}]", f"{q!r} is not a QOS; known: {', '.join(sorted(qos))}")
            for j, q in enumerate(p.allow_qos)
            if q not in qos
        ]
        if p.qos is not None and not self.accounting.enabled:
            errors.append(Problem(f"partitions[{i}].qos", "QOS live in accounting; set accounting.enabled true"))
        elif p.qos is not None and p.qos not in qos:
            errors.append(Problem(f"partitions[{i}].qos", f"{p.qos!r} is not a QOS; known: {', '.join(sorted(qos))}"))
        return errors

    def _partition_settings(self, i: int, p: PartitionSpec, nodesets: set[str]) -> list[Problem]:
        """Per-GPU defaults only over GPU nodesets, and no larger than a GPU node's share; a
        preemption mode only under partition_prio."""
        errors = []
        for field, value, unit, column in (
            ("defCpuPerGpu", p.def_cpu_per_gpu, "CPUs", 1),
            ("defMemPerGpu", p.def_mem_per_gpu, "MiB", 2),
        ):
            if value is None:
                continue
            # (name, CPUs, MiB, GPUs) of each GPU node kind in the partition; read only when a
            # per-GPU default asks (a rule that reads a field still refused waits for it).
            gpu_nodes = [
                (ns.name, ns.cpus, ns.memory_mib, ns.gpus.count)
                for n in p.nodesets
                if n in nodesets and (ns := self.nodeset(n)).gpus is not None
            ]
            if not gpu_nodes:
                errors.append(Problem(f"partitions[{i}].{field}", "none of the partition's nodesets has GPUs; drop it"))
                continue
            # A default no node can give leaves a job that asks only for GPUs pending forever
            # ("Requested node configuration is not available"): per GPU, at most a node's share.
            roomiest = max(gpu_nodes, key=lambda node: int(node[column]) // node[3])
            have = int(roomiest[column])
            most = have // roomiest[3]
            if value > most:
                advice = f"use at most {most}" if most else "drop it"
                errors.append(
                    Problem(
                        f"partitions[{i}].{field}",
                        f"{value} {unit} per GPU is more than any of its GPU nodes has ({roomiest[0]}: {have} {unit} / "
                        f"{roomiest[3]} GPUs); a job asking only for GPUs could start nowhere: {advice}",
                    )
                )
        if p.preempt_mode not in (None, "off") and self.scheduling.preempt_type != "partition_prio":
            errors.append(Problem(f"partitions[{i}].preemptMode", "needs scheduling.preemptType partition_prio"))
        return errors

    def _nodeset_problems(self) -> list[Problem]:
        """Every nodeset in a partition, pod names within a DNS label, room for the sssd sidecar."""
        errors: list[Problem] = []
        used = {ns for p in self.partitions for ns in p.nodesets}
        for i, n in enumerate(self.nodesets):
            if n.name not in used:
                errors.append(
                    Problem(
                        f"nodesets[{i}]",
                        f"{n.name!r} is in no partition, so its nodes could never run a job; "
                        "add it to a partition's nodesets",
                    )
                )
            # Pods (and their Slurm node names) are <cluster>-<nodeset>-<ordinal>: a DNS label.
            longest = naming.nodeset_pod(
                self.name, n.name, naming.slurm_node_name(n.name, max(n.node_bound - 1, 0)), replicas=True
            )
            if len(longest) > 63:
                errors.append(
                    Problem(
                        f"nodesets[{i}].name",
                        f"pod names such as {longest!r} would be {len(longest)} characters; "
                        "at most 63 allowed: shorten the cluster or nodeset name",
                    )
                )
            if self.auth.ldap is not None:
                errors += [
                    Problem(
                        f"nodesets[{i}].{problem.path}",
                        f"{problem.message} (auth.ldap adds an sssd sidecar to the slurmd pod)",
                    )
                    for problem in n.admission(extra=SSSD_RESOURCES.requests)
                ]
        return errors

    def _qos_problems(self) -> list[Problem]:
        """Preemption between known QOS, and QOS only where accounting holds them."""
        errors: list[Problem] = []
        qos = self._qos_names
        for i, entry in enumerate(self.qos):
            for j, target in enumerate(entry.preempt):
                if target not in qos:
                    errors.append(
                        Problem(f"qos[{i}].preempt[{j}]", f"{target!r} is not a QOS; known: {', '.join(sorted(qos))}")
                    )
                elif target == entry.name:
                    errors.append(Problem(f"qos[{i}].preempt[{j}]", "a QOS cannot preempt itself"))
            if entry.preempt and self.scheduling.preempt_type != "qos":
                errors.append(
                    Problem(
                        f"qos[{i}].preempt", f"needs scheduling.preemptType qos (is {self.scheduling.preempt_type})"
                    )
                )
        if not self.accounting.enabled and self.qos:
            errors.append(Problem("qos", "QOS live in accounting; set accounting.enabled true or drop qos"))
        for i, entry in enumerate(self.qos):
            for field, limits in entry.tres_limits.items():
                if "gres/gpu" in limits and not self.has_gpus:
                    name = field[0].lower() + field[1:].replace("TRES", "Tres")
                    errors.append(
                        Problem(
                            f"qos[{i}].{name}.gres/gpu",
                            "no NodeSet has GPUs, so Slurm tracks no gres/gpu; drop it or add a GPU NodeSet",
                        )
                    )
        if not self.accounting.enabled and self.scheduling.preempt_type == "qos":
            errors.append(Problem("scheduling.preemptType", "qos needs accounting.enabled true (QOS live in slurmdbd)"))
        return errors

    @property
    def _key_secrets(self) -> dict[str, str]:
        """The Secrets holding the cluster's keys and passwords, by name: what each holds."""
        auth, jwt = self.auth.key.existing_secret, self.auth.jwt.existing_secret
        out = {
            auth.name if auth is not None else naming.auth_secret(self): f"the cluster's {self.auth.type} key",
            jwt.name if jwt is not None else naming.jwt_secret(self): "the JWT signing key (tokens for any user)",
            naming.db_secret(self): "the accounting database passwords",
        }
        if self.accounting.external is not None:
            out.setdefault(self.accounting.external.password_secret.name, "the accounting database password")
        ldap = self.auth.ldap
        if ldap is not None:
            if ldap.bind_password_secret is not None:
                out.setdefault(ldap.bind_password_secret.name, "the LDAP bind password")
            if ldap.client_cert_secret is not None:
                out.setdefault(ldap.client_cert_secret.name, "the LDAP client certificate's private key")
        return out

    def _shared_key_problems(self) -> list[Problem]:
        """One key, one purpose (sunk.spec.keyuse): no Secret key named by two fields, and no field
        naming a Secret sunk makes."""
        made: dict[str, str] = {}
        if self.auth.key.existing_secret is None:
            made[naming.auth_secret(self)] = f"the cluster's {self.auth.type} key"
        if self.auth.jwt.existing_secret is None:
            made[naming.jwt_secret(self)] = "the JWT signing key"
        if self.accounting.enabled and self.accounting.external is None:
            made[naming.db_secret(self)] = "the accounting database passwords"
        if self.login.enabled:
            made[naming.login_host_keys(self)] = "login's SSH host private keys"
        return key_use_problems(self, made)

    def _user_facing_secret_problems(self) -> list[Problem]:
        """Login pods run users' shells and slurmd pods users' jobs: a Secret holding a cluster key
        mounted or exposed there would let any user forge Slurm credentials or tokens."""
        secrets = self._key_secrets
        on_slurmd = {**secrets, naming.login_host_keys(self): "login's SSH host private keys"}
        refs = [("login", path, name) for path, name in secret_references(self.login)]
        for i, ns in enumerate(self.nodesets):
            refs += [(f"nodesets[{i}]", path, name) for path, name in secret_references(ns)]
        return [
            Problem(
                f"{where}.{path}",
                f"{name} holds {held[name]}; in {'login' if where == 'login' else 'slurmd'} pods users could read "
                "it (forge Slurm credentials or tokens, bind to the directory, impersonate login); sunk gives the "
                "daemons their keys itself",
            )
            for where, path, name in refs
            if name in (held := secrets if where == "login" else on_slurmd)
        ]

    def _role_problems(self) -> list[Problem]:
        """Shared volumes only on roles that exist, and not where a role's own volume mounts; the
        REST API the runtime reads."""
        errors: list[Problem] = []
        if self.login.enabled is False and any("login" in v.mount_on for v in self.shared_volumes):
            idx = next(i for i, v in enumerate(self.shared_volumes) if "login" in v.mount_on)
            errors.append(Problem(f"sharedVolumes[{idx}].mountOn", "mounts on login but login.enabled is false"))
        for role, section in (("controller", self.controller), ("login", self.login)):
            on_role = {v.mount_path: v.name for v in self.shared_volumes if role in v.mount_on}
            errors += [
                Problem(
                    f"{role}.volumes[{j}].mountPath",
                    f"{vol.mount_path} is also where shared volume "
                    f"{on_role[vol.mount_path]} mounts on {role}; one path, one volume",
                )
                for j, vol in enumerate(section.volumes)
                if vol.mount_path in on_role
            ]
        if not self.restapi.enabled:
            errors.append(
                Problem(
                    "restapi.enabled",
                    "the syncer and the scheduler, which every cluster runs, and the operator read and change "
                    "Slurm through slurmrestd; keep restapi enabled (limit who reaches it with restapi.sourceRanges)",
                )
            )
        return errors


ClusterSpec.RULES = (
    reserved_name_problems,
    contradiction_problems,
    ClusterSpec._identity_problems,
    ClusterSpec._default_partition_problems,
    ClusterSpec._partition_problems,
    ClusterSpec._nodeset_problems,
    ClusterSpec._qos_problems,
    lambda spec: partition_problems(spec.partitions, spec.nodesets, spec.topology, spec.topologies),
    lambda spec: topologies_problems(spec.topologies, spec.partitions),
    lambda spec: account_problems(spec.accounts, spec._qos_names, spec.accounting.enabled),
    ClusterSpec._role_problems,
    ClusterSpec._health_problems,
    ClusterSpec._user_facing_secret_problems,
    ClusterSpec._shared_key_problems,
    ClusterSpec._release_problems,
    inference_problems,
)
