"""Partitions, QOS, preemption, priorities, topology and the other cluster-wide Slurm settings."""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator
from pydantic.alias_generators import to_camel

from sunk.problem import Problem, Problems
from sunk.spec import lua
from sunk.spec.base import (
    AbsPath,
    AccountingName,
    DnsLabel,
    DnsSubdomain,
    FileName,
    LabelKey,
    Model,
    PositiveQuantity,
    SlurmName,
    SlurmTime,
    _matcher,
    mount_clash,
    slurm_seconds,
)
from sunk.spec.identity import GroupName
from sunk.spec.nodeset import MAX_MEMORY_MIB, NodeSetSpec
from sunk.spec.slurmtext import (
    MAX_U16,
    MAX_U32,
    CgroupConfLines,
    GresConfLines,
    PlugstackLine,
    SacctmgrName,
    SlurmText,
    TopologyConfLines,
    is_secret_key,
    secret_keys,
)

PreemptMode = Literal["off", "cancel", "requeue", "suspend"]
MAX_BLOCK_RATIO = 1 << 15
"""Largest BlockSizes value over the base size that slurmctld 24.11 accepts (2^15; 2^16 is fatal)."""


_PARTITION_RENDERED = {
    "partitionname": "name",
    "nodes": "nodesets",
    "default": "default",
    "maxtime": "maxTime",
    "defaulttime": "defaultTime",
    "prioritytier": "priorityTier",
    "preemptmode": "preemptMode",
    "allowaccounts": "allowAccounts",
    "allowqos": "allowQos",
    "allowgroups": "allowGroups",
    "defcpupergpu": "defCpuPerGpu",
    "defmempergpu": "defMemPerGpu",
    "qos": "qos",
    "topology": "topology",
    "state": "the partition is UP while it is in the spec",
}
"""PartitionName-line keys sunk writes itself (lower case) -> the spec field that sets each."""


class PartitionSpec(Model):
    """A Slurm partition (https://slurm.schedmd.com/slurm.conf.html#SECTION_PARTITION-CONFIGURATION)."""

    name: SlurmName
    """PartitionName; not `default` (Slurm reserves it). Required."""
    nodesets: Annotated[list[DnsLabel], Field(min_length=1)]
    """NodeSets whose nodes form this partition. Required."""
    default: bool = False
    """The partition jobs land in without -p. Default: false (at most one may be true)."""
    max_time: SlurmTime = "UNLIMITED"
    """MaxTime. Default: UNLIMITED."""
    default_time: SlurmTime | None = None
    """DefaultTime. Default: MaxTime."""
    def_mem_per_cpu: Annotated[int, Field(ge=1, le=MAX_MEMORY_MIB)] | None = None
    """DefMemPerCPU: MiB a job gets per allocated CPU when it asks for no memory (no --mem,
    --mem-per-cpu or --mem-per-gpu). Default: the smallest `memoryMib // cpus` among the
    partition's nodesets, so a whole-node job without --mem fits every node. (With no default,
    SelectTypeParameters=CR_Core_Memory gives such a job all of a node's memory, so every node
    runs one job at a time: measured on Slurm 24.11.)
    https://slurm.schedmd.com/slurm.conf.html#OPT_DefMemPerCPU"""
    def_cpu_per_gpu: Annotated[int, Field(ge=1, le=MAX_U16)] | None = None
    """DefCpuPerGPU: CPUs a job gets per allocated GPU when it asks for none (no -c or
    --cpus-per-gpu). Needs a GPU NodeSet in the partition. Default: none.
    https://slurm.schedmd.com/slurm.conf.html#OPT_DefCpuPerGPU"""
    def_mem_per_gpu: Annotated[int, Field(ge=1, le=MAX_MEMORY_MIB)] | None = None
    """DefMemPerGPU: MiB a job with GPUs gets per allocated GPU when it asks for no memory (jobs
    without GPUs keep DefMemPerCPU). Needs a GPU NodeSet in the partition. Default: none.
    https://slurm.schedmd.com/slurm.conf.html#OPT_DefMemPerGPU"""
    qos: SlurmName | None = None
    """QOS: a QOS of the spec (or `normal`) whose limits every job in this partition also gets,
    beside its own QOS's. slurmctld refuses to start while a partition's QOS does not exist, so
    it waits for the accounting setup to create it. Default: none.
    https://slurm.schedmd.com/slurm.conf.html#OPT_QOS"""
    priority_tier: Annotated[int, Field(ge=0, le=65533)] = 1
    """PriorityTier: higher tiers preempt lower under preempt/partition_prio. Default: 1."""
    preempt_mode: PreemptMode | None = None
    """PreemptMode of jobs in this partition. Default: the cluster's."""
    allow_accounts: list[SlurmName] = []
    """AllowAccounts. Default: all."""
    allow_qos: list[SlurmName] = []
    """AllowQos; each must be a QOS of the spec (or `normal`). Default: all."""
    allow_groups: list[GroupName] = []
    """AllowGroups: only members of these Unix or directory groups (resolved by slurmctld, through
    its sssd with auth.ldap) may run here; others' jobs are held. Default: all.
    https://slurm.schedmd.com/slurm.conf.html#OPT_AllowGroups"""
    topology: SlurmName | None = None
    """Topology=: the name of one of the cluster's `topologies` that places this partition's jobs
    (Slurm 26.05). Default: the default topology.
    https://slurm.schedmd.com/slurm.conf.html#OPT_Topology"""
    extra: list[
        Annotated[
            SlurmText, _matcher(r"[A-Za-z]+=[^\s]+", "one `Key=Value` word without spaces, such as OverSubscribe=NO")
        ]
    ] = []
    """Extra `Key=Value` words on the PartitionName line. Default: none."""

    @model_validator(mode="after")
    def _rules(self) -> PartitionSpec:
        errors: list[Problem] = []
        if self.name == "default":
            errors.append(
                Problem("name", "'default' is reserved by Slurm (PartitionName=DEFAULT sets defaults); choose another")
            )
        if self.default_time is not None and slurm_seconds(self.default_time) > slurm_seconds(self.max_time):
            errors.append(
                Problem("defaultTime", f"{self.default_time} exceeds maxTime {self.max_time}; use at most maxTime")
            )
        errors += _repeats("nodesets", self.nodesets)
        errors += _repeats("allowGroups", self.allow_groups)
        for i, word in enumerate(self.extra):
            key = word.partition("=")[0].lower()
            if key in _PARTITION_RENDERED:
                # A second Default=YES would make two default partitions; Nodes=ALL repeats Nodes=.
                errors.append(
                    Problem(
                        f"extra[{i}]",
                        f"{word.partition('=')[0]} is rendered by sunk on every PartitionName line; "
                        f"set it through its own field ({_PARTITION_RENDERED[key]})",
                    )
                )
            elif is_secret_key(key):
                # The schema-drawn fuzzer found `StoragePass=x` here: rendered into slurm.conf, a
                # ConfigMap every Slurm pod mounts.
                errors.append(
                    Problem(
                        f"extra[{i}]",
                        f"{word.partition('=')[0]} holds a password, which would render into slurm.conf's "
                        "ConfigMap; a PartitionName line takes no password",
                    )
                )
            elif key == "defmempercpu":
                errors.append(Problem(f"extra[{i}]", f"set defMemPerCpu instead of {word}"))
            elif key == "defmempernode":
                # Measured on 24.11: slurmctld then ignores the rendered DefMemPerCPU and logs an error.
                errors.append(
                    Problem(
                        f"extra[{i}]",
                        f"{word} excludes the DefMemPerCPU every partition gets; "
                        "set defMemPerCpu instead (MiB per allocated CPU)",
                    )
                )
        if errors:
            raise Problems(errors)
        return self


