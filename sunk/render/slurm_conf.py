"""slurm.conf (https://slurm.schedmd.com/slurm.conf.html) from a ClusterSpec."""

from __future__ import annotations

from sunk import naming
from sunk.render.gres import Gres, spec_gres
from sunk.render.health import health_conf_lines
from sunk.render.script import render
from sunk.spec.cluster import ClusterSpec
from sunk.spec.nodeset import NodeSetSpec
from sunk.spec.scheduling import PartitionSpec
from sunk.spec.slurmtext import conf_file

HEADER = "# Rendered by sunk from the cluster spec; edit the spec, not this file.\n"


def _mode(mode: str) -> str:
    return "SUSPEND,GANG" if mode == "suspend" else mode.upper()


def node_conf(ns: NodeSetSpec, gres: Gres | None = None) -> str:
    """The node definition a slurmd of this NodeSet registers with (`slurmd -Z --conf ...`).

    Nodes are dynamic: measured 2026-11 on 24.11, they register in ~0.2 s, need no slurm.conf change to
    scale, and reach the NodeSet's partitions through `NodeSet=<name> Feature=<name>`. Nodes of a
    shared NodeSet also carry the feature sunk_shared (sunk.spec.nodeset.SHARED_FEATURE).
    `gres`: the node's own GRES (from its Node's labels); default the NodeSet's.
    """
    words = [f"CPUs={ns.cpus}"]
    if ns.sockets is not None:
        words += [
            f"Sockets={ns.sockets}",
            f"CoresPerSocket={ns.cores_per_socket}",
            f"ThreadsPerCore={ns.threads_per_core}",
        ]
    words.append(f"RealMemory={ns.memory_mib}")
    if ns.tmp_disk_mib:
        words.append(f"TmpDisk={ns.tmp_disk_mib}")
    if gres is None and ns.gpus is not None:
        gres = spec_gres(ns.gpus)
    if gres is not None:
        words.append(f"Gres={gres.words()}")
    words.append(f"Feature={','.join(ns.slurm_features)}")
    if ns.weight != 1:
        words.append(f"Weight={ns.weight}")
    words += [f"{key}={value}" for key, value in sorted(ns.extra_node_conf.items())]
    return " ".join(words)


POWER_PROGRAM = "/bin/true"
"""ResumeProgram and SuspendProgram: Slurm needs both for power saving, but they have nothing to
do here. The operator reads the power state of the nodes from Slurm (POWERING_UP: create the pod;
POWERED_DOWN or POWERING_DOWN: delete it), so slurmctld needs no Kubernetes credentials."""


def cloud_nodes(ns: NodeSetSpec) -> str:
    """The `NodeName=` line of a NodeSet with `power`: all `maxNodes` names, CLOUD (powered down
    until Slurm wants them), with the node definition a dynamic node would register with."""
    last = ns.max_nodes - 1
    names = naming.slurm_node_name(ns.name, 0) if last == 0 else f"{ns.name}-[0-{last}]"
    return f"NodeName={names} {node_conf(ns)} State=CLOUD"


def _power(spec: ClusterSpec) -> list[str]:
    """Slurm power saving, with the nodes of NodeSets that have `power` (every other node is
    dynamic, and SuspendExcStates=DYNAMIC_NORM keeps those out of it)."""
    powered = [ns for ns in spec.nodesets if ns.power is not None]
    if not powered:
        return []
    first = powered[0].power
    assert first is not None
    keep = [
        naming.slurm_node_name(ns.name, 0) if ns.power.min_nodes == 1 else f"{ns.name}-[0-{ns.power.min_nodes - 1}]"
        for ns in powered
        if ns.power is not None and ns.power.min_nodes
    ]
    lines = [
        f"SuspendProgram={POWER_PROGRAM}",
        f"ResumeProgram={POWER_PROGRAM}",
        f"SuspendTime={first.suspend_time}",
        f"ResumeTimeout={first.resume_timeout}",
        "SuspendExcStates=DYNAMIC_NORM",
        # A registering CLOUD node's address is where its slurmd called from (the pod IP).
        "SlurmctldParameters=cloud_reg_addrs,idle_on_node_suspend",
        # No forwarding of slurmctld's messages through nodes whose address is not known yet.
        "TreeWidth=65533",
    ]
    if keep:
        lines.append(f"SuspendExcNodes={','.join(keep)}")
    return lines


SLURMCTLD_TIMEOUT_HA = 8
"""SlurmctldTimeout with backups. A backup takes control once the primary has not answered its
pings for this long, and clients that a standby turned away retry every half of it: measured on
26.05.5 (tests/slurm/test_controller_ha.py), an sbatch is accepted about 1.5 times this after the
primary dies (6: 9 s, 8: 12 s, 10: 15 s), against a goal of 15 s; 8 leaves 3 s for clients that
first wait on the dead primary's address. Lower would let a primary too busy to answer pings for
a few seconds be taken over. One controller keeps Slurm's 120 s default: it only tells slurmd how
long to wait for a restarted slurmctld."""


