"""A role's pod and Service settings (sunk.spec.pod) applied to what the builders made: one pure
merge, used for every Deployment, StatefulSet and Job template and by the operator for slurmd pods.
The merge rules are sunk.spec.pod's; the spec already refused every clash, so the checks here only
guard the builders' own invariants."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from sunk.manifests.meta import Manifest
from sunk.spec.pod import HeadlessServiceSettings, PodSettings, ServiceSettings


def object_meta(meta: Manifest, settings: PodSettings) -> Manifest:
    """An object's metadata with the role's `labels` and `annotations` (sunk's keys win)."""
    out = dict(meta)
    if settings.labels:
        out["labels"] = {**settings.labels, **(meta.get("labels") or {})}
    if settings.annotations:
        out["annotations"] = {**settings.annotations, **(meta.get("annotations") or {})}
    return out


def _containers(pod_spec: Manifest) -> list[Manifest]:
    return [*(pod_spec.get("initContainers") or []), *(pod_spec.get("containers") or [])]


def _security(sunk: Manifest, user: Manifest) -> Manifest:
    """sunk's container securityContext with the user's keys over it; capabilities as a union
    (sunk.spec.pod refused dropping what the role needs)."""
    out = {**sunk, **{k: v for k, v in user.items() if k != "capabilities"}}
    caps = user.get("capabilities")
    if caps:
        mine = sunk.get("capabilities") or {}
        merged: Manifest = {}
        for part in ("drop", "add"):
            values = [*(mine.get(part) or []), *(c for c in caps.get(part) or [] if c not in (mine.get(part) or []))]
            if values:
                merged[part] = values
        out["capabilities"] = merged
    return out


def _args(container: Manifest, extra: Sequence[str]) -> None:
    """Arguments after the daemon's own. A `/bin/sh -c script` container passes them to the
    script, which ends in `exec <daemon> ... "$@"` (its $0 is the container's name)."""
    if not extra:
        return
    command = container.get("command") or []
    if command[:2] == ["/bin/sh", "-c"]:
        container["args"] = [container["name"], *extra]
    else:
        container["args"] = [*(container.get("args") or []), *extra]


def _pod_meta(meta: Manifest, settings: PodSettings) -> None:
    """The role's `labels`, `podLabels` and `podAnnotations` under sunk's own keys."""
    labels = {**settings.labels, **settings.pod_labels}
    if labels:
        meta["labels"] = {**labels, **(meta.get("labels") or {})}
    if settings.pod_annotations:
        meta["annotations"] = {**settings.pod_annotations, **(meta.get("annotations") or {})}


def _scheduling(spec: Manifest, settings: PodSettings) -> None:
    """nodeSelector (merged, sunk's keys win), tolerations (added), affinity (where sunk set
    none), spread, priority and runtime class."""
    if settings.node_selector:
        spec["nodeSelector"] = dict(sorted({**settings.node_selector, **(spec.get("nodeSelector") or {})}.items()))
    if settings.tolerations:
        tolerations = list(spec.get("tolerations") or [])
        for t in settings.tolerations:
            entry = t.model_dump(mode="json", by_alias=True, exclude_none=True)
            if entry not in tolerations:
                tolerations.append(entry)
        spec["tolerations"] = tolerations
    if settings.affinity is not None and "affinity" not in spec:
        spec["affinity"] = copy.deepcopy(settings.affinity)
    if settings.topology_spread_constraints:
        spec["topologySpreadConstraints"] = copy.deepcopy(settings.topology_spread_constraints)
    if settings.priority_class_name is not None:
        spec["priorityClassName"] = settings.priority_class_name
    if settings.runtime_class_name is not None:
        spec["runtimeClassName"] = settings.runtime_class_name


def _pulls(spec: Manifest, settings: PodSettings, pull_secrets: Sequence[str]) -> None:
    """imagePullSecrets (the builder's, then the role's, once each) and every container's pull policy."""
    secrets = list(dict.fromkeys([*pull_secrets, *settings.image_pull_secrets]))
    if secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in secrets]
    if settings.image_pull_policy is not None:
        for c in _containers(spec):
            c["imagePullPolicy"] = settings.image_pull_policy


def _env(container: Manifest, settings: PodSettings, main: str) -> None:
    """The role's env after sunk's; a name sunk sets is a builder's bug (the spec refused it)."""
    if not settings.env:
        return
    env = list(container.get("env") or [])
    taken = {e["name"] for e in env}
    for e in settings.env:
        if e.name in taken:
            raise ValueError(f"env {e.name} is sunk's on {main}")
        env.append(e.manifest())
    container["env"] = env


def _volumes(spec: Manifest, container: Manifest, settings: PodSettings, main: str) -> None:
    """The role's volumes on the pod and mounted in `main`."""
    if not settings.volumes:
        return
    volumes = list(spec.get("volumes") or [])
    mounts = list(container.get("volumeMounts") or [])
    names = {v["name"] for v in volumes}
    for v in settings.volumes:
        if v.name in names:
            raise ValueError(f"volume {v.name!r} is used twice in the {main} pod")
        volumes.append(v.volume())
        mounts.append(v.mount())
    spec["volumes"] = volumes
    container["volumeMounts"] = mounts


def apply_pod(
    template: Manifest,
    settings: PodSettings,
    *,
    main: str | None,
    pull_secrets: Sequence[str] = (),
    extra_args: Sequence[str] = (),
) -> Manifest:
    """A pod template (or Pod) `{metadata, spec}` with the role's settings: pod metadata,
    scheduling, image pulls for every container, and, on container `main` (None: a pod that only
    takes scheduling and pull settings, such as the accounting setup Job), env, extraArgs, volumes
    and securityContext. Returns a new dict."""
    pod = copy.deepcopy(template)
    _pod_meta(pod.setdefault("metadata", {}), settings)
    spec = pod["spec"]
    _scheduling(spec, settings)
    _pulls(spec, settings, pull_secrets)
    if main is None:
        return pod
    container = next((c for c in spec.get("containers") or [] if c["name"] == main), None)
    if container is None:
        raise ValueError(f"no container {main!r} in the pod")
    _env(container, settings, main)
    _args(container, extra_args)
    _volumes(spec, container, settings, main)
    if settings.security_context:
        container["securityContext"] = _security(container.get("securityContext") or {}, settings.security_context)
    return pod


def apply_service(service: Manifest, settings: ServiceSettings | HeadlessServiceSettings) -> Manifest:
    """A Service with the role's Service settings: metadata, and for ServiceSettings the type,
    load-balancer fields, nodePort (on its first port) and externalTrafficPolicy."""
    out = copy.deepcopy(service)
    meta = out["metadata"]
    if settings.labels:
        meta["labels"] = {**settings.labels, **(meta.get("labels") or {})}
    if settings.annotations:
        meta["annotations"] = {**settings.annotations, **(meta.get("annotations") or {})}
    if isinstance(settings, HeadlessServiceSettings):
        return out
    spec = out["spec"]
    if settings.type is not None:
        spec["type"] = settings.type
    if settings.source_ranges:
        spec["loadBalancerSourceRanges"] = list(settings.source_ranges)
        spec["externalTrafficPolicy"] = "Local"
    if settings.load_balancer_ip is not None:
        spec["loadBalancerIP"] = settings.load_balancer_ip
    if settings.load_balancer_class is not None:
        spec["loadBalancerClass"] = settings.load_balancer_class
    if settings.external_traffic_policy is not None:
        spec["externalTrafficPolicy"] = settings.external_traffic_policy
    if settings.node_port is not None:
        spec["ports"][0]["nodePort"] = settings.node_port
    return out
