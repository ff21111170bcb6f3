"""The NodeSet CRD's schema is a structural schema generated from the model the operator parses,
and the NodeSet objects the components write survive a round trip through that model."""

from __future__ import annotations

from typing import Any

import pytest
from openapi_schema_validator import OAS30Validator

from sunk.manifests.auth import auth_refs
from sunk.manifests.nodeset import nodeset_resource, resource_spec
from sunk.manifests.nodeset_crd import (
    PRINTER_COLUMNS,
    UnsupportedSchema,
    closed,
    nodeset_crd,
    open_api_schema,
    structural,
)
from sunk.nodeset_resource import NodeSetResourceSpec
from sunk.spec.cluster import ClusterSpec
from sunk.spec.pod import VOLUME_SOURCES
from tests.support.stacks import FIXTURE_STACKS

from .conftest import STACKS


def _nodes(schema: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, schema)]
    for key, sub in schema.get("properties", {}).items():
        out += _nodes(sub, f"{path}.{key}")
    if isinstance(schema.get("items"), dict):
        out += _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        out += _nodes(schema["additionalProperties"], f"{path}{{}}")
    return out


def test_schema_is_structural() -> None:
    """The rules the API server enforces (no $ref, every node typed, junctors only for
    int-or-string, free-form maps marked) plus ours (no titles, closed models)."""
    for path, node in _nodes(open_api_schema()):
        assert "$ref" not in node and "$defs" not in node and "title" not in node, path
        assert "const" not in node and "default" not in node, path
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert "anyOf" not in node and "oneOf" not in node and "allOf" not in node, path
        assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, path
        # The API server refuses both on one node ("mutual exclusive"); it prunes unknown fields.
        assert not ("properties" in node and "additionalProperties" in node), path
        if node["type"] == "object" and path not in {".metadata"}:
            model = "properties" in node
            typed_map = isinstance(node.get("additionalProperties"), dict)
            free = node.get("x-kubernetes-preserve-unknown-fields") is True
            assert model or typed_map or free, f"{path}: object neither a model, a typed map nor free-form"
            if free:
                # Kubernetes' own types are typed from its schema; only what Kubernetes leaves
                # untyped itself (managedFields' FieldsV1 inside an ephemeral volume's claim
                # template) stays free-form.
                assert path.endswith(".fieldsV1"), f"{path}: only Kubernetes' untyped FieldsV1 is free-form"


def test_schema_follows_the_model() -> None:
    spec = open_api_schema()["properties"]["spec"]
    assert set(spec["properties"]) == {f.alias or n for n, f in NodeSetResourceSpec.model_fields.items()}
    required = {f.alias or n for n, f in NodeSetResourceSpec.model_fields.items() if f.is_required()}
    assert set(spec["required"]) == required
    assert spec["properties"]["replicas"]["nullable"] is True
    assert spec["properties"]["updateStrategy"]["properties"]["maxUnavailable"]["x-kubernetes-int-or-string"]
    assert spec["properties"]["cpus"]["minimum"] == 1  # PositiveInt (exclusiveMinimum 0) in OpenAPI v3.0 terms
    # path under /etc/slurm -> ConfigMap name: a typed map the API server checks value types of.
    assert spec["properties"]["configFiles"]["additionalProperties"] == {"type": "string"}
    assert "configFiles" in spec["required"]


def test_crd_object() -> None:
    crd = nodeset_crd()
    version = crd["spec"]["versions"][0]
    assert crd["metadata"]["name"] == "nodesets.slurm.sunk.dev"
    assert version["subresources"]["status"] == {}
    # The scale subresource (kubectl scale, HPA, KEDA) points at fields the schema has.
    scale = version["subresources"]["scale"]
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    for path in (scale["specReplicasPath"], scale["statusReplicasPath"], scale["labelSelectorPath"]):
        part, field = path.strip(".").split(".")
        assert field in schema[part]["properties"], path
    assert scale["specReplicasPath"] == ".spec.replicas" and scale["labelSelectorPath"] == ".status.selector"
    assert [c["name"] for c in PRINTER_COLUMNS if "priority" not in c] == [
        "Desired",
        "Ready",
        "Idle",
        "Allocated",
        "Drained",
        "Age",
    ]
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    for column in PRINTER_COLUMNS:
        field = column["jsonPath"].split(".")
        if field[1] == "status":
            assert field[2] in status, column


@pytest.mark.parametrize("stack", STACKS)
def test_nodeset_objects_round_trip_through_the_operators_model(specs: dict[str, ClusterSpec], stack: str) -> None:
    spec = specs[stack]
    refs = auth_refs(spec)
    validator = OAS30Validator(closed(open_api_schema()))
    for ns in spec.nodesets:
        obj = nodeset_resource(spec, ns, refs)
        assert not list(validator.iter_errors(obj))
        parsed = NodeSetResourceSpec.model_validate(obj["spec"])
        assert parsed == resource_spec(spec, ns, refs)
        # What the user wrote is carried verbatim; defaults stay the model's business.
        assert parsed.model_dump(
            exclude={
                "cluster_name",
                "slurmd_image",
                "config_files",
                "auth_type",
                "auth_secret",
                "jwt_secret",
                "config_hash",
                "shared_volumes",
                "slurm_version",
                "topology",
                "topologies",
                "topology_extra",
                "gres_extra",
                "auth_secret_key",
                "jwt_secret_key",
                "sssd",
                "image_pull_secrets",
            }
        ) == ns.model_dump(exclude={"image_pull_secrets"})
        # The cluster's images.pullSecrets travel in the NodeSet, before its own.
        assert parsed.image_pull_secrets == list(dict.fromkeys([*spec.images.pull_secrets, *ns.image_pull_secrets]))


