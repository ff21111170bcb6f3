"""Plain manifests (from sunk.manifests) -> typed pulumi_kubernetes resources.

One generic bridge keeps every component a few lines: the pure builder decides the object, this
picks its Pulumi class and passes the body through unchanged (camelCase keys inside the body
reach the provider as written; only the top-level argument names are snake_case)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any, TypeVar

import pulumi
import pulumi_kubernetes as k8s

from sunk.manifests.meta import Manifest

_TYPED: dict[tuple[str, str], Any] = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    ("apps/v1", "StatefulSet"): k8s.apps.v1.StatefulSet,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): k8s.apiextensions.v1.CustomResourceDefinition,
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): (
        k8s.admissionregistration.v1.MutatingWebhookConfiguration
    ),
}
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")

# A value the program computes (an Output) stands in the spec as a placeholder that every
# validator accepts (a DNS label, a registry, a tag); objects get the Output back wherever the
# placeholder appears, whole or inside a longer string (an FQDN, an image reference).
# Placeholders are numbered in call order, so the same program gives the same placeholders on
# every run: anything derived from spec text (a config hash, a Job name) stays stable.
_COUNTER = itertools.count()
_LATE: dict[str, pulumi.Input[str]] = {}
_PLACEHOLDER = re.compile(r"sunk-input-[0-9]+-end")


def reset_late() -> None:
    """Forget every placeholder: a new program run (the offline evaluator runs several)."""
    global _COUNTER
    _COUNTER = itertools.count()
    _LATE.clear()


def late(value: pulumi.Input[str]) -> str:
    """A spec value the program computes: `ClusterSpec(namespace=late(ns.metadata.name), ...)`.

    A plain str comes back unchanged. For an Output (or awaitable) the result is a placeholder
    accepted by every name/registry/tag rule of the spec; the components put the Output back into
    each object that uses the value, so those objects also depend on the resource behind it."""
    if isinstance(value, str):
        return value
    token = f"sunk-input-{next(_COUNTER)}-end"
    _LATE[token] = value
    return token


def resolve(value: Any) -> Any:
    """`value` with every placeholder from `late` replaced by its Input (strings become Outputs
    where they contain one); containers are walked, everything else is returned as is."""
    if isinstance(value, str):
        parts = _PLACEHOLDER.split(value)
        tokens = [t for t in _PLACEHOLDER.findall(value) if t in _LATE]
        if not tokens or len(tokens) != len(parts) - 1:
            return value
        if value in _LATE:
            return pulumi.Output.from_input(_LATE[value])
        pieces: list[pulumi.Input[str]] = []
        for text, token in zip(parts, [*tokens, None], strict=True):
            if text:
                pieces.append(text)
            if token is not None:
                pieces.append(_LATE[token])
        return pulumi.Output.concat(*pieces)
    if isinstance(value, dict):
        return {k: resolve(v) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v) for v in value]
    return value


def text(value: str) -> pulumi.Output[str]:
    """A component output built from the spec: an Output, placeholders resolved."""
    resolved: pulumi.Output[str] = pulumi.Output.from_input(resolve(value))
    return resolved


def _resources(value: Any) -> list[pulumi.Resource]:
    if value is None:
        return []
    if isinstance(value, pulumi.Resource):
        return [value]
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [r for r in value if isinstance(r, pulumi.Resource)]
    raise TypeError(
        "sunk components take depends_on as a Resource or a list of Resources (not an Output), "
        "so that every child can wait for them"
    )


class Component(pulumi.ComponentResource):
    """A sunk ComponentResource: the caller's depends_on reaches every child (Pulumi itself only
    applies it to the component); providers and transformations reach them through `parent`."""

    def __init__(
        self, type_: str, name: str, opts: pulumi.ResourceOptions | None, *, formerly: Sequence[str] = ()
    ) -> None:
        """`formerly`: the type tokens this component was registered under in earlier releases.
        Each becomes an alias, so a stack made then keeps the component and (through the aliases
        children inherit) every resource under it instead of replacing them."""
        if formerly:
            renamed = pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=old) for old in formerly])
            opts = pulumi.ResourceOptions.merge(opts, renamed)
        super().__init__(type_, name, None, opts)
        self._caller_deps: list[pulumi.Resource] = _resources(opts.depends_on if opts is not None else None)


def _snake(key: str) -> str:
    return _CAMEL.sub("_", key).lower()


def create(
    name: str,
    manifest: Manifest,
    opts: pulumi.ResourceOptions,
    *,
    namespace: pulumi.Input[str] | None = None,
    **fields: Any,
) -> pulumi.CustomResource:
    """Register `manifest` as resource `name`. `namespace` replaces metadata.namespace (an
    Output, so the object waits for its Namespace); `fields` add or replace top-level fields
    (Secret data from generated Outputs)."""
    api_version, kind = manifest["apiVersion"], manifest["kind"]
    body = {k: v for k, v in manifest.items() if k not in ("apiVersion", "kind")}
    if namespace is not None and "namespace" in body["metadata"]:
        body["metadata"] = {**body["metadata"], "namespace": namespace}
    body.update(fields)
    body = resolve(body)
    cls = _TYPED.get((api_version, kind))
    if cls is None:
        # Custom resources (NodeSet, ServiceMonitor): fields pass through untouched.
        resource: pulumi.CustomResource = k8s.apiextensions.CustomResource(
            name, api_version=api_version, kind=kind, opts=opts, **body
        )
        return resource
    typed: pulumi.CustomResource = cls(name, opts=opts, **{_snake(k): v for k, v in body.items()})
    return typed


T = TypeVar("T", bound=pulumi.CustomResource)


def typed(cls: type[T], resource: pulumi.CustomResource) -> T:
    """`resource` as the pulumi_kubernetes class `create` picked for it."""
    if not isinstance(resource, cls):
        raise TypeError(f"{resource!r} is not a {cls.__name__}")
    return resource


def child(parent: Component, *, depends_on: Sequence[pulumi.Resource] = (), **extra: Any) -> pulumi.ResourceOptions:
    """Options of a component's child: parented (providers and transformations are inherited,
    never constructed) and waiting for what the caller made the component wait for."""
    deps = [*parent._caller_deps, *depends_on]
    return pulumi.ResourceOptions(parent=parent, depends_on=deps or None, **extra)


def state_options(allow_replacement: bool) -> dict[str, Any]:
    """Options of a state-bearing PVC (slurmctld's StateSaveLocation, MariaDB's data).

    `retain_on_delete`: destroying the stack leaves the claim and its volume in the cluster.
    `protect`: the engine refuses any plan that would delete or replace the claim (a storage
    class edit replaces a PVC), until the stack opts in with `sunk:allowStateReplacement: true`."""
    # Retained only while protected: the engine also skips the delete when it *replaces* a
    # retained resource, so the replacement's create would meet the old claim (AlreadyExists).
    return {"retain_on_delete": not allow_replacement, "protect": not allow_replacement}