TRES_NAMES = ("cpu", "mem", "node", "billing", "gres/gpu")
"""The trackable resources a QOS limit may name: Slurm's own (mem in MiB) and gres/gpu, which
sunk's slurm.conf tracks (AccountingStorageTRES) when the cluster has GPUs."""


def _tres_name(name: str) -> str:
    """A TRES a QOS limits: cpu, mem (MiB), node, billing or gres/gpu."""
    if name not in TRES_NAMES:
        # `gpu` means gres/gpu, not the `cpu` it is one letter from.
        close = [t for t in TRES_NAMES if name in t] or difflib.get_close_matches(name, TRES_NAMES, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ValueError(f"{name!r} is not a TRES a QOS limits here; one of {', '.join(TRES_NAMES)}{hint}")
    return name


Tres = dict[Annotated[str, AfterValidator(_tres_name)], Annotated[int, Field(ge=0, le=2**52)]]
"""TRES limits: resource -> count (mem in MiB)."""


class QosSpec(Model):
    """A QOS, created with sacctmgr (https://slurm.schedmd.com/qos.html)."""

    name: AccountingName
    """Required."""
    priority: Annotated[int, Field(ge=0, le=MAX_U32)] = 0
    """Default: 0."""
    preempt: list[AccountingName] = []
    """QOS this one may preempt (PreemptType=preempt/qos). Default: none."""
    preempt_mode: PreemptMode | None = None
    """How jobs of this QOS are preempted. Default: the cluster's."""
    max_wall: SlurmTime | None = None
    """MaxWall per job. Default: none."""
    usage_factor: Annotated[float, Field(ge=0, le=1_000_000, allow_inf_nan=False)] | None = None
    """UsageFactor. Default: 1."""
    deny_on_limit: bool = True
    """Flags=DenyOnLimit: a job over one of the QOS's limits (such as maxWall) is refused at
    submission; false leaves it pending for ever with the limit as its reason. Default: true."""
    max_tres_per_job: Tres = {}
    """MaxTRESPerJob: what one job may use, e.g. `{cpu: 64, gres/gpu: 8}`. Default: no limit.
    https://slurm.schedmd.com/sacctmgr.html#OPT_MaxTRESPerJob"""
    max_tres_per_user: Tres = {}
    """MaxTRESPerUser: what one user's running jobs may use together. Default: no limit."""
    max_tres_per_account: Tres = {}
    """MaxTRESPerAccount: what one account's running jobs may use together. Default: no limit."""
    grp_tres: Tres = {}
    """GrpTRES: what all running jobs of this QOS may use together. Default: no limit."""
    max_jobs_per_user: Annotated[int, Field(ge=0, le=2_147_483_647)] | None = None
    """MaxJobsPerUser: running jobs per user. Default: no limit."""
    max_submit_jobs_per_user: Annotated[int, Field(ge=0, le=2_147_483_647)] | None = None
    """MaxSubmitJobsPerUser: running and pending jobs per user; one more is refused at
    submission. Default: no limit."""

    @property
    def tres_limits(self) -> dict[str, dict[str, int]]:
        """sacctmgr field -> its TRES limits (the spec's field names, camelCase, by Slurm's)."""
        return {
            "MaxTRESPerJob": self.max_tres_per_job,
            "MaxTRESPerUser": self.max_tres_per_user,
            "MaxTRESPerAccount": self.max_tres_per_account,
            "GrpTRES": self.grp_tres,
        }


UnixUser = Annotated[
    str,
    _matcher(
        r"[a-z_][a-z0-9_.-]*",
        "a user name: lowercase letter or '_' first, then lowercase letters, digits, '_', '.', '-'",
        32,
    ),
    SacctmgrName,
]
"""A login name as Slurm's associations name it (the user's name on login and compute)."""


class AccountSpec(Model):
    """A Slurm account and the users who may charge it (https://slurm.schedmd.com/accounting.html).
    With AccountingStorageEnforce (on by default) only users with an association may run jobs."""

    name: AccountingName
    """Required; not `root` (Slurm's own top account)."""
    parent: AccountingName = "root"
    """Parent account: `root` or another account of the spec. Default: root."""
    fairshare: Annotated[int, Field(ge=1, le=2_147_483_647)] = 1
    """Fairshare (shares of the parent's). Default: 1."""
    qos: list[AccountingName] = []
    """QOS the account's users may use; each a QOS of the spec or `normal`. Default: the parent's."""
    default_qos: AccountingName | None = None
    """QOS of jobs that name none; must be among `qos` (or the spec's QOS when `qos` is empty).
    Default: the parent's (normal)."""
    users: list[UnixUser] = []
    """Users with an association to this account; a user's first account is their default.
    Default: none."""


def account_problems(accounts: Sequence[AccountSpec], qos: set[str], accounting: bool) -> list[Problem]:
    """Accounts that name an unknown parent or QOS, form a cycle, or can't exist without accounting."""
    problems: list[Problem] = []
    if accounts and not accounting:
        return [Problem("accounts", "accounts live in accounting; set accounting.enabled true or drop accounts")]
    names = {a.name for a in accounts}
    parents = {a.name: a.parent for a in accounts}
    cyclic = _on_cycles(parents)
    known_qos = ", ".join(sorted(qos))
    for i, account in enumerate(accounts):
        if account.name == "root":
            problems.append(
                Problem(f"accounts[{i}].name", "root is Slurm's own top account; name the account otherwise")
            )
            continue
        if account.parent != "root" and account.parent not in names:
            problems.append(
                Problem(
                    f"accounts[{i}].parent",
                    f"{account.parent!r} is neither root nor an account of the spec; "
                    f"known: {', '.join(sorted(names | {'root'}))}",
                )
            )
        for j, q in enumerate(account.qos):
            if q not in qos:
                problems.append(Problem(f"accounts[{i}].qos[{j}]", f"{q!r} is not a QOS; known: {known_qos}"))
        allowed = set(account.qos) or qos
        if account.default_qos is not None and account.default_qos not in allowed:
            problems.append(
                Problem(
                    f"accounts[{i}].defaultQos",
                    f"{account.default_qos!r} is not among the account's QOS; "
                    f"choose one of: {', '.join(sorted(allowed))}",
                )
            )
        problems += [Problem(f"accounts[{i}].users", f"{p}") for p in _duplicates(account.users)]
        if account.name in cyclic:
            problems.append(Problem(f"accounts[{i}].parent", f"{account.name!r} would be its own ancestor"))
    return problems


def _on_cycles(parents: dict[str, str]) -> set[str]:
    """The names on a parent cycle, each name walked once (a chain of n accounts: n steps, not n²)."""
    state: dict[str, int] = {}  # 1: on the walk now, 2: done
    cyclic: set[str] = set()
    for start in parents:
        walk, at = [], start
        while at in parents and at not in state:
            state[at] = 1
            walk.append(at)
            at = parents[at]
        if state.get(at) == 1:  # the walk came back to itself: `at` and what follows it form the cycle
            cyclic.update(walk[walk.index(at) :])
        for name in walk:
            state[name] = 2
    return cyclic


def _duplicates(values: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for v in values:
        if v in seen:
            out.append(f"{v!r} listed twice")
        seen.add(v)
    return out


MAX_PRIORITY = 4_294_967_295
"""A job's priority is a uint32 in Slurm: every weight, and their sum, must fit in it."""
Weight = Annotated[int, Field(ge=0, le=MAX_PRIORITY)]


class PriorityWeights(Model):
    """priority/multifactor weights (https://slurm.schedmd.com/priority_multifactor.html)."""

    age: Weight = 1000
    """PriorityWeightAge. Default: 1000."""
    fairshare: Weight = 10000
    """PriorityWeightFairshare. Default: 10000."""
    job_size: Weight = 0
    """PriorityWeightJobSize. Default: 0."""
    partition: Weight = 1000
    """PriorityWeightPartition. Default: 1000."""
    qos: Weight = 10000
    """PriorityWeightQOS. Default: 10000."""

    @model_validator(mode="after")
    def _sum_fits(self) -> PriorityWeights:
        total = self.age + self.fairshare + self.job_size + self.partition + self.qos
        if total > MAX_PRIORITY:
            raise ValueError(
                f"the weights add up to {total}; a job's priority is a 32-bit number, so their sum may be at "
                f"most {MAX_PRIORITY}"
            )
        return self


class SchedulingSpec(Model):
    """Preemption and priority (https://slurm.schedmd.com/preempt.html)."""

    preempt_type: Literal["none", "partition_prio", "qos"] = "qos"
    """PreemptType: preempt/none, preempt/partition_prio or preempt/qos. Default: qos."""
    preempt_mode: PreemptMode = "requeue"
    """Cluster PreemptMode (suspend renders SUSPEND,GANG). Default: requeue."""
    preempt_exempt_time: SlurmTime | None = None
    """PreemptExemptTime: minimum run time before a job can be preempted. Default: none."""
    priority_type: Literal["basic", "multifactor"] = "multifactor"
    """PriorityType: priority/basic or priority/multifactor. Default: multifactor."""
    priority_weights: PriorityWeights = PriorityWeights()
    """Default: age 1000, fairshare 10000, jobSize 0, partition 1000, qos 10000."""
    enforce_part_limits: Literal["ALL", "ANY", "NO"] = "ALL"
    """EnforcePartLimits: ALL refuses at submission a job that breaks a limit of a partition it
    asks for (MaxTime, node counts, AllowGroups, AllowAccounts, AllowQos) instead of queueing it
    for ever with the limit as its reason; ANY refuses it only when no asked-for partition would
    take it; NO queues it. Default: ALL (a user learns at once, as with QOS denyOnLimit).
    https://slurm.schedmd.com/slurm.conf.html#OPT_EnforcePartLimits"""
    scheduler_parameters: list[
        Annotated[SlurmText, _matcher(r"[a-z_]+(=[^\s,]+)?", "one `name` or `name=value` without spaces or commas")]
    ] = ["batch_sched_delay=0"]
    """SchedulerParameters. Default: batch_sched_delay=0 (placeholder jobs start without a 3 s wait)."""

    @model_validator(mode="after")
    def _rules(self) -> SchedulingSpec:
        if self.priority_type == "basic" and "priority_weights" in self.model_fields_set:
            raise Problems([Problem("priorityWeights", "only used with priorityType multifactor")])
        if self.preempt_type == "none" and self.preempt_mode != "off" and "preempt_mode" in self.model_fields_set:
            raise Problems(
                [Problem("preemptMode", f"{self.preempt_mode} has no effect with preemptType none; use off")]
            )
        return self


class TopologySpec(Model):
    """Network topology from Kubernetes Node labels (https://slurm.schedmd.com/topology.html)."""

    plugin: Literal["none", "tree", "block"] = "none"
    """topology/tree (switch hierarchy) or topology/block (NVLink-style blocks). Default: none."""
    label_keys: list[LabelKey] = []
    """Node label keys from the top of the fabric down (tree), or the one block key (block). Default: none."""
    block_sizes: list[Annotated[int, Field(ge=1, le=MAX_U32)]] = []
    """BlockSizes for topology/block: the base block size (nodes per block, e.g. 18 trays of a
    GB200 NVL72 rack) first, then larger sizes, each the base times a power of two (slurmctld 24.11
    exits on any other value, measured). A block with fewer nodes than the base is left out of
    topology.conf (slurmctld exits on it), and so are nodes without the label: a job whose
    candidate nodes include block nodes is placed inside blocks only, while partitions without
    block nodes schedule as if there were no topology (measured on 24.11). Default: Slurm's (the
    first block's size, then 2, 4 and 8 times it).
    https://slurm.schedmd.com/topology.conf.html#OPT_BlockSizes"""

    @model_validator(mode="after")
    def _rules(self) -> TopologySpec:
        """The first problem, in two phases: the label keys the plugin needs, then the block sizes
        slurmctld takes (increasing, each the base block size times a power of two)."""
        problem = self._label_key_problem() or self._block_size_problem()
        if problem is not None:
            raise Problems([problem])
        return self

    def _label_key_problem(self) -> Problem | None:
        if self.plugin == "none":
            if self.label_keys:
                return Problem("labelKeys", "set plugin to tree or block, or drop labelKeys")
            if self.block_sizes:
                return Problem("blockSizes", "only used with plugin block")
        elif not self.label_keys:
            what = "one or more keys, top level first" if self.plugin == "tree" else "exactly one key"
            return Problem("labelKeys", f"plugin {self.plugin} needs Node label keys ({what})")
        elif self.plugin == "block" and len(self.label_keys) != 1:
            return Problem("labelKeys", f"plugin block takes exactly one key, got {len(self.label_keys)}")
        if self.block_sizes and self.plugin != "block":
            return Problem("blockSizes", "only used with plugin block")
        if len(set(self.label_keys)) != len(self.label_keys):
            return Problem("labelKeys", "keys repeat")
        return None

    def _block_size_problem(self) -> Problem | None:
        if self.block_sizes and self.block_sizes[0] > MAX_U16:
            # slurmctld keeps the base block's node count in 16 bits (bblock_node_cnt).
            return Problem(
                "blockSizes[0]", f"{self.block_sizes[0]} nodes per base block; Slurm holds at most {MAX_U16}"
            )
        if any(a >= b for a, b in itertools.pairwise(self.block_sizes)):
            return Problem("blockSizes", f"{self.block_sizes} must increase, smallest (the base block) first")
        for i, size in enumerate(self.block_sizes[1:], 1):
            base = self.block_sizes[0]
            ratio, rest = divmod(size, base)
            # slurmctld 24.11 accepts base * 2^k up to k = 15 and exits on anything else
            # ("Invalid BlockSizes value", measured 2026-11 with 2,3 / 2,6 / 3,9 / 1,65536).
            if rest or ratio & (ratio - 1) or ratio > MAX_BLOCK_RATIO:
                fits = ", ".join(str(base << k) for k in range(1, 4))
                what = (
                    f"is more than 2^15 times the base block size {base}"
                    if ratio > MAX_BLOCK_RATIO
                    else f"is not the base block size {base} times a power of two"
                )
                return Problem(
                    f"blockSizes[{i}]",
                    f"{size} {what} (slurmctld exits on it); use one of {fits}, ... up to {base * MAX_BLOCK_RATIO}",
                )
        return None

    @property
    def base_block_size(self) -> int | None:
        """Nodes in a base block, when blockSizes fixes it (else Slurm takes the first block's)."""
        return self.block_sizes[0] if self.plugin == "block" and self.block_sizes else None


class NamedTopologySpec(Model):
    """One of several topologies of a cluster, all in one topology.yaml (Slurm 26.05;
    https://slurm.schedmd.com/topology.yaml.html). A partition picks one by name (its `topology`);
    the others place jobs of partitions that name none of them by the default one."""

    name: SlurmName
    """The topology's name: partitions' `topology` and `scontrol show topology <name>` use it. Required."""
    plugin: Literal["tree", "block", "flat"]
    """tree (switch hierarchy from labelKeys), block (NVLink-style blocks from one label key) or
    flat (no topology: any nodes together). Required."""
    label_keys: list[LabelKey] = []
    """As TopologySpec.labelKeys: top level first (tree), or the one block key (block); none for flat.
    Default: none."""
    block_sizes: list[Annotated[int, Field(ge=1, le=MAX_U32)]] = []
    """As TopologySpec.blockSizes, for plugin block. Until a block holds enough registered nodes
    (the base block size, else one) the topology is written as flat (slurmctld 26.05 exits on a
    block topology without blocks, measured), and the operator writes its blocks as they fill.
    Default: Slurm's."""
    default: bool = False
    """The cluster's default topology (topology.yaml `cluster_default`): partitions without a
    `topology` and slurmctld's own messages to the nodes use it. Exactly one of several is; a sole
    topology is the default. Default: false."""

    @model_validator(mode="after")
    def _rules(self) -> NamedTopologySpec:
        as_one = self.as_topology()
        problem = as_one._label_key_problem() or as_one._block_size_problem()
        if problem is not None:
            raise Problems([problem])
        return self

    def as_topology(self) -> TopologySpec:
        """The same topology as a single TopologySpec (flat is plugin none), unvalidated."""
        plugin: Literal["none", "tree", "block"] = "none" if self.plugin == "flat" else self.plugin
        return TopologySpec.model_construct(plugin=plugin, label_keys=self.label_keys, block_sizes=self.block_sizes)


def topology_file_of(topology: TopologySpec, topologies: Sequence[NamedTopologySpec]) -> str | None:
    """topology.yaml with several named topologies, topology.conf with one, else None."""
    if topologies:
        return "topology.yaml"
    return "topology.conf" if topology.plugin != "none" else None


def topologies_problems(topologies: Sequence[NamedTopologySpec], partitions: Sequence[PartitionSpec]) -> list[Problem]:
    """Names unique, one default among several, and each partition's `topology` among them."""
    errors = [
        Problem(f"topologies[{i}].name", f"{t.name!r} is listed twice; each topology needs a name of its own")
        for i, t in enumerate(topologies)
        if t.name in {u.name for u in topologies[:i]}
    ]
    defaults = [i for i, t in enumerate(topologies) if t.default]
    if len(defaults) > 1:
        errors.append(
            Problem(
                f"topologies[{defaults[1]}].default",
                f"topologies[{defaults[0]}] is already the default; only one may be",
            )
        )
    elif not defaults and len(topologies) > 1:
        names = ", ".join(t.name for t in topologies)
        errors.append(
            Problem(
                "topologies",
                f"none is the default; set `default: true` on one of {names} (partitions without a "
                "topology, and slurmctld's own messages to the nodes, use it)",
            )
        )
    known = [t.name for t in topologies]
    errors += [
        Problem(
            f"partitions[{i}].topology", f"{p.topology!r} is not a topology of the spec; use one of {', '.join(known)}"
        )
        for i, p in enumerate(partitions)
        if known and p.topology is not None and p.topology not in known
    ]
    return errors


class CgroupSpec(Model):
    """cgroup.conf (https://slurm.schedmd.com/cgroup.conf.html)."""

    plugin: Literal["cgroup/v2", "cgroup/v1", "autodetect", "disabled"] = "cgroup/v2"
    """CgroupPlugin. Default: cgroup/v2."""
    constrain_cores: bool = True
    """ConstrainCores. Default: true."""
    constrain_devices: bool = True
    """ConstrainDevices: needed so jobs see only their GPUs. Default: true."""
    constrain_ram_space: bool = True
    """ConstrainRAMSpace. Default: true."""
    constrain_swap_space: bool = False
    """ConstrainSwapSpace. Default: false."""
    allowed_ram_space: Annotated[float, Field(gt=0, le=100)] = 100
    """Percent of the allocation a job may use. Default: 100."""
    ignore_systemd: bool = True
    """IgnoreSystemd: pods have no systemd. Default: true."""

    @model_validator(mode="after")
    def _settings_need_a_plugin(self) -> CgroupSpec:
        # With CgroupPlugin=disabled sunk renders none of them (slurmd would not start with them):
        # a setting given beside it would silently do nothing.
        given = sorted(self.model_fields_set - {"plugin"})
        if self.plugin == "disabled" and given:
            names = ", ".join(to_camel(name) for name in given)
            raise Problems(
                [Problem(to_camel(given[0]), f"{names}: no effect with plugin disabled; drop them or choose cgroup/v2")]
            )
        return self


CONFIG_MAP_BYTES = 1_000_000
"""What one script may take: a ConfigMap holds at most 1 MiB (1,048,576 bytes) with its metadata."""


class ScriptsSpec(Model):
    """Prolog, epilog and job_submit.lua (https://slurm.schedmd.com/prolog_epilog.html)."""

    prolog: dict[FileName, str] = {}
    """Scripts run in order by name before each job on each node. Default: none."""
    epilog: dict[FileName, str] = {}
    """Scripts run after each job on each node. Default: none."""
    job_submit_lua: str | None = None
    """job_submit.lua body (https://slurm.schedmd.com/job_submit_plugins.html). Default: none."""
    prolog_slurmctld: dict[FileName, str] = {}
    """Scripts slurmctld runs, as SlurmUser in the controller pod, before it grants each job its
    allocation (slurm.conf PrologSlurmctld, one line per script, run in name order;
    https://slurm.schedmd.com/prolog_epilog.html). A script that fails requeues or cancels the job.
    At /etc/slurm/prolog-slurmctld.d/<name>. Default: none."""
    epilog_slurmctld: dict[FileName, str] = {}
    """Scripts slurmctld runs, as SlurmUser in the controller pod, after each job ends (slurm.conf
    EpilogSlurmctld, one line per script, in name order). At /etc/slurm/epilog-slurmctld.d/<name>. Default: none."""

    def _kinds(self) -> tuple[tuple[str, dict[str, str]], ...]:
        return (
            ("prolog", self.prolog),
            ("epilog", self.epilog),
            ("prologSlurmctld", self.prolog_slurmctld),
            ("epilogSlurmctld", self.epilog_slurmctld),
        )

    @model_validator(mode="after")
    def _rules(self) -> ScriptsSpec:
        errors = [
            Problem(f"{kind}.{name}", "a script must start with '#!'")
            for kind, scripts in self._kinds()
            for name, body in scripts.items()
            if not body.startswith("#!")
        ]
        bodies = [
            *((f"{kind}.{name}", body) for kind, s in self._kinds() for name, body in s.items()),
            *((("jobSubmitLua", self.job_submit_lua),) if self.job_submit_lua is not None else ()),
        ]  # fmt: skip
        errors += [
            Problem(
                f"{where}",
                f"{len(body.encode())} bytes; each becomes one ConfigMap, which holds at most "
                f"{CONFIG_MAP_BYTES} (the API server refuses more)",
            )
            for where, body in bodies
            if len(body.encode()) > CONFIG_MAP_BYTES
        ]
        if self.job_submit_lua is not None:
            errors += [
                Problem(
                    "jobSubmitLua",
                    f"must define function {fn}(...) (in code, not a comment or string; global, not local)",
                )
                for fn in ("slurm_job_submit", "slurm_job_modify")
                if not lua.defines_global_function(self.job_submit_lua, fn)
            ]
        if errors:
            raise Problems(errors)
        return self


class PyxisSpec(Model):
    """Pyxis + enroot container support in srun (https://github.com/NVIDIA/pyxis)."""

    enabled: bool = False
    """Load spank_pyxis.so (plugstack.conf: `required /usr/local/lib/sunk/spank/spank_pyxis.so`,
    the same path on amd64 and arm64). The slurmd and login images the stack does not set become
    their pyxis variant (tag `24.11.5-pyxis`, arm64 `24.11.5-pyxis-arm64`), built by
    `sunk images build slurmd login --with pyxis`: an optional stage that fetches NVIDIA's pyxis
    and enroot releases (Debian packages neither). An image set in the stack (images.slurmd,
    images.login, a NodeSet's `image`) is used as given and must carry spank_pyxis.so in that
    folder. Default: false."""
    args: list[
        Annotated[SlurmText, _matcher(r"[a-z_]+=[^\s]+", "one `name=value` argument such as runtime_path=/run/pyxis")]
    ] = ["runtime_path=/run/pyxis"]
    """Plugin arguments in plugstack.conf. Default: runtime_path=/run/pyxis."""


class ContainersSpec(Model):
    """Slurm's native OCI container support: `srun --container=BUNDLE` and `sbatch --container`
    run job steps in an OCI bundle through crun, which the slurmd image ships
    (https://slurm.schedmd.com/containers.html, https://slurm.schedmd.com/oci.conf.html)."""

    enabled: bool = False
    """Render oci.conf for compute pods: crun, rootless as the job's user with its state under
    /run/user/<uid>, and no cgroup of its own (slurmstepd has already placed the step in its job
    cgroup, which confines the container too). Default: false."""


Role = Literal["login", "compute", "controller"]


def _repeats(field: str, values: list[str]) -> list[Problem]:
    seen: set[str] = set()
    out = []
    for i, v in enumerate(values):
        if v in seen:
            out.append(Problem(f"{field}[{i}]", f"{v!r} is listed twice"))
        seen.add(v)
    return out


def mib_per_cpu(ns: NodeSetSpec) -> int:
    """Memory per CPU of one node of the NodeSet, in MiB; at least 1 (DefMemPerCPU=0 means none)."""
    return max(1, ns.memory_mib // ns.cpus)


def _most_nodes(ns: NodeSetSpec) -> int | None:
    """Nodes a NodeSet can have at once: replicas; with power, maxNodes (Slurm powers up to it);
    None in all-matching-nodes (the Nodes decide)."""
    return ns.max_nodes if ns.power is not None else ns.desired_replicas


def partition_topology(
    p: PartitionSpec, topology: TopologySpec, topologies: Sequence[NamedTopologySpec]
) -> tuple[TopologySpec, str]:
    """The topology that places partition `p`'s jobs, and the spec field that sets it."""
    if not topologies:
        return topology, "topology"
    for k, t in enumerate(topologies):
        if t.name == p.topology or (p.topology is None and (t.default or len(topologies) == 1)):
            return t.as_topology(), f"topologies[{k}]"
    return TopologySpec(), "topologies"


def partition_problems(
    partitions: Sequence[PartitionSpec],
    nodesets: Sequence[NodeSetSpec],
    topology: TopologySpec,
    topologies: Sequence[NamedTopologySpec] = (),
) -> list[Problem]:
    """Rules that need a partition's nodesets: its memory default and its place in block topology."""
    known = {n.name: n for n in nodesets}
    errors: list[Problem] = []
    for i, p in enumerate(partitions):
        placing, where = partition_topology(p, topology, topologies)
        base = placing.base_block_size
        members = [known[name] for name in p.nodesets if name in known]
        if p.def_mem_per_cpu is not None and members:
            roomiest = max(members, key=mib_per_cpu)
            most = mib_per_cpu(roomiest)
            if p.def_mem_per_cpu > most:
                # Measured on 24.11: sbatch --exclusive without --mem is refused ("Requested node
                # configuration is not available") when DefMemPerCPU * CPUs exceeds every node.
                errors.append(
                    Problem(
                        f"partitions[{i}].defMemPerCpu",
                        f"{p.def_mem_per_cpu} MiB per CPU is more than any of its "
                        f"nodes has ({roomiest.name}: {roomiest.memory_mib} MiB / {roomiest.cpus} CPUs); a whole-node "
                        f"job without --mem could start nowhere: use at most {most}",
                    )
                )
        if base is None:
            continue
        # A replicas-mode NodeSet smaller than the base block can never fill a block, so its nodes
        # stay outside every block. Measured on 24.11: a job whose candidate nodes include block
        # nodes is placed inside blocks only, so beside a NodeSet that can fill blocks those nodes
        # run jobs only when a job is constrained to them (-C, -w is refused).
        fillers = [n.name for n in members if _most_nodes(n) is None or (_most_nodes(n) or 0) >= base]
        for j, name in enumerate(p.nodesets):
            ns = known.get(name)
            replicas = _most_nodes(ns) if ns is not None else None
            if not fillers or replicas is None or replicas == 0 or replicas >= base:
                continue
            errors.append(
                Problem(
                    f"partitions[{i}].nodesets[{j}]",
                    f"{name} has {replicas} replicas, fewer than the base block size "
                    f"{base} ({where}.blockSizes[0]), so its nodes are in no block, and Slurm places this "
                    f"partition's jobs inside the blocks of {', '.join(fillers)}: {name}'s nodes would run only jobs "
                    f"constrained to them. Give {name} a partition of its own, or at least {base} replicas",
                )
            )
    return errors


class NewClaim(Model):
    """A PersistentVolumeClaim created by sunk (https://kubernetes.io/docs/concepts/storage/persistent-volumes/)."""

    size: PositiveQuantity
    """Requested storage, e.g. 2Ti. Required."""
    storage_class: DnsSubdomain | None = None
    """StorageClass. Default: the cluster's default class."""
    access_mode: Literal["ReadWriteMany", "ReadWriteOnce", "ReadOnlyMany"] = "ReadWriteMany"
    """Default: ReadWriteMany (login and compute pods share it)."""


class SharedVolumeSpec(Model):
    """A volume mounted at the same path on the roles that need it (home, datasets)."""

    name: DnsLabel
    """Volume name. Required."""
    mount_path: AbsPath
    """Same path on every role. Required."""
    existing_claim: DnsLabel | None = None
    """An existing PVC. Default: none."""
    create: NewClaim | None = None
    """A PVC created by sunk. Default: none."""
    mount_on: Annotated[list[Role], Field(min_length=1)] = ["login", "compute"]
    """Default: login and compute."""
    read_only: bool = False
    """Default: false."""

    @model_validator(mode="after")
    def _one_source(self) -> SharedVolumeSpec:
        if (hit := mount_clash(self.mount_path)) is not None:
            raise Problems([Problem("mountPath", f"{self.mount_path} would hide or sit inside sunk's own mount {hit}")])
        if (self.existing_claim is None) == (self.create is None):
            raise Problems([Problem("existingClaim", "give exactly one of existingClaim or create")])
        if len(set(self.mount_on)) != len(self.mount_on):
            raise Problems([Problem("mountOn", "roles repeat")])
        return self


class ExtraConfig(Model):
    """Escape hatch: lines appended verbatim to files that have no section of their own."""

    cgroup_conf: CgroupConfLines = []
    """Lines appended to cgroup.conf. Default: none."""
    gres_conf: GresConfLines = []
    """Lines appended to every gres.conf. Default: none."""
    topology_conf: TopologyConfLines = []
    """Lines appended to topology.conf. Default: none."""
    plugstack_conf: list[
        Annotated[
            str,
            _matcher(
                r"#.*|(required|optional|include) .*\S",
                "`required|optional <plugin.so> [args]`, `include <glob>` or a `#` comment, one line",
            ),
            PlugstackLine,
        ]
    ] = []
    """Lines appended to plugstack.conf. Default: none."""
    files: dict[str, str] = {}
    """Whole extra Slurm files (file name -> content), each in a ConfigMap of its own and mounted
    beside slurm.conf in /etc/slurm on the controller, login and slurmd pods, where Slurm looks
    for them. Only files Slurm 24.11 reads from there (EXTRA_SLURM_FILES: acct_gather.conf,
    burst_buffer.conf, cli_filter.lua, helpers.conf, job_container.conf, mpi.conf, oci.conf);
    never one sunk renders (slurm.conf, cgroup.conf, ...: their own settings say which), nor a
    password (a ConfigMap is no place for one). A change rolls the slurmd pods, which read most of
    these files only at start. Default: none."""

    @model_validator(mode="after")
    def _files(self) -> ExtraConfig:
        errors: list[Problem] = []
        for name, body in self.files.items():
            if name in SUNK_SLURM_FILES:
                errors.append(Problem(f"files.{name}", f"sunk renders {name}; set {SUNK_SLURM_FILES[name]} instead"))
            elif name not in EXTRA_SLURM_FILES:
                valid = f"a file Slurm 24.11 reads beside slurm.conf; one of: {', '.join(sorted(EXTRA_SLURM_FILES))}"
                if re.fullmatch(r"[\w.-]+", name):
                    errors.append(Problem(f"files.{name}", f"not {valid}"))
                else:
                    errors.append(Problem("files", f"{name!r} is not {valid}"))
                continue
            size = len(body.encode())
            if size > CONFIG_MAP_BYTES:
                errors.append(
                    Problem(
                        f"files.{name}",
                        f"{size} bytes; each file becomes one ConfigMap, which holds at most {CONFIG_MAP_BYTES}",
                    )
                )
            if (bad := _CONTROL.search(body)) is not None:
                errors.append(Problem(f"files.{name}", f"control character {bad.group()!r}; Slurm files are text"))
            if (bad := _SEPARATOR.search(body)) is not None:
                errors.append(
                    Problem(
                        f"files.{name}",
                        f"line separator U+{ord(bad.group()):04X}: one line to Slurm, two to other readers",
                    )
                )
            found = secret_keys(body) + [
                (n, line.split("=")[0].strip())
                for n, line in enumerate(body.split("\n"), 1)
                if _PASSWORD_KEY.match(line)
            ]
            for n, key in sorted(set(found))[:1]:
                errors.append(
                    Problem(
                        f"files.{name}",
                        f"line {n} sets {key}, a password (as Slurm reads the line, after continuations and "
                        "escapes), which would sit in plain text in a ConfigMap; leave it out (keep it in a "
                        "Secret-backed file of your own image or sidecar)",
                    )
                )
        if errors:
            raise Problems(errors)
        return self


EXTRA_SLURM_FILES = {
    "acct_gather.conf": "slurmd, slurmctld: AcctGather* plugins (https://slurm.schedmd.com/acct_gather.conf.html)",
    "burst_buffer.conf": "slurmctld: BurstBufferType (https://slurm.schedmd.com/burst_buffer.conf.html)",
    "cli_filter.lua": "clients: CliFilterPlugins=lua (https://slurm.schedmd.com/cli_filter_plugins.html)",
    "helpers.conf": "slurmd: NodeFeaturesPlugins=node_features/helpers (https://slurm.schedmd.com/helpers.conf.html)",
    "job_container.conf": "slurmd: JobContainerType (https://slurm.schedmd.com/job_container.conf.html)",
    "mpi.conf": "slurmctld, slurmd: MPI plugins (https://slurm.schedmd.com/mpi.conf.html)",
    "oci.conf": "slurmd: `srun --container` (https://slurm.schedmd.com/oci.conf.html)",
}
"""Files Slurm 24.11 reads from the folder of slurm.conf that sunk does not render -> who reads them."""
SUNK_SLURM_FILES = {
    "slurm.conf": "controller.extraSlurmConf",
    "slurmdbd.conf": "accounting.extraSlurmdbdConf",
    "cgroup.conf": "cgroup and extraConfig.cgroupConf",
    "gres.conf": "nodesets[].gpus and extraConfig.gresConf",
    "plugstack.conf": "pyxis and extraConfig.plugstackConf",
    "topology.conf": "topology and extraConfig.topologyConf",
    "topology.yaml": "topologies",
    "job_submit.lua": "scripts.jobSubmitLua",
}
"""Files sunk renders itself -> the settings that shape them."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SEPARATOR = re.compile("[\u2028\u2029]")
_PASSWORD_KEY = re.compile(r"\s*[A-Za-z]*(?:Pass|Password|Passwd)\s*=", re.IGNORECASE)


__all__ = [
    "EXTRA_SLURM_FILES",
    "SUNK_SLURM_FILES",
    "AbsPath",
    "CgroupSpec",
    "ContainersSpec",
    "ExtraConfig",
    "NamedTopologySpec",
    "PartitionSpec",
    "PyxisSpec",
    "QosSpec",
    "SchedulingSpec",
    "ScriptsSpec",
    "SharedVolumeSpec",
    "TopologySpec",
]
