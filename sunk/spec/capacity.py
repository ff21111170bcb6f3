"""What a Node of a known shape gives its pods, and whether a NodeSet's slurmd pod and Slurm node fit.

A kubelet admits a pod only if the requests of every pod on the Node, plus this one, fit the
Node's `status.allocatable`; allocatable is capacity minus kube-reserved, system-reserved and the
hard eviction threshold
(https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/). DaemonSet pods
(CNI, kube-proxy, the GPU operator's device plugin and exporters, log and metrics agents) then take
their requests from it before a slurmd pod arrives. For the instance types sunk knows, `available`
is that remainder, computed rather than typed in so the reasoning stays visible:

- kube-reserved CPU, GKE's published formula (also the shape of EKS's): 6% of the first core, 1%
  of the second, 0.5% of the next two, 0.25% of every core above four
  (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#cpu_reservations).
- kube-reserved memory, GKE's formula: 25% of the first 4 GiB, 20% of the next 4, 10% of the next
  8, 6% of the next 112, 2% of everything above 128 GiB
  (https://cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_reservations).
  GKE folds system-reserved into it; a provider that reserves more needs `nodeAllocatable`.
- hard eviction threshold: memory.available<100Mi, the kubelet default.
- DaemonSets: 1 CPU and 2 GiB on GPU Nodes (about ten agents of ~100m: CNI, kube-proxy, CSI node,
  node-exporter, a log agent, and the NVIDIA device plugin, DCGM exporter, GPU and node feature
  discovery, container-toolkit validator), 500m and 1 GiB on CPU Nodes (the first five alone).

H100x8 (128 CPUs, 2,000,000 MiB): 390m and 46,923 MiB kube-reserved, so 126,610m and 1,950,929
MiB available to a slurmd pod on an otherwise empty Node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sunk.spec.base import Model

EVICTION_HARD_MIB = 100
"""The kubelet's default hard eviction threshold, memory.available<100Mi."""
DAEMONSET_GPU = (1000, 2048)
"""(millicores, MiB) DaemonSet pods request on a GPU Node; see the module docstring."""
DAEMONSET_CPU = (500, 1024)
"""(millicores, MiB) DaemonSet pods request on a CPU-only Node."""


def kube_reserved_cpu_m(cpus: int) -> int:
    """GKE's kube-reserved CPU in millicores for a Node of `cpus` cores."""
    tiers = ((1, 60.0), (1, 10.0), (2, 5.0), (math.inf, 2.5))  # (cores, millicores per core)
    left, total = float(cpus), 0.0
    for size, rate in tiers:
        take = min(left, size)
        total += take * rate
        left -= take
    return math.ceil(total)


def kube_reserved_memory_mib(memory_mib: int) -> int:
    """GKE's kube-reserved memory in MiB for a Node of `memory_mib`."""
    if memory_mib < 1024:
        return 255
    tiers = ((4096, 0.25), (4096, 0.20), (8192, 0.10), (114_688, 0.06), (math.inf, 0.02))
    left, total = float(memory_mib), 0.0
    for size, rate in tiers:
        take = min(left, size)
        total += take * rate
        left -= take
    return math.ceil(total)


@dataclass(frozen=True)
class Available:
    """What one pod may request on an otherwise empty Node."""

    cpu_m: int
    memory_mib: int
    gpus: int
    source: str
    """Where the figures come from, for error messages."""


class InstanceType(Model):
    """A node shape's capacity; `available` derives what a slurmd pod may request on it."""

    cpus: int
    memory_mib: int
    gpus: int
    gpu_type: str | None

    @property
    def available(self) -> Available:
        ds_cpu, ds_mem = DAEMONSET_GPU if self.gpus else DAEMONSET_CPU
        return Available(
            cpu_m=self.cpus * 1000 - kube_reserved_cpu_m(self.cpus) - ds_cpu,
            memory_mib=self.memory_mib - kube_reserved_memory_mib(self.memory_mib) - EVICTION_HARD_MIB - ds_mem,
            gpus=self.gpus,
            source="",
        )


# What the common GPU node shapes offer, so a NodeSet can't promise Slurm more than the node has.
INSTANCE_TYPES: dict[str, InstanceType] = {
    "H100x8": InstanceType(cpus=128, memory_mib=2_000_000, gpus=8, gpu_type="h100"),
    "H200x8": InstanceType(cpus=128, memory_mib=2_000_000, gpus=8, gpu_type="h200"),
    "A100x8": InstanceType(cpus=96, memory_mib=1_000_000, gpus=8, gpu_type="a100"),
    "L40Sx8": InstanceType(cpus=128, memory_mib=1_000_000, gpus=8, gpu_type="l40s"),
    "GB200x4": InstanceType(cpus=144, memory_mib=900_000, gpus=4, gpu_type="gb200"),
    "CPU-192": InstanceType(cpus=192, memory_mib=1_500_000, gpus=0, gpu_type=None),
    "CPU-64": InstanceType(cpus=64, memory_mib=256_000, gpus=0, gpu_type=None),
}


def cpu_text(millicores: int) -> str:
    """126610 -> '126.61', 500 -> '0.5': CPUs the way a person counts them."""
    return f"{millicores / 1000:.3f}".rstrip("0").rstrip(".")
