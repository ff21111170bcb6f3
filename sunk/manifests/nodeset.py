"""One NodeSet custom resource per spec NodeSet: the user's NodeSetSpec plus what the operator
needs to build slurmd pods without reading the stack (sunk.nodeset_resource.NodeSetResourceSpec)."""

from __future__ import annotations

from sunk import keys, naming
from sunk.manifests.auth import AuthRefs
from sunk.manifests.config import nodeset_config_files, nodeset_hash
from sunk.manifests.meta import Manifest, metadata, obj
from sunk.manifests.pods import shared_claim
from sunk.manifests.podsettings import object_meta
from sunk.manifests.sssd import sssd_refs
from sunk.nodeset_resource import API_VERSION, KIND, NodeSetResourceSpec
from sunk.spec.cluster import ClusterSpec
from sunk.spec.nodeset import NodeSetSpec
from sunk.spec.scheduling import SharedVolumeSpec

COMPONENT = "compute"


def _compute_volumes(spec: ClusterSpec) -> list[SharedVolumeSpec]:
    """Shared volumes that mount on compute, each pointing at a claim that exists (sunk creates
    the `create:` ones), so the operator only ever mounts claims."""
    out = []
    for v in spec.shared_volumes:
        if "compute" not in v.mount_on:
            continue
        fields = v.model_dump(exclude_unset=True, exclude={"create", "existing_claim"})
        out.append(SharedVolumeSpec.model_validate({**fields, "existing_claim": shared_claim(spec, v)}))
    return out


def resource_spec(spec: ClusterSpec, ns: NodeSetSpec, refs: AuthRefs) -> NodeSetResourceSpec:
    fields = ns.model_dump(exclude_unset=True)
    extra = {
        "cluster_name": spec.name,
        "slurmd_image": spec.slurmd_image(ns).ref,
        "config_files": nodeset_config_files(spec, ns),
        "auth_type": spec.auth.type,
        "auth_secret": refs.auth.secret,
        "jwt_secret": refs.jwt.secret,
        "config_hash": nodeset_hash(spec, ns),
        "shared_volumes": _compute_volumes(spec),
        "slurm_version": spec.slurm.version,
        "topology": spec.topology,
        "topology_extra": list(spec.extra_config.topology_conf),
    }
    if spec.topologies:
        extra["topologies"] = list(spec.topologies)
    if ns.gpus is not None and ns.gpus.from_node_labels and spec.extra_config.gres_conf:
        extra["gres_extra"] = list(spec.extra_config.gres_conf)
    if (sssd := sssd_refs(spec)) is not None:
        extra["sssd"] = sssd
    # Only when an existing Secret names its key differently from the convention.
    default_auth_key = "munge.key" if spec.auth.type == "munge" else "slurm.key"
    if refs.auth.key != default_auth_key:
        extra["auth_secret_key"] = refs.auth.key
    if refs.jwt.key != "jwt_hs256.key":
        extra["jwt_secret_key"] = refs.jwt.key
    if spec.images.pull_secrets:
        # The operator reads no stack: the cluster's pull Secrets travel in the NodeSet, first.
        extra["image_pull_secrets"] = list(dict.fromkeys([*spec.images.pull_secrets, *ns.image_pull_secrets]))
    return NodeSetResourceSpec.model_validate({**fields, **extra})


def nodeset_resource(spec: ClusterSpec, ns: NodeSetSpec, refs: AuthRefs) -> Manifest:
    # exclude_unset keeps what the user wrote: re-parsing must not see defaults as choices
    # (an operator parsing the object sees the spec as written).
    body = resource_spec(spec, ns, refs).model_dump(mode="json", by_alias=True, exclude_unset=True)
    meta = object_meta(
        metadata(spec, naming.nodeset(spec, ns.name), COMPONENT, extra_labels={keys.NODESET: ns.name}), ns
    )
    return obj(API_VERSION, KIND, meta, spec=body)


def nodeset_resources(spec: ClusterSpec, refs: AuthRefs) -> list[Manifest]:
    return [nodeset_resource(spec, ns, refs) for ns in spec.nodesets]
