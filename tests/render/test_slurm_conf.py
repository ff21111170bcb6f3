"""slurm.conf from a spec, table-driven against literal lines (Slinky style)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from sunk.render import node_conf, render_slurm_conf
from sunk.spec import ClusterSpec

MakeSpec = Callable[..., ClusterSpec]  # the make_spec fixture of conftest.py

CPU = {"name": "cpu", "cpus": 4, "memoryMib": 4096}
GPU = {"name": "gpu", "cpus": 16, "memoryMib": 65536, "replicas": 2, "gpus": {"type": "h100", "count": 8}}
TWO_TIERS = [
    {"name": "low", "nodesets": ["cpu"], "default": True, "priorityTier": 1},
    {"name": "high", "nodesets": ["cpu"], "priorityTier": 10},
]


@dataclass(frozen=True)
class Case:
    id: str
    sections: dict[str, Any]
    present: list[str]
    absent: list[str] = field(default_factory=list)
    """Lines (or line prefixes ending in '=') that must not appear."""


CASES = [
    Case(
        "defaults",
        {},
        [
            "ClusterName=research",
            "SlurmctldHost=research-controller-0(research-controller-0.research-controller.acme-research.svc.cluster.local)",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "AuthAltTypes=auth/jwt",
            "AuthAltParameters=jwt_key=/etc/slurm/jwt/jwt_hs256.key",
            "SelectType=select/cons_tres",
            "MaxNodeCount=256",
            "PreemptType=preempt/qos",
            "PreemptMode=REQUEUE",
            "PriorityType=priority/multifactor",
            "PriorityWeightQOS=10000",
            "SchedulerParameters=batch_sched_delay=0",
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=research-accounting",
            "AccountingStoragePort=6819",
            "AccountingStoreFlags=job_comment,job_extra",
            "JobAcctGatherType=jobacct_gather/cgroup",
            "NodeSet=cpu Feature=cpu",
            "PartitionName=batch Nodes=cpu Default=YES MaxTime=UNLIMITED DefMemPerCPU=1024 PriorityTier=1 State=UP",
        ],
        ["GresTypes=", "TopologyPlugin=", "Prolog=", "Epilog=", "JobSubmitPlugins=", "AccountingStorageTRES="],
    ),
    # ----- preemption types and modes
    Case(
        "preempt-qos-suspend",
        {"scheduling": {"preemptType": "qos", "preemptMode": "suspend"}},
        ["PreemptType=preempt/qos", "PreemptMode=SUSPEND,GANG"],
    ),
    Case(
        "preempt-qos-cancel-exempt",
        {"scheduling": {"preemptMode": "cancel", "preemptExemptTime": "00:05:00"}},
        ["PreemptMode=CANCEL", "PreemptExemptTime=00:05:00"],
    ),
    Case(
        "preempt-none",
        {"scheduling": {"preemptType": "none"}},
        ["PreemptType=preempt/none", "PreemptMode=OFF"],
        ["PreemptMode=REQUEUE"],
    ),
    Case(
        "preempt-partition-prio",
        {"scheduling": {"preemptType": "partition_prio", "preemptMode": "requeue"}, "partitions": TWO_TIERS},
        [
            "PreemptType=preempt/partition_prio",
            "PreemptMode=REQUEUE",
            "PartitionName=low Nodes=cpu Default=YES MaxTime=UNLIMITED DefMemPerCPU=1024 PriorityTier=1 State=UP",
            "PartitionName=high Nodes=cpu Default=NO MaxTime=UNLIMITED DefMemPerCPU=1024 PriorityTier=10 State=UP",
        ],
    ),
    Case(
        "partition-preempt-mode",
        {
            "scheduling": {"preemptType": "partition_prio"},
            "partitions": [{**TWO_TIERS[0], "preemptMode": "suspend"}, {**TWO_TIERS[1], "preemptMode": "off"}],
        },
        [
            "PartitionName=low Nodes=cpu Default=YES MaxTime=UNLIMITED DefMemPerCPU=1024 PriorityTier=1 PreemptMode=SUSPEND,GANG State=UP",
            "PartitionName=high Nodes=cpu Default=NO MaxTime=UNLIMITED DefMemPerCPU=1024 PriorityTier=10 PreemptMode=OFF State=UP",
        ],
    ),
    Case(
        "priority-basic",
        {"scheduling": {"priorityType": "basic", "schedulerParameters": ["bf_continue", "bf_interval=30"]}},
        ["PriorityType=priority/basic", "SchedulerParameters=bf_continue,bf_interval=30"],
        ["PriorityWeightAge="],
    ),
    Case(
        "priority-weights",
        {"scheduling": {"priorityWeights": {"age": 1, "fairshare": 2, "jobSize": 3, "partition": 4, "qos": 5}}},
        [
            "PriorityWeightAge=1",
            "PriorityWeightFairshare=2",
            "PriorityWeightJobSize=3",
            "PriorityWeightPartition=4",
            "PriorityWeightQOS=5",
        ],
    ),
    # ----- partitions
    Case(
        "partition-every-option",
        {
            "qos": [{"name": "high"}],
            "partitions": [
                {
                    "name": "gpu",
                    "nodesets": ["cpu"],
                    "default": True,
                    "maxTime": "2-00:00:00",
                    "defaultTime": "01:00:00",
                    "priorityTier": 7,
                    "allowAccounts": ["physics", "chem"],
                    "allowQos": ["high", "normal"],
                    "extra": ["OverSubscribe=NO", "LLN=YES"],
                }
            ],
        },
        [
            "PartitionName=gpu Nodes=cpu Default=YES MaxTime=2-00:00:00 DefaultTime=01:00:00 DefMemPerCPU=1024 PriorityTier=7 "
            "AllowAccounts=physics,chem AllowQos=high,normal OverSubscribe=NO LLN=YES State=UP"
        ],
    ),
    Case(
        "partition-over-two-nodesets",
        {
            "nodesets": [CPU, GPU],
            "partitions": [
                {"name": "all", "nodesets": ["cpu", "gpu"], "default": True},
                {"name": "gpu", "nodesets": ["gpu"]},
            ],
        },
        [
            "NodeSet=cpu Feature=cpu",
            "NodeSet=gpu Feature=gpu",
            # DefMemPerCPU: the smallest MiB per CPU of the partition's nodesets (cpu 4096/4, gpu 65536/16).
            "PartitionName=all Nodes=cpu,gpu Default=YES MaxTime=UNLIMITED DefMemPerCPU=1024 PriorityTier=1 State=UP",
            "PartitionName=gpu Nodes=gpu Default=NO MaxTime=UNLIMITED DefMemPerCPU=4096 PriorityTier=1 State=UP",
        ],
    ),
    Case(
        "partition-def-mem-per-cpu-given",
        {
            "nodesets": [CPU, GPU],
            "partitions": [{"name": "all", "nodesets": ["cpu", "gpu"], "default": True, "defMemPerCpu": 3000}],
        },
        ["PartitionName=all Nodes=cpu,gpu Default=YES MaxTime=UNLIMITED DefMemPerCPU=3000 PriorityTier=1 State=UP"],
    ),
    Case(
        "partition-def-mem-per-cpu-rounds-down-to-at-least-one",
        {
            "nodesets": [{"name": "tiny", "cpus": 3, "memoryMib": 2}],
            "partitions": [{"name": "t", "nodesets": ["tiny"]}],
        },
        ["PartitionName=t Nodes=tiny Default=NO MaxTime=UNLIMITED DefMemPerCPU=1 PriorityTier=1 State=UP"],
    ),
    # ----- GRES, node bound, topology, scripts
    Case(
        "gres",
        {"nodesets": [CPU, GPU], "partitions": [{"name": "all", "nodesets": ["cpu", "gpu"], "default": True}]},
        ["GresTypes=gpu", "AccountingStorageTRES=gres/gpu", "MaxNodeCount=512"],
    ),
    Case(
        "max-node-count-all-matching-nodes",
        {
            "nodesets": [{**CPU, "mode": "all-matching-nodes", "maxNodes": 500}, {**GPU, "replicas": 12}],
            "partitions": [{"name": "all", "nodesets": ["cpu", "gpu"], "default": True}],
        },
        ["MaxNodeCount=756"],  # 500 + the replicas NodeSet's default bound of 256
    ),
    Case(
        "topology-tree",
        {"topology": {"plugin": "tree", "labelKeys": ["spine", "leaf"]}},
        ["TopologyPlugin=topology/tree"],
    ),
    Case(
        "topology-block", {"topology": {"plugin": "block", "labelKeys": ["clique"]}}, ["TopologyPlugin=topology/block"]
    ),
    Case(
        "prolog-epilog-job-submit",
        {
            "scripts": {
                "prolog": {"00-a.sh": "#!/bin/sh\n"},
                "epilog": {"00-z.sh": "#!/bin/sh\n"},
                "jobSubmitLua": "function slurm_job_submit() end\nfunction slurm_job_modify() end\n",
            }
        },
        ["Prolog=/etc/slurm/prolog.d/*", "Epilog=/etc/slurm/epilog.d/*", "JobSubmitPlugins=lua"],
    ),
    Case("only-epilog", {"scripts": {"epilog": {"z": "#!/bin/sh\n"}}}, ["Epilog=/etc/slurm/epilog.d/*"], ["Prolog="]),
    # ----- auth and accounting
    Case(
        "auth-slurm",
        {"auth": {"type": "slurm"}},
        ["AuthType=auth/slurm", "CredType=cred/slurm", "AuthAltTypes=auth/jwt"],
        ["AuthType=auth/munge", "CredType=cred/munge"],
    ),
    Case(
        "accounting-disabled",
        {"accounting": {"enabled": False}, "scheduling": {"preemptType": "none"}},
        ["AccountingStorageType=accounting_storage/none"],
        [
            "AccountingStorageHost=",
            "AccountingStoragePort=",
            "AccountingStoreFlags=",
            "AccountingStorageType=accounting_storage/slurmdbd",
            "JobAcctGatherType=",  # gathering without storage makes slurmctld log an error
        ],
    ),
    # ----- what a release adds
    Case("controller-metrics", {"controller": {"metrics": True}}, ["MetricsType=metrics/openmetrics"]),
    Case("no-controller-metrics", {}, [], ["MetricsType="]),
    Case(
        "namespace-override",
        {"namespace": "hpc"},
        ["SlurmctldHost=research-controller-0(research-controller-0.research-controller.hpc.svc.cluster.local)"],
    ),
]


def _lines(text: str) -> list[str]:
    return text.splitlines()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_slurm_conf_lines(make_spec: MakeSpec, case: Case) -> None:
    lines = _lines(render_slurm_conf(make_spec(**case.sections)))
    missing = [want for want in case.present if want not in lines]
    assert not missing, "\n".join(lines)
    for bad in case.absent:
        hits = [line for line in lines if (line.startswith(bad) if bad.endswith("=") else line == bad)]
        assert not hits, hits


def test_extra_slurm_conf_comes_last(make_spec: MakeSpec) -> None:
    text = render_slurm_conf(make_spec(controller={"extraSlurmConf": ["# site tuning", "MessageTimeout=30"]}))
    assert text.endswith("\n# controller.extraSlurmConf\n# site tuning\nMessageTimeout=30\n")


@pytest.mark.parametrize(
    ("nodesets", "title"),
    [
        ([CPU], "# NodeSets: dynamic nodes join by feature"),
        ([{**CPU, "maxNodes": 4, "power": {}}], "# NodeSets: CLOUD nodes up to maxNodes (power), grouped by feature"),
        (
            [{**CPU, "maxNodes": 4, "power": {}}, {**GPU, "name": "gpu"}],
            "# NodeSets: CLOUD nodes up to maxNodes (power) or dynamic nodes, grouped by feature",
        ),
    ],
)
def test_the_nodesets_section_says_which_nodes_it_declares(
    make_spec: MakeSpec, nodesets: list[dict[str, Any]], title: str
) -> None:
    parts = [{"name": "a", "nodesets": [n["name"] for n in nodesets], "default": True}]
    assert title in _lines(render_slurm_conf(make_spec(nodesets=nodesets, partitions=parts)))


def test_every_setting_appears_once(make_spec: MakeSpec) -> None:
    text = render_slurm_conf(make_spec(nodesets=[CPU, GPU], partitions=[{"name": "a", "nodesets": ["cpu", "gpu"]}]))
    keys = [line.split("=", 1)[0] for line in _lines(text) if line and not line.startswith("#")]
    singles = [k for k in keys if k not in {"NodeSet", "PartitionName"}]
    assert len(singles) == len(set(singles)), sorted(k for k in singles if singles.count(k) > 1)


@pytest.mark.parametrize(
    ("nodeset", "expected"),
    [
        (CPU, "CPUs=4 RealMemory=4096 Feature=cpu"),
        (GPU, "CPUs=16 RealMemory=65536 Gres=gpu:h100:8 Feature=gpu"),
        (
            {
                **CPU,
                "cpus": 64,
                "sockets": 2,
                "coresPerSocket": 16,
                "threadsPerCore": 2,
                "tmpDiskMib": 1000,
                "features": ["ib", "x86"],
                "weight": 10,
            },
            "CPUs=64 Sockets=2 CoresPerSocket=16 ThreadsPerCore=2 RealMemory=4096 TmpDisk=1000 Feature=cpu,ib,x86 Weight=10",
        ),
    ],
    ids=["cpu", "gpu", "full-shape"],
)
def test_node_conf(make_spec: MakeSpec, nodeset: dict[str, Any], expected: str) -> None:
    spec = make_spec(nodesets=[nodeset], partitions=[{"name": "p", "nodesets": [nodeset["name"]]}])
    assert node_conf(spec.nodesets[0]) == expected