PRIMARY_ON = f"{naming.HA_DIR}/primary-on"
PRIMARY_OFF = f"{naming.HA_DIR}/primary-off"


def _takeover(spec: ClusterSpec) -> list[str]:
    if not spec.controller.ha:
        return []
    return [
        f"SlurmctldTimeout={SLURMCTLD_TIMEOUT_HA}",
        # Mark the pod whose slurmctld is in control, for its readiness probe (primary-mark.sh).
        f"SlurmctldPrimaryOnProg={naming.SLURM_ETC}/{PRIMARY_ON}",
        f"SlurmctldPrimaryOffProg={naming.SLURM_ETC}/{PRIMARY_OFF}",
    ]


def render_primary_marks(spec: ClusterSpec) -> dict[str, str]:
    """ha.d/primary-on and primary-off with backups, else nothing."""
    if not spec.controller.ha:
        return {}
    return {
        path: render(
            "primary-mark.sh",
            MARK=naming.PRIMARY_MARK,
            STANDBY=naming.STANDBY_MARK,
            STOP=naming.FENCE_STOP,
            PRIMARY=primary,
        )
        for path, primary in ((PRIMARY_ON, "yes"), (PRIMARY_OFF, "no"))
    }


def _daemons(spec: ClusterSpec) -> list[str]:
    return [
        f"ClusterName={spec.name}",
        *(
            f"SlurmctldHost={naming.controller_host(spec, i)}({naming.controller_fqdn(spec, i)})"
            for i in range(spec.controller.replicas)
        ),
        *_takeover(spec),
        f"SlurmctldPort={naming.SLURMCTLD_PORT}",
        f"SlurmdPort={naming.SLURMD_PORT}",
        "SlurmUser=slurm",
        "SlurmdUser=root",
        f"StateSaveLocation={naming.STATE_SAVE}",
        f"SlurmdSpoolDir={naming.SLURMD_SPOOL}",
        "SlurmctldPidFile=/run/slurmctld/slurmctld.pid",
        "SlurmdPidFile=/run/slurmd/slurmd.pid",
        *(["MetricsType=metrics/openmetrics"] if spec.controller.metrics else []),
    ]


def _authentication(spec: ClusterSpec) -> list[str]:
    kind = spec.auth.type  # munge or slurm: AuthType and CredType alike
    return [
        f"AuthType=auth/{kind}",
        f"CredType=cred/{kind}",
        "AuthAltTypes=auth/jwt",
        f"AuthAltParameters=jwt_key={naming.JWT_KEY_PATH}",
    ]


def _resources(spec: ClusterSpec) -> list[str]:
    cgroup = spec.cgroup.plugin != "disabled"
    # With cgroup.conf's CgroupPlugin=disabled a cgroup plugin here makes slurmd exit at start:
    # processes are then tracked through /proc (linuxproc) and bound by affinity only.
    lines = [
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        f"ProctrackType=proctrack/{'cgroup' if cgroup else 'linuxproc'}",
        f"TaskPlugin={'task/cgroup,task/affinity' if cgroup else 'task/affinity'}",
    ]
    if spec.accounting.enabled:
        # Without storage slurmctld logs "Job accounting information gathered, but not stored"
        # (24.11, measured 2026-11); the default (none) gathers nothing.
        lines.append(f"JobAcctGatherType=jobacct_gather/{'cgroup' if cgroup else 'linux'}")
    lines += [
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdTimeout=300",
        "InactiveLimit=0",
        "KillWait=30",
        "MinJobAge=300",
        "Waittime=0",
        # Nodes are dynamic (slurmd -Z); the bound covers every NodeSet at its largest.
        f"MaxNodeCount={sum(n.node_bound for n in spec.nodesets)}",
    ]
    if spec.has_gpus:
        shards = any(n.gpus.shards_per_gpu or n.gpus.from_node_labels for n in spec.nodesets if n.gpus)
        lines.append("GresTypes=gpu,shard" if shards else "GresTypes=gpu")
    if spec.topology.plugin != "none":
        lines.append(f"TopologyPlugin=topology/{spec.topology.plugin}")
    if spec.scripts.prolog:
        lines.append(f"Prolog={naming.PROLOG_DIR}/*")
    if spec.scripts.epilog:
        lines.append(f"Epilog={naming.EPILOG_DIR}/*")
    for key, folder, scripts in (
        ("PrologSlurmctld", naming.PROLOG_SLURMCTLD_DIR, spec.scripts.prolog_slurmctld),
        ("EpilogSlurmctld", naming.EPILOG_SLURMCTLD_DIR, spec.scripts.epilog_slurmctld),
    ):
        # One line per script, run in name order: 24.11 refuses a comma-separated list or a glob
        # here ("No such file or directory", measured 2026-11) but keeps repeated lines as a list.
        lines += [f"{key}={folder}/{name}" for name in sorted(scripts)]
    if spec.scripts.job_submit_lua is not None:
        lines.append("JobSubmitPlugins=lua")
    return lines + health_conf_lines(spec)


