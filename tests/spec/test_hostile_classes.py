"""Hostile input by class (issue 33): each class refused before any resource or file exists, by
the check that owns it, naming the field the user wrote and what would be valid. Every case goes
through `parse_config` (what validate, render and the Pulumi program call); a few go through the
`sunk validate` command as users run it.

The classes and their owners:
- CIDRs: one parser (sunk.spec.base.Cidr) that takes only the canonical address/prefix form the
  API server takes, so no bare address, netmask, hostmask, zone or leading zero reaches a render;
- Secret and ConfigMap keys: Kubernetes' own key rule (no '.', '..', '..*'), wherever a key is named;
- Kubernetes values in verbatim sections (kubeschema's value rules): affinity weights, selector
  labels, topology keys, volume item keys and paths, Windows-only options;
- sunk's own domain: annotations and labels under any sunk.dev domain, Slurm's own environment;
- reserved namespaces for the operator (default, kube-*);
- a ServiceAccount token in pods whose role row grants none (login, slurmd);
- a key used for two purposes (sunk.spec.keyuse's table);
- per-GPU defaults no node can give, and a default set twice through `extra`;
- a cgroup setting that contradicts the GPUs Slurm hands out, or that does nothing;
- durations beyond Go's;
- YAML tags and aliases named by the field that holds them, not only by their line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk.spec import SpecError, keyuse
from sunk.spec.base import SecretRef
from sunk.spec.cluster import ClusterSpec
from sunk.spec.identity import ClientCertRef
from sunk.stackfile import parse_config
from tests.support.specs import spec_document

GPU = {"nodesets.cpu.gpus": {"count": 8, "type": "h100"}, "nodesets.cpu.memoryMib": 8192}
LDAP = {"uris": ["ldaps://ldap.acme.example:636"], "baseDn": "dc=acme,dc=example"}
TOKEN = {"projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}


def _problems(changes: dict[str, Any], operator: Any = False) -> list[str]:
    with pytest.raises(SpecError) as info:
        parse_config({"sunk:cluster": spec_document(**changes), "sunk:operator": operator}, "stack")
    return info.value.problems


def _lb(ranges: list[str]) -> dict[str, Any]:
    return {"login.service": {"type": "LoadBalancer", "sourceRanges": ranges}}


CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    # name: (changes, the field named, what the message must say)
    "cidr: a bare address": (_lb(["10.0.0.1"]), "login.service.sourceRanges[0]", "write '10.0.0.1/32'"),
    "cidr: a netmask": (_lb(["10.0.0.0/255.255.0.0"]), "login.service.sourceRanges[0]", "write '10.0.0.0/16'"),
    "cidr: a hostmask": (_lb(["10.0.0.0/0.0.255.255"]), "login.service.sourceRanges[0]", "write '10.0.0.0/16'"),
    "cidr: an IPv6 zone": (_lb(["fe80::1%eth0/128"]), "login.service.sourceRanges[0]", "IPv6 zone"),
    "cidr: a leading zero": (_lb(["10.0.0.0/08"]), "login.service.sourceRanges[0]", "write '10.0.0.0/8'"),
    "cidr: upper-case IPv6": (_lb(["2001:DB8::/32"]), "login.service.sourceRanges[0]", "write '2001:db8::/32'"),
    "cidr: the API server's address": (
        {"network": {"apiServerCidrs": ["10.96.0.1"]}},
        "network.apiServerCidrs[0]",
        "write '10.96.0.1/32'",
    ),
    "secret key ..data": (
        {"accounting.external": {"host": "db.example.com", "passwordSecret": {"name": "db", "key": "..data"}}},
        "accounting.external.passwordSecret.key",
        "Kubernetes refuses '.', '..' and keys starting with '..'",
    ),
    "volume item key ..data": (
        {"login.volumes": [{"name": "v", "mountPath": "/data", "secret": {"secretName": "s", "items": [{"key": "..data", "path": "a"}]}}]},
        "login.volumes[0].secret.items[0].key",
        "Kubernetes refuses '.', '..' and keys starting with '..'",
    ),
    "volume item path ..": (
        {"login.volumes": [{"name": "v", "mountPath": "/data", "configMap": {"name": "c", "items": [{"key": "a", "path": "../a"}]}}]},
        "login.volumes[0].configMap.items[0].path",
        "relative path without '..'",
    ),
    "affinity weight 0": (
        {"login.affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 0, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]}}},
        "login.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        "weight from 1 to 100",
    ),
    "affinity weight 101": (
        {"login.affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 101, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}}},
        "login.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
        "weight from 1 to 100",
    ),
    "selector label key": (
        {"login.affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"a b": "c"}}}]}}},
        "login.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchLabels.a b",
        "not a Kubernetes label key",
    ),
    "selector expression value": (
        {"login.affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchExpressions": [
                {"key": "team", "operator": "In", "values": ["a b"]}]}}]}}},
        "login.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].values[0]",
        "not a Kubernetes label value",
    ),
    "empty topology key": (
        {"login.affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "", "labelSelector": {"matchLabels": {"a": "c"}}}]}}},
        "login.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
        "a Node label key",
    ),
    "spread topology key": (
        {"login.topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "bad key", "whenUnsatisfiable": "DoNotSchedule"}]},
        "login.topologySpreadConstraints[0].topologyKey",
        "not a Kubernetes label key",
    ),
    "windows options": (
        {"login.securityContext": {"windowsOptions": {"runAsUserName": "x"}}},
        "login.securityContext.windowsOptions",
        "Linux Nodes only",
    ),
    "annotation under sunk.dev": ({"login.annotations": {"sunk.dev/x": "1"}}, "login.annotations", "sunk's own"),
    "annotation under a sunk subdomain": (
        {"nodesets.cpu.podAnnotations": {"x.slurm.sunk.dev/y": "1"}},
        "nodesets[0].podAnnotations",
        "sunk's own",
    ),
    "label under sunk.dev": ({"login.podLabels": {"sunk.dev/cluster": "x"}}, "login.podLabels", "sunk sets this label"),
    "SLURM_CONF on slurmd": (
        {"nodesets.cpu.env": [{"name": "SLURM_CONF", "value": "/tmp/x"}]},
        "nodesets[0].env[0].name",
        "another slurm.conf than the one sunk renders",
    ),
    "SLURMRESTD_SECURITY": (
        {"restapi.env": [{"name": "SLURMRESTD_SECURITY", "value": "disable_user_check"}]},
        "restapi.env[0].name",
        "safety checks",
    ),
    "token volume on login": (
        {"login.volumes": [{"name": "t", "mountPath": "/var/run/t", **TOKEN}]},
        "login.volumes[0].projected.sources[0].serviceAccountToken",
        "the login pods get none",
    ),
    "token volume on slurmd": (
        {"nodesets.cpu.volumes": [{"name": "t", "mountPath": "/var/run/t", **TOKEN}]},
        "nodesets[0].volumes[0].projected.sources[0].serviceAccountToken",
        "the compute pods get none",
    ),
    "CA certificate as the JWT key": (
        {"auth": {"jwt": {"existingSecret": {"name": "ldap", "key": "ca.crt"}},
                  "ldap": {**LDAP, "caSecret": {"name": "ldap", "key": "ca.crt"}}}},
        "auth.ldap.caSecret",
        "is also auth.jwt.existingSecret (the JWT signing key)",
    ),
    "client certificate's private key as the JWT key": (
        {"auth": {"jwt": {"existingSecret": {"name": "ldapc", "key": "tls.key"}},
                  "ldap": {**LDAP, "clientCertSecret": {"name": "ldapc"}}}},
        "auth.ldap.clientCertSecret.keyKey",
        "is also auth.jwt.existingSecret",
    ),
    "munge key as the database password": (
        {"auth.key": {"existingSecret": {"name": "keys", "key": "k"}},
         "accounting.external": {"host": "db.example.com", "passwordSecret": {"name": "keys", "key": "k"}}},
        "accounting.external.passwordSecret",
        "is also auth.key.existingSecret",
    ),
    "a Secret sunk makes as another purpose's": (
        {"auth": {"ldap": {**LDAP, "bindDn": "cn=x,dc=acme,dc=example",
                           "bindPasswordSecret": {"name": "research-jwt", "key": "jwt_hs256.key"}}}},
        "auth.ldap.bindPasswordSecret",
        "Secret research-jwt is one sunk makes, holding the JWT signing key",
    ),
    "DefMemPerGPU beyond any node": (
        {**GPU, "partitions.batch.defMemPerGpu": 4096},
        "partitions[0].defMemPerGpu",
        "use at most 1024",
    ),
    "DefCpuPerGPU beyond any node": (
        {**GPU, "partitions.batch.defCpuPerGpu": 2},
        "partitions[0].defCpuPerGpu",
        "start nowhere",
    ),
    "DefMemPerGPU twice through extra": (
        {**GPU, "partitions.batch.defMemPerGpu": 100, "partitions.batch.extra": ["DefMemPerGPU=200"]},
        "partitions[0].extra[0]",
        "set it through its own field (defMemPerGpu)",
    ),
    "cgroup disabled under GPUs": ({**GPU, "cgroup": {"plugin": "disabled"}}, "cgroup.plugin", "every GPU of its node"),
    "devices unconstrained under GPUs": (
        {**GPU, "cgroup": {"constrainDevices": False}},
        "cgroup.constrainDevices",
        "every GPU of its node",
    ),
    "cgroup settings with the plugin disabled": (
        {"cgroup": {"plugin": "disabled", "constrainRamSpace": False}},
        "cgroup.constrainRamSpace",
        "no effect with plugin disabled",
    ),
    "a scrape interval beyond Go's duration": (
        {"monitoring": {"enabled": True, "interval": "999999999999m"}},
        "monitoring.interval",
        "longer than a Go duration holds",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_class_is_refused_at_the_field_the_user_wrote(case: str) -> None:
    changes, field, says = CASES[case]
    problems = _problems(changes)
    assert any(p.startswith(f"{field}:") and says in p for p in problems), problems


@pytest.mark.parametrize("namespace", ["kube-system", "default", "kube-public", "kube-anything"])
def test_the_operator_may_not_take_kubernetes_own_namespaces(namespace: str) -> None:
    problems = _problems({}, operator={"namespace": namespace})
    assert any(p.startswith("sunk:operator.namespace:") and "Kubernetes' own namespace" in p for p in problems), (
        problems
    )


@pytest.mark.parametrize(
    "changes",
    [
        _lb(["10.0.0.0/8", "2001:db8::/32", "203.0.113.7/32"]),
        {"auth.key": {"existingSecret": {"name": "keys", "key": "munge.key"}},
         "auth.jwt": {"existingSecret": {"name": "keys", "key": "jwt.key"}}},
        {**GPU, "partitions.batch.defMemPerGpu": 1024},
        {"cgroup": {"plugin": "disabled"}},
        {"monitoring": {"enabled": True, "interval": "1m"}},
    ],
    ids=["canonical CIDRs", "two keys of one Secret", "a per-GPU default a node can give", "cgroup off on CPU nodes", "a minute"],
)  # fmt: skip
def test_what_is_valid_stays_valid(changes: dict[str, Any]) -> None:
    parse_config({"sunk:cluster": spec_document(**changes), "sunk:operator": False}, "stack")


def _ref_fields(model: type, path: str, seen: set[type]) -> set[str]:
    """Paths of every SecretRef or ClientCertRef field under `model`, through nested models
    (optional, listed or not)."""
    out: set[str] = set()
    if model in seen:
        return out
    seen = seen | {model}
    for name, info in model.model_fields.items():  # type: ignore[attr-defined]
        alias = info.alias or name
        where = f"{path}.{alias}" if path else alias
        for kind in _model_types(info.annotation):
            if kind in (SecretRef, ClientCertRef):
                out.add(where)
            else:
                out |= _ref_fields(kind, where, seen)
    return out


def _model_types(annotation: Any) -> list[type]:
    from typing import get_args

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [t for arg in get_args(annotation) for t in _model_types(arg)]


def test_every_secret_key_field_of_the_spec_is_a_row_of_the_key_use_table() -> None:
    # A SecretRef field added next month without a row would escape the one-key-one-purpose check.
    assert _ref_fields(ClusterSpec, "", set()) == keyuse.FIELDS


def test_a_tag_and_an_alias_are_named_by_their_field(tmp_path: Path) -> None:
    text = yaml.safe_dump({"config": {"sunk:cluster": spec_document()}}, sort_keys=False)
    text = text.replace("cpus: 4", "cpus: !!int 4").replace(
        "memoryMib: 4096", "memoryMib: &m 4096\n      features: [*m]"
    )
    path = tmp_path / "Pulumi.acme-tags.yaml"
    path.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "sunk", "validate", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "config.sunk:cluster.nodesets[0].cpus: explicit tag 'tag:yaml.org,2002:int' is not accepted" in done.stderr
    assert "config.sunk:cluster.nodesets[0].features[0]: aliases (*m) are not accepted" in done.stderr


def test_validate_names_a_hostile_cidr_and_writes_nothing(tmp_path: Path) -> None:
    doc = {"config": {"sunk:cluster": spec_document(**_lb(["10.0.0.0/255.255.0.0"]))}}
    path = tmp_path / "Pulumi.acme-cidr.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "sunk", "render", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "login.service.sourceRanges[0]: '10.0.0.0/255.255.0.0'" in done.stderr + done.stdout
    assert not out.exists()


def test_the_pod_gate_holds_tokens_to_the_role_table() -> None:
    # The spec refuses a token volume by its field; the gate is the backstop for whatever else
    # reaches a pod (a field added later, a manifest builder's mistake): it reads the pod as rendered.
    from sunk import podgate, roles

    quiet = {"automountServiceAccountToken": False, "containers": [{"name": "sshd"}]}
    assert podgate._token_problems(roles.role("login"), quiet) == []
    projected = {**quiet, "volumes": [{"name": "t", **TOKEN}]}
    assert podgate._token_problems(roles.role("login"), projected) == [
        "volumes ['t'] project a ServiceAccount token, and role login gets none"
    ]
    automounted = {"containers": [{"name": "slurmd"}]}
    assert podgate._token_problems(roles.role("slurmd"), automounted) == [
        "automountServiceAccountToken is not false, and role slurmd gets no token"
    ]
    assert podgate._token_problems(roles.role("syncer"), {**projected, "automountServiceAccountToken": True}) == []
