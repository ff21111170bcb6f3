"""A node's GRES (https://slurm.schedmd.com/gres.html): what its `slurmd --conf` line says
(`Gres=gpu:h100:8,shard:32`) and its gres.conf, from the NodeSet spec or, with
`gpus.fromNodeLabels`, from the labels NVIDIA GPU feature discovery puts on its Node."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from sunk.spec.nodeset import GpuSpec

PRODUCT = "nvidia.com/gpu.product"
COUNT = "nvidia.com/gpu.count"
MIG_STRATEGY = "nvidia.com/mig.strategy"
REPLICAS = "nvidia.com/gpu.replicas"
_MIG_COUNT = re.compile(r"nvidia\.com/mig-([0-9]+g\.[0-9]+gb)\.count")
_SINGLE_MIG = re.compile(r".*-MIG-([0-9]+g\.[0-9]+gb)")
_TYPE_JUNK = re.compile(r"[^a-z0-9_.]+")
_MAX_TYPE = 32


@dataclass(frozen=True)
class Gres:
    """One node's GPUs: (type, count) pairs, shards in all, and how slurmd finds the devices."""

    gpus: tuple[tuple[str, int], ...]
    shards: int = 0
    autodetect: bool = False
    mig: bool = False
    device_pattern: str = "/dev/nvidia"
    source: str = "spec"
    """`spec`, or `labels` when GPU feature discovery's labels said it."""

    @property
    def total(self) -> int:
        return sum(n for _, n in self.gpus)

    def words(self) -> str:
        """The `Gres=` value of the node line, e.g. `gpu:h100:8,shard:32`."""
        parts = [f"gpu:{t}:{n}" for t, n in self.gpus]
        if self.shards:
            parts.append(f"shard:{self.shards}")
        return ",".join(parts)

    def conf_lines(self) -> list[str]:
        """gres.conf lines. Slurm drops GPUs without a device file (measured 2026-11 on 24.11), so without
        MIG each GPU is named by its file; MIG instances only NVML can name, so a MIG node's
        gres.conf is AutoDetect=nvml alone (validated before)."""
        lines = ["AutoDetect=nvml"] if self.autodetect else []
        if self.mig:
            return [*lines, *([f"Name=shard Count={self.shards}"] if self.shards else [])]
        first = 0
        for gtype, n in self.gpus:
            lines.append(f"Name=gpu Type={gtype} File={_files(self.device_pattern, first, n)}")
            first += n
        if self.shards:
            lines.append(f"Name=shard Count={self.shards} File={_files(self.device_pattern, 0, first)}")
        return lines


def _files(pattern: str, first: int, n: int) -> str:
    return f"{pattern}{first}" if n == 1 else f"{pattern}[{first}-{first + n - 1}]"


def spec_gres(g: GpuSpec) -> Gres:
    return Gres(((g.type, g.count),), g.count * g.shards_per_gpu, g.autodetect == "nvml", False, g.device_pattern)


def gres_type(product: str) -> str:
    """A GRES type from a GPU product label: lowercase, every run of other characters one '_',
    the vendor prefix and a time-slicing `-SHARED` suffix dropped
    (`NVIDIA-H100-80GB-HBM3` -> `h100_80gb_hbm3`), at most 32 characters."""
    text = product.removesuffix("-SHARED").lower().removeprefix("nvidia-")
    return _TYPE_JUNK.sub("_", text).strip("_")[:_MAX_TYPE].rstrip("_")


def _count(labels: Mapping[str, str], key: str) -> int | None:
    value = labels.get(key, "")
    return int(value) if value.isdigit() else None


def node_gres(g: GpuSpec, labels: Mapping[str, str]) -> Gres:
    """The node's GRES from its Node labels (GPU feature discovery), else from the spec.

    - `nvidia.com/gpu.product` and `nvidia.com/gpu.count`: type and count;
    - MIG `single` (product `...-MIG-1g.5gb`): `gpu.count` instances of type `1g.5gb`;
      MIG `mixed`: one type per `nvidia.com/mig-<profile>.count`, beside the full GPUs;
    - `nvidia.com/gpu.replicas` above 1 (time-slicing): that many shards per GPU.
    Raises ValueError for MIG without autodetect nvml (only NVML names MIG device files)."""
    product, count = labels.get(PRODUCT, ""), _count(labels, COUNT)
    strategy = labels.get(MIG_STRATEGY, "")
    gpus: list[tuple[str, int]] = []
    mig = False
    if strategy == "single" and (m := _SINGLE_MIG.fullmatch(product.removesuffix("-SHARED"))) and count:
        gpus.append((m.group(1), count))
        mig = True
    else:
        if product and count:
            gpus.append((gres_type(product) or g.type, count))
        if strategy == "mixed":
            found = sorted(
                (m.group(1), n) for k in labels if (m := _MIG_COUNT.fullmatch(k)) and (n := _count(labels, k))
            )
            gpus += found
            mig = bool(found)
    if not gpus:
        return spec_gres(g)
    replicas = _count(labels, REPLICAS) or 1
    per_gpu = replicas if replicas > 1 else g.shards_per_gpu
    shards = sum(n for _, n in gpus) * per_gpu
    if mig and g.autodetect != "nvml":
        raise ValueError(
            f"gpus.autodetect: the Node's GPUs are MIG instances ({MIG_STRATEGY}={strategy}); only NVML "
            "names their device files, so set gpus.autodetect: nvml"
        )
    return Gres(tuple(gpus), shards, g.autodetect == "nvml", mig, g.device_pattern, "labels")


__all__ = ["Gres", "gres_type", "node_gres", "spec_gres"]