def _scheduling(spec: ClusterSpec) -> list[str]:
    s = spec.scheduling
    lines = [
        f"PreemptType=preempt/{s.preempt_type}",
        f"PreemptMode={_mode(s.preempt_mode) if s.preempt_type != 'none' else 'OFF'}",
    ]
    if s.preempt_exempt_time:
        lines.append(f"PreemptExemptTime={s.preempt_exempt_time}")
    lines.append(f"PriorityType=priority/{s.priority_type}")
    if s.priority_type == "multifactor":
        w = s.priority_weights
        lines += [
            f"PriorityWeightAge={w.age}",
            f"PriorityWeightFairshare={w.fairshare}",
            f"PriorityWeightJobSize={w.job_size}",
            f"PriorityWeightPartition={w.partition}",
            f"PriorityWeightQOS={w.qos}",
        ]
    if s.scheduler_parameters:
        lines.append(f"SchedulerParameters={','.join(s.scheduler_parameters)}")
    lines.append(f"EnforcePartLimits={s.enforce_part_limits}")
    return lines


def _accounting(spec: ClusterSpec) -> list[str]:
    if not spec.accounting.enabled:
        return ["AccountingStorageType=accounting_storage/none"]
    lines = [
        "AccountingStorageType=accounting_storage/slurmdbd",
        f"AccountingStorageHost={naming.accounting(spec)}",
        f"AccountingStoragePort={naming.SLURMDBD_PORT}",
        # The scheduler and syncer find their jobs again by comment after a restart.
        "AccountingStoreFlags=job_comment,job_extra",
    ]
    if spec.has_gpus:
        lines.append("AccountingStorageTRES=gres/gpu")
    if spec.accounting.enforce:
        # Only users with an association run jobs, and QOS/association limits hold.
        lines.append(f"AccountingStorageEnforce={','.join(spec.accounting.enforce)}")
    return lines


def _partition(spec: ClusterSpec, p: PartitionSpec) -> str:
    words = [
        f"PartitionName={p.name}",
        f"Nodes={','.join(p.nodesets)}",
        f"Default={'YES' if p.default else 'NO'}",
        f"MaxTime={p.max_time}",
    ]
    if p.default_time:
        words.append(f"DefaultTime={p.default_time}")
    # CR_Core_Memory without a default gives a job that asks for no memory the whole node.
    words.append(f"DefMemPerCPU={spec.def_mem_per_cpu(p)}")
    if p.def_mem_per_gpu is not None:
        # Beside DefMemPerCPU (measured 2026-11 on 24.11): a job with GPUs gets this per GPU instead.
        words.append(f"DefMemPerGPU={p.def_mem_per_gpu}")
    if p.def_cpu_per_gpu is not None:
        words.append(f"DefCpuPerGPU={p.def_cpu_per_gpu}")

    if p.qos is not None:
        words.append(f"QOS={p.qos}")
    if p.topology is not None:
        words.append(f"Topology={p.topology}")
    words.append(f"PriorityTier={p.priority_tier}")
    if p.preempt_mode:
        words.append(f"PreemptMode={_mode(p.preempt_mode)}")
    for key, values in (
        ("AllowAccounts", p.allow_accounts),
        ("AllowQos", p.allow_qos),
        ("AllowGroups", p.allow_groups),
    ):
        if values:
            words.append(f"{key}={','.join(values)}")
    return " ".join([*words, *p.extra, "State=UP"])


def _nodesets(spec: ClusterSpec) -> list[str]:
    lines = []
    for ns in spec.nodesets:
        if ns.power is not None:
            lines.append(cloud_nodes(ns))
        lines.append(f"NodeSet={ns.name} Feature={ns.name}")
    return lines


def _nodesets_title(spec: ClusterSpec) -> str:
    power = sum(ns.power is not None for ns in spec.nodesets)
    if power == 0:
        return "# NodeSets: dynamic nodes join by feature"
    if power == len(spec.nodesets):
        return "# NodeSets: CLOUD nodes up to maxNodes (power), grouped by feature"
    return "# NodeSets: CLOUD nodes up to maxNodes (power) or dynamic nodes, grouped by feature"


def render_slurm_conf(spec: ClusterSpec) -> str:
    """slurm.conf, section by section."""
    sections = [
        ("", _daemons(spec)),
        ("# Authentication", _authentication(spec)),
        ("# Resources and processes", _resources(spec)),
        ("# Scheduling, priority and preemption", _scheduling(spec)),
        ("# Accounting", _accounting(spec)),
        ("# Power saving: NodeSets that scale to zero", _power(spec)),
        (_nodesets_title(spec), _nodesets(spec)),
        ("# Partitions", [_partition(spec, p) for p in spec.partitions]),
    ]
    extra = spec.controller.extra_slurm_conf
    if extra:
        sections.append(("# controller.extraSlurmConf", []))
    lines: list[str] = []
    for title, body in sections:
        if title and not body and not (extra and title == sections[-1][0]):
            continue
        lines += ["", title, *body] if title else body
    return conf_file(HEADER, lines, extra, file="slurm.conf")