def test_schema_rejects_what_the_model_rejects() -> None:
    validator = OAS30Validator(closed(open_api_schema()))
    good: dict[str, Any] = {
        "apiVersion": "slurm.sunk.dev/v1alpha1",
        "kind": "NodeSet",
        "metadata": {"name": "x"},
        "spec": {
            "name": "cpu",
            "cpus": 4,
            "memoryMib": 1024,
            "clusterName": "c",
            "slurmdImage": "i",
            "configFiles": {"slurm.conf": "c-slurm-conf", "prolog.d/00-x.sh": "c-prolog-00-x-sh"},
            "authSecret": "a",
            "jwtSecret": "j",
        },
    }
    assert not list(validator.iter_errors(good))
    for bad_spec in (
        {**good["spec"], "cpu": 4},  # unknown field
        {**good["spec"], "cpus": 0},  # PositiveInt
        {**good["spec"], "mode": "daemonset"},  # enum
        {**good["spec"], "updateStrategy": {"maxUnavailable": 1.5}},  # int-or-string
        {k: v for k, v in good["spec"].items() if k != "configFiles"},  # required
        {**good["spec"], "configFiles": {"slurm.conf": 1}},  # ConfigMap names are strings
    ):
        assert list(validator.iter_errors({**good, "spec": bad_spec})), bad_spec


@pytest.mark.parametrize(
    ("files", "error"),
    [
        ({"slurm.conf": "c-slurm-conf", "../x": "c-x"}, "not a path relative to /etc/slurm"),
        ({"slurm.conf": "c-slurm-conf", "/etc/passwd": "c-x"}, "not a path relative to /etc/slurm"),
        ({"slurm.conf": "c-slurm-conf", "prolog.d//x": "c-x"}, "not a path relative to /etc/slurm"),
        ({"slurm.conf": "C_Slurm"}, "DNS-1123 subdomain"),
        ({"cgroup.conf": "c-cgroup-conf"}, "configFiles must name the ConfigMap of slurm.conf"),
    ],
)
def test_model_rejects_bad_config_files(files: dict[str, str], error: str) -> None:
    """What the schema cannot say (path shape, name syntax, slurm.conf present), the operator's
    model does: such a NodeSet gets SpecValid=False instead of pods."""
    base = {"name": "cpu", "cpus": 4, "memoryMib": 1024, "clusterName": "c", "slurmdImage": "i"}
    with pytest.raises(ValueError, match=error):
        NodeSetResourceSpec.model_validate({**base, "authSecret": "a", "jwtSecret": "j", "configFiles": files})


def test_closed_schema_is_for_validators_only() -> None:
    strict = closed(open_api_schema())
    assert strict["additionalProperties"] is False
    assert strict["properties"]["spec"]["properties"]["gpus"]["additionalProperties"] is False
    # Kubernetes' own types are closed too: an unknown field in a volume source is an error.
    nfs = strict["properties"]["spec"]["properties"]["volumes"]["items"]["properties"]["nfs"]
    assert nfs["additionalProperties"] is False and nfs["required"] == ["server", "path"]
    assert strict["properties"]["spec"]["properties"]["nodeSelector"]["additionalProperties"] == {"type": "string"}
    assert "additionalProperties" not in open_api_schema()["properties"]["spec"]


def test_unsupported_constructs_fail_loudly() -> None:
    with pytest.raises(UnsupportedSchema, match="union"):
        structural({"anyOf": [{"type": "string"}, {"type": "boolean"}]}, {}, "x")
    with pytest.raises(UnsupportedSchema, match="untyped"):
        structural({"description": "anything"}, {}, "y")


def test_schema_checks_kubernetes_types_as_the_api_server_would() -> None:
    """A hand-written NodeSet's volume sources, affinity and securityContext are checked by the CRD
    against Kubernetes' own definitions (closed, as kubectl's strict field validation does)."""
    validator = OAS30Validator(closed(open_api_schema()))
    spec = load_stack_spec()
    good = nodeset_resource(spec, spec.nodesets[0], auth_refs(spec))
    good["spec"]["volumes"] = [
        {"name": "dshm", "mountPath": "/dev/shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        {"name": "tools", "mountPath": "/t", "nfs": {"server": "10.0.0.5", "path": "/t"}},
    ]
    good["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    }
    good["spec"]["securityContext"] = {"seccompProfile": {"type": "Unconfined"}}
    assert not list(validator.iter_errors(good))
    for volume in (
        {"name": "t", "mountPath": "/t", "nfs": {"path": "/t"}},  # no server
        {"name": "t", "mountPath": "/t", "nfs": {"server": "a", "path": "/t", "readonly": True}},  # unknown field
        {"name": "t", "mountPath": "/t", "emptyDir": {"sizeLimit": True}},  # not a quantity
    ):
        bad = {**good, "spec": {**good["spec"], "volumes": [volume]}}
        assert list(validator.iter_errors(bad)), volume
    bad = {**good, "spec": {**good["spec"], "affinity": {"nodeAffinity": {"required": []}}}}
    assert list(validator.iter_errors(bad))
    for v in VOLUME_SOURCES:  # every source is typed in the CRD, none free-form
        node = open_api_schema()["properties"]["spec"]["properties"]["volumes"]["items"]["properties"][v]
        assert node["type"] == "object" and "x-kubernetes-preserve-unknown-fields" not in node, v


def load_stack_spec() -> ClusterSpec:
    from sunk.stackfile import load_stack

    return load_stack("acme-prod", FIXTURE_STACKS).spec
