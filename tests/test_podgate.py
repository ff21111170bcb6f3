"""The pod gate (sunk.podgate): everything a stack adds to a pod, checked as rendered against the
Kubernetes schema, the per-role table and the stack's operator policy before any resource exists.
One test per class of the hostile corpus; each goes through `parse_config`, as validate, render
and the Pulumi program do."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sunk import podgate
from sunk.podgate import gate_problems, stack_objects
from sunk.spec import SpecError, load_spec
from sunk.stackfile import list_stacks, load_stack, parse_config
from tests.support.specs import spec_document
from tests.support.stacks import FIXTURE_STACKS

BASE = spec_document(**{"nodesets.cpu.memoryMib": 8192})
LDAP = {
    "uris": ["ldaps://ldap.acme.example:636"],
    "baseDn": "dc=acme,dc=example",
    "bindDn": "cn=sssd,dc=acme,dc=example",
    "bindPasswordSecret": {"name": "ldap-bind", "key": "password"},
}


def _problems(cluster: dict[str, Any], operator: Any = False) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_config({"sunk:cluster": cluster, "sunk:operator": operator}, "stack")
    return info.value.problems


def _with(**sections: Any) -> dict[str, Any]:
    return spec_document(BASE, **sections)


@pytest.mark.parametrize("stack", list_stacks(FIXTURE_STACKS))
def test_the_shipped_stacks_pass_the_gate(stack: str) -> None:
    loaded = load_stack(stack, FIXTURE_STACKS)
    assert gate_problems(loaded.spec, loaded.operator) == []


def test_capabilities_all_on_sshd_is_refused() -> None:
    problems = _problems(_with(login={"securityContext": {"capabilities": {"add": ["ALL"]}}}))
    assert any("container sshd adds capabilities ['ALL'] beyond role login's" in p for p in problems), problems


def test_ldap_bind_password_stays_out_of_login_and_slurmd_main_containers() -> None:
    volume = {"name": "bind", "mountPath": "/bind", "secret": {"secretName": "ldap-bind"}}
    env = {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "ldap-bind", "key": "password"}}}
    auth = {"ldap": LDAP}
    problems = _problems(_with(auth=auth, login={"volumes": [volume]}))
    assert any(
        p.startswith("login.volumes[0].secret.secretName: ldap-bind holds the LDAP bind password") for p in problems
    )
    nodesets = [{**BASE["nodesets"][0], "env": [env]}]
    problems = _problems(_with(auth=auth, nodesets=nodesets))
    assert any(p.startswith("nodesets[0].env[0].valueFrom.secretKeyRef.name: ldap-bind holds") for p in problems)


def test_login_host_keys_stay_out_of_slurmd_pods() -> None:
    volume = {"name": "keys", "mountPath": "/keys", "secret": {"secretName": "research-login-host-keys"}}
    problems = _problems(_with(nodesets=[{**BASE["nodesets"][0], "volumes": [volume]}]))
    assert any("research-login-host-keys holds login's SSH host private keys" in p for p in problems), problems


def test_one_secret_key_for_the_munge_key_and_the_jwt_key_is_refused() -> None:
    ref = {"name": "keys", "key": "k"}
    problems = _problems(_with(auth={"key": {"existingSecret": ref}, "jwt": {"existingSecret": ref}}))
    assert any(
        p.startswith("auth.jwt.existingSecret: Secret keys key k is also auth.key.existingSecret") for p in problems
    )


POLICY = {"policy": {"imagePrefixes": ["ghcr.io/sunk-dev/"], "hostPaths": ["/data"]}}


def test_an_image_volume_from_an_unlisted_registry_is_refused_by_the_stacks_policy() -> None:
    volume = {"name": "tools", "mountPath": "/tools", "image": {"reference": "evil.example/tools:1"}}
    problems = _problems(_with(nodesets=[{**BASE["nodesets"][0], "volumes": [volume]}]), POLICY)
    assert any("volume tools: image evil.example/tools:1 is not allowed" in p for p in problems), problems


def test_a_host_path_the_stacks_policy_refuses_is_refused_at_validate() -> None:
    volume = {"name": "etc", "mountPath": "/host-etc", "hostPath": {"path": "/etc"}}
    problems = _problems(_with(nodesets=[{**BASE["nodesets"][0], "volumes": [volume]}]), POLICY)
    assert any("volume etc: hostPath /etc is not allowed" in p for p in problems), problems
    allowed = {**volume, "hostPath": {"path": "/data/x"}}
    spec, _ = parse_config(
        {"sunk:cluster": _with(nodesets=[{**BASE["nodesets"][0], "volumes": [allowed]}]), "sunk:operator": POLICY}, "s"
    )
    assert spec.nodesets[0].volumes[0].hostPath == {"path": "/data/x"}


def test_a_sidecar_image_the_stacks_policy_refuses_is_refused() -> None:
    sidecar = {"name": "tool", "image": {"repository": "evil.example/tool", "tag": "1"}}
    problems = _problems(_with(nodesets=[{**BASE["nodesets"][0], "sidecars": [sidecar]}]), POLICY)
    assert any("containers tool: image evil.example/tool:1 is not allowed" in p for p in problems), problems


@pytest.mark.parametrize("key", ["slurm.sunk.dev/nodeset", "sunk.dev/nodeset", "app.kubernetes.io/component"])
def test_cluster_labels_may_not_take_sunks_selector_keys(key: str) -> None:
    problems = _problems(_with(labels={key: "cpu"}))
    assert any(p.startswith(f"labels.{key}") or (p.startswith("labels") and key in p) for p in problems), problems


def test_a_service_selecting_another_roles_pods_is_found() -> None:
    spec = load_spec(BASE)
    from sunk.podgate import _selector_problems, stack_objects

    objs, _ = stack_objects(spec)
    for m in objs:  # as if a label the spec adds equalled the NodeSet Service's selector
        if m["kind"] == "StatefulSet" and m["metadata"]["name"] == "research-controller":
            selector = next(o for o in objs if o["kind"] == "Service" and "cpu" in o["metadata"]["name"])
            m["spec"]["template"]["metadata"]["labels"].update(selector["spec"]["selector"])
    assert any("selects StatefulSet/research-controller, a controller pod" in p for p in _selector_problems(objs))


def test_a_sidecar_named_like_sunks_sssd_is_refused() -> None:
    sidecar = {"name": "sssd", "image": {"repository": "ghcr.io/sunk-dev/tool", "tag": "1"}}
    problems = _problems(_with(auth={"ldap": LDAP}, nodesets=[{**BASE["nodesets"][0], "sidecars": [sidecar]}]))
    assert any("container names ['sssd'] twice in one pod" in p for p in problems), problems


@pytest.mark.parametrize(
    ("role", "container", "how", "secret"),
    [
        ("controller", "slurmctld", "env", "ldap-bind"),
        ("controller", "slurmctld", "volumes", "ldap-bind"),
        ("accounting", "slurmdbd", "env", "ldap-bind"),
        ("accounting", "slurmdbd", "volumes", "ldap-bind"),
    ],
)
def test_ldap_secrets_stay_in_the_sssd_sidecar_not_its_pods_other_containers(
    role: str, container: str, how: str, secret: str
) -> None:
    """The controller and accounting pods hold the LDAP Secrets for their sssd sidecar; the main
    container beside it may not take them (the role allows them per container, not per pod)."""
    reach: Any = (
        [{"name": "X", "valueFrom": {"secretKeyRef": {"name": secret, "key": "password"}}}]
        if how == "env"
        else [{"name": "v", "mountPath": "/v", "secret": {"secretName": secret}}]
    )
    problems = _problems(_with(auth={"ldap": LDAP}, **{role: {how: reach}}))
    assert any(f"container {container} " in p and "may not reach" in p for p in problems), problems
    assert all(p.startswith("pods: ") for p in problems), problems


def _pod(spec: Any, kind: str, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    objs, _ = stack_objects(spec)
    for obj in objs:
        if (obj["kind"], obj["metadata"]["name"]) == (kind, name):
            tmpl = copy.deepcopy(obj["spec"]["template"])
            return tmpl["metadata"], tmpl["spec"]
    raise AssertionError(f"no {kind}/{name}")


def _container(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(c for c in [*pod.get("initContainers", []), *pod["containers"]] if c["name"] == name)


def test_the_gate_checks_each_containers_secrets_as_rendered() -> None:
    """Past the spec's own checks (a pod builder that mounts the wrong volume): sshd mounting the
    sssd sidecar's LDAP volume, the sssd sidecar mounting sshd's host keys, and a Secret volume
    no container mounts, of a purpose the role lacks, are each found."""
    spec = load_stack("acme-prod", FIXTURE_STACKS).spec
    meta, pod = _pod(spec, "Deployment", "research-login")
    assert podgate._pod_problems(spec, None, meta, pod) == []
    secret_volumes = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    ldap = next(n for n, s in secret_volumes.items() if s == "research-ldap")
    keys = next(n for n, s in secret_volumes.items() if s.endswith("-login-host-keys"))

    wrong = copy.deepcopy(pod)
    _container(wrong, "sshd")["volumeMounts"].append({"name": ldap, "mountPath": "/x"})
    _container(wrong, "sssd")["volumeMounts"].append({"name": keys, "mountPath": "/y"})
    problems = podgate._pod_problems(spec, None, meta, wrong)
    assert any(p.startswith(f"container sshd mounts volume {ldap}: Secret research-ldap") for p in problems), problems
    assert any(p.startswith(f"container sssd mounts volume {keys}: Secret") for p in problems), problems

    meta, pod = _pod(spec, "Deployment", "research-restapi")
    pod["volumes"].append({"name": "stray", "secret": {"secretName": "research-jwt"}})
    problems = podgate._pod_problems(spec, None, meta, pod)
    assert problems == [
        "volume stray: Secret research-jwt holds jwt, which role restapi's pods may not reach (allowed there: auth)"
    ]


def test_a_whole_secret_needs_every_purpose_it_holds_and_a_named_key_one() -> None:
    """One Secret holding both the auth key and the JWT key (each under its own key): slurmd's
    munge sidecar may mount the auth key item, but no slurmd container may take the whole Secret
    (envFrom), which would hand jobs the JWT signing key."""
    spec = load_spec(_with(auth={"key": {"existingSecret": {"name": "keys", "key": "munge.key"}},
                                 "jwt": {"existingSecret": {"name": "keys", "key": "jwt.key"}}}))  # fmt: skip
    objs, _ = stack_objects(spec)
    meta, pod = next((m["metadata"], m["spec"]) for m in objs if m["kind"] == "Pod")
    assert podgate._pod_problems(spec, None, meta, pod) == []
    _container(pod, "slurmd").setdefault("envFrom", []).append({"secretRef": {"name": "keys"}})
    assert podgate._pod_problems(spec, None, meta, pod) == [
        "container slurmd envFrom: Secret keys holds auth, jwt, which container slurmd of role slurmd may not reach "
        "(allowed there: auth)"
    ]
