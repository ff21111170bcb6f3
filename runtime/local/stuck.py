"""Why a pod waits, in the words a kubelet and a scheduler use, and what the user must create when
the wait is on them: pure functions over a pod and its Warning Events, read by `sunk local up`.

A pod waits on the user when it names a Secret, a ConfigMap, a key of one, or a
PersistentVolumeClaim that doesn't exist: the stack names it (an LDAP bind Secret, an external
database's password Secret, a /home claim) and sunk never makes it. The kubelet's FailedMount
Event or its CreateContainerConfigError says which; `remedy` turns that into the command to run,
with the keys the pod reads from it. A Secret or claim the cluster makes itself (the key
generator Job's Secrets, a StatefulSet's claims: `made_in_cluster`) is waited on, not asked for."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sunk.manifests.keygen import SECRETS_ENV

Obj = dict[str, Any]

_MISSING = re.compile(r'(secret|configmap|persistentvolumeclaim) "([^"]+)" not found')
_MISSING_KEY = re.compile(r"references non-existent (secret|config) key: (\S+)")
_GENERIC = (None, "PodInitializing", "ContainerCreating")


def latest_warnings(events: Iterable[Obj]) -> dict[str, Obj]:
    """The newest Warning Event of each object, by its uid."""
    out: dict[str, Obj] = {}
    for e in sorted(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or "")):
        uid = (e.get("involvedObject") or {}).get("uid")
        if e.get("type") == "Warning" and uid:
            out[uid] = e
    return out


Made = Mapping[tuple[str, str, str], str]
"""(kind as the kubelet names it: secret, persistentvolumeclaim; namespace; name) -> what makes it."""


def made_in_cluster(jobs: Iterable[Obj], statefulsets: Iterable[Obj]) -> dict[tuple[str, str, str], str]:
    """What the cluster will make without the user: the key generator Jobs' Secrets
    (`_keygen_secrets`) and the StatefulSets' claims (`_template_claims`)."""
    made: dict[tuple[str, str, str], str] = {}
    for job in jobs:
        meta = job.get("metadata") or {}
        for name in _keygen_secrets(job):
            made[("secret", meta.get("namespace", ""), name)] = f"the key generator Job {meta.get('name')}"
    for sts in statefulsets:
        meta = sts.get("metadata") or {}
        for name in _template_claims(sts):
            made[("persistentvolumeclaim", meta.get("namespace", ""), name)] = f"the StatefulSet {meta.get('name')}"
    return made


def _keygen_secrets(job: Obj) -> list[str]:
    """The Secrets a key generator Job lists in its SUNK_KEYGEN_SECRETS (sunk.manifests.keygen);
    none for any other Job, or one whose list doesn't parse (the Job then fails, and says why)."""
    containers = ((((job.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers")) or []
    values = [e.get("value") or "[]" for c in containers for e in c.get("env") or [] if e.get("name") == SECRETS_ENV]
    names: list[str] = []
    for value in values:
        try:
            wanted = json.loads(value)
        except json.JSONDecodeError:
            continue
        entries = wanted if isinstance(wanted, list) else []
        names += [e["name"] for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)]
    return names


def _template_claims(sts: Obj) -> list[str]:
    """`<template>-<set>-<ordinal>` for each volumeClaimTemplate and each ordinal below replicas."""
    meta, spec = sts.get("metadata") or {}, sts.get("spec") or {}
    replicas = int(spec.get("replicas", 1) or 0)
    templates = [t["metadata"]["name"] for t in spec.get("volumeClaimTemplates") or []]
    return [f"{t}-{meta.get('name')}-{i}" for t in templates for i in range(replicas)]


def why(pod: Obj, warning: Obj | None, made: Made | None = None) -> str:
    """What a pod that is not Ready waits on: a container's specific waiting reason, a running
    container not yet ready, else the newest Warning Event about it (FailedMount,
    FailedScheduling), else its phase; with the remedy when the user must create something, or
    what will make it when the cluster makes it (`made`)."""
    status = pod.get("status") or {}
    said = ""
    for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        waiting = (c.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason") not in _GENERIC:
            said = f"{c['name']} {waiting['reason']}" + (f" ({waiting['message']})" if waiting.get("message") else "")
            break
        if not c.get("ready") and "running" in (c.get("state") or {}):
            return f"{c['name']} running, not ready"
    if not said and warning is not None:
        said = f"{warning.get('reason')}: {warning.get('message')}"
    if not said:
        return str(status.get("phase", "Pending"))
    fix = remedy(pod, said, made)
    return f"{said}; {fix}" if fix else said


def remedy(pod: Obj, said: str, made: Made | None = None) -> str | None:
    """The command that creates what `said` names as missing, None when nothing is named; what
    makes it when the cluster does (`made`: nothing for the user to do but wait)."""
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    found = _MISSING.search(said)
    if found is not None:
        kind, name = found.groups()
        if (maker := (made or {}).get((kind, namespace, name))) is not None:
            return f"{maker} makes it: waiting for it"
        if kind == "persistentvolumeclaim":
            return (
                f"create the PersistentVolumeClaim {name} in {namespace} (the stack names it and sunk doesn't "
                f"make it): kubectl apply -n {namespace} -f <claim.yaml>"
            )
        wanted = reads(pod, "secret" if kind == "secret" else "configMap", name)
        if kind == "secret":
            keys = " ".join(f"--from-literal={k}=<value>" for k in wanted) or "--from-literal=<key>=<value>"
            return _create(f"secret generic {name} -n {namespace} {keys}")
        files = " ".join(f"--from-file={k}=<path>" for k in wanted) or "--from-file=<key>=<path>"
        return _create(f"configmap {name} -n {namespace} {files}")
    found = _MISSING_KEY.search(said)
    if found is not None:
        return f"add the key {found.group(2)} to the {'Secret' if found.group(1) == 'secret' else 'ConfigMap'} the pod names"
    return None


def _create(what: str) -> str:
    """The command, in the form every cluster takes (the local one reads no protobuf, which a plain
    `kubectl create` sends)."""
    return f"create it (the stack names it; sunk never makes it): kubectl create {what} --dry-run=client -o yaml | kubectl apply -f -"


def reads(pod: Obj, kind: str, name: str) -> Sequence[str]:
    """The keys a pod reads from the Secret (kind "secret") or ConfigMap ("configMap") `name`:
    volume items, projected sources, env and envFrom; empty when it reads them all."""
    spec = pod.get("spec") or {}
    return sorted(set(_volume_keys(spec, kind, name)) | set(_env_keys(spec, kind, name)))


def _volume_keys(spec: Mapping[str, Any], kind: str, name: str) -> list[str]:
    sources: list[Mapping[str, Any]] = []
    for v in spec.get("volumes") or []:
        sources.append(v.get(kind) or {})
        sources += [s.get(kind) or {} for s in (v.get("projected") or {}).get("sources") or []]
    named = [s for s in sources if name in (s.get("secretName"), s.get("name"))]  # a volume's, a projection's
    return [i["key"] for s in named for i in s.get("items") or [] if i.get("key")]


def _env_keys(spec: Mapping[str, Any], kind: str, name: str) -> list[str]:
    ref = "secretKeyRef" if kind == "secret" else "configMapKeyRef"
    refs = [
        (e.get("valueFrom") or {}).get(ref) or {}
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
        for e in c.get("env") or []
    ]
    return [r["key"] for r in refs if r.get("name") == name and r.get("key")]
