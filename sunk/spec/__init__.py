"""The typed model of a SUNK cluster. Import from here."""

from sunk.images import SLURM_VERSION
from sunk.spec.base import Image, Model, Resources, SecretRef
from sunk.spec.cluster import ClusterSpec
from sunk.spec.errors import SpecError, load_spec
from sunk.spec.nodeset import INSTANCE_TYPES, GpuSpec, NodeSetSpec
from sunk.spec.operator import OperatorSpec, TenantPolicy
from sunk.spec.scheduling import PartitionSpec, QosSpec, TopologySpec

__all__ = [
    "INSTANCE_TYPES",
    "SLURM_VERSION",
    "ClusterSpec",
    "GpuSpec",
    "Image",
    "Model",
    "NodeSetSpec",
    "OperatorSpec",
    "PartitionSpec",
    "QosSpec",
    "Resources",
    "SecretRef",
    "SpecError",
    "TenantPolicy",
    "TopologySpec",
    "load_spec",
]
