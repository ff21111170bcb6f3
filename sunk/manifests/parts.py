"""The parts of one tenant's cluster, in one table: what each part is called, when the spec has it,
which builder makes its objects, which component creates them and what it waits for.

Three consumers read PARTS and nothing else: `cluster_manifests` (what `sunk render` writes and
the pod gate, sunk.podgate, checks), and the SlurmCluster component (what `pulumi up` creates: one
child per part, named `<cluster>-<part>`). A part added here reaches all three, and SlurmCluster
refuses, before it registers anything, a part it has no constructor for
(tests/components/test_parts.py adds one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sunk.manifests import (
    accounting,
    auth,
    config,
    controller,
    exporter,
    keygen,
    login,
    monitoring,
    network,
    nodeset,
    pods,
    restapi,
    runtime,
    webhook,
)
from sunk.manifests.auth import AuthRefs, auth_refs
from sunk.manifests.meta import Manifest, labels, obj
from sunk.manifests.operator import OPERATOR_NAME
from sunk.spec.cluster import ClusterSpec


@dataclass(frozen=True)
class Context:
    """What every part is built from. `keys_in_cluster`: the keys and passwords are made by the
    key generator's Job (`sunk:keys: cluster`; always so for a render) rather than by Pulumi."""

    spec: ClusterSpec
    refs: AuthRefs
    operator_namespace: str | None = "sunk-system"
    keys_in_cluster: bool = True

    @property
    def upgrading(self) -> bool:
        """A Slurm release upgrade is under way (`slurm.upgradeFrom` names another release)."""
        return self.spec.slurm.upgrade_from not in (None, self.spec.slurm.version)


def context(
    spec: ClusterSpec, operator_namespace: str | None = "sunk-system", *, keys_in_cluster: bool = True
) -> Context:
    return Context(spec, auth_refs(spec), operator_namespace, keys_in_cluster)


@dataclass(frozen=True)
class Part:
    name: str
    """The part's name: its child's name suffix (`<cluster>-<name>`), the SlurmCluster attribute
    and the module of sunk.components that defines its component."""
    component: str | None
    """The ComponentResource class (type token `sunk:index:<component>`); None for objects
    SlurmCluster creates itself (the Namespace, the shared volumes)."""
    enabled: Callable[[Context], bool]
    """Whether the spec has the part at all; a disabled part's SlurmCluster attribute is None."""
    manifests: Callable[[Context], list[Manifest]]
    """Its objects as `sunk render` writes them. With Pulumi's keys (not `keys_in_cluster`) the
    component adds the Secrets that hold them, whose values no builder knows."""
    waits_for: tuple[str, ...] = ()
    """Parts whose objects must exist before this part's are created."""
    waits_for_upgrading: tuple[str, ...] = ()
    """Parts it also waits for during a release upgrade (sunk.upgrade's order): slurmdbd moves first
    and converts the database, slurmctld once slurmdbd's rollout is ready, everything else once
    slurmctld's is (Pulumi waits for a workload's rollout before updating what depends on it; the
    operator then replaces each slurmd once it runs no job)."""

    def waits(self, ctx: Context) -> tuple[str, ...]:
        return self.waits_for + (self.waits_for_upgrading if ctx.upgrading else ())


def namespace(spec: ClusterSpec) -> Manifest:
    """Pod Security admission: `privileged` is enforced because slurmd pods need privileges (see
    sunk.manifests.nodeset_pod); `restricted` warnings and audit entries still flag any other pod
    that drifts from the restricted profile."""
    meta = {
        "name": spec.ns,
        "labels": {
            **labels(spec, "namespace"),
            "pod-security.kubernetes.io/enforce": "privileged",
            "pod-security.kubernetes.io/warn": "baseline",
            "pod-security.kubernetes.io/audit": "restricted",
        },
    }
    return obj("v1", "Namespace", meta)


def _always(_: Context) -> bool:
    return True


def _auth(ctx: Context) -> list[Manifest]:
    sssd = auth.sssd_config_map(ctx.spec)
    return [sssd] if sssd is not None else []


def _runtime(ctx: Context) -> list[Manifest]:
    out = [m for c in runtime.CONTROLLERS for m in runtime.runtime_manifests(ctx.spec, ctx.refs, c)]
    if ctx.operator_namespace is not None:
        out += runtime.operator_access(ctx.spec, ctx.refs, ctx.operator_namespace, OPERATOR_NAME)
    return out


READY = ("config", "auth", "keygen", "volumes")
"""Workloads wait for their files, keys and volumes, so first pods start complete."""
KEYED = ("auth", "keygen")

PARTS: tuple[Part, ...] = (
    Part("namespace", None, lambda c: c.spec.create_namespace, lambda c: [namespace(c.spec)]),
    Part("config", "SlurmConfig", _always, lambda c: config.config_maps(c.spec)),
    Part("auth", "Auth", _always, _auth),
    Part(
        "keygen",
        "KeyGenerator",
        lambda c: bool(keygen.made_here(c.spec, c.refs, c.keys_in_cluster)),
        lambda c: keygen.keygen_manifests(c.spec, c.refs, c.keys_in_cluster),
    ),
    Part("volumes", None, _always, lambda c: pods.shared_claims(c.spec)),
    Part(
        "controller",
        "Controller",
        _always,
        lambda c: controller.controller_manifests(c.spec, c.refs),
        READY,
        ("accounting",),
    ),
    Part(
        "accounting",
        "Accounting",
        lambda c: c.spec.accounting.enabled,
        lambda c: accounting.accounting_manifests(c.spec, c.refs),
        READY,
    ),
    Part(
        "restapi",
        "RestApi",
        lambda c: c.spec.restapi.enabled,
        lambda c: restapi.restapi_manifests(c.spec, c.refs),
        READY,
        ("controller",),
    ),
    Part(
        "login",
        "Login",
        lambda c: c.spec.login.enabled,
        lambda c: login.login_manifests(c.spec, c.refs),
        READY,
        ("controller",),
    ),
    Part(
        "nodesets",
        "NodeSets",
        _always,
        lambda c: nodeset.nodeset_resources(c.spec, c.refs),
        READY,
        ("controller",),
    ),
    Part("runtime", "Runtime", _always, _runtime, KEYED, ("controller",)),
    Part(
        "network",
        "NetworkPolicies",
        _always,
        lambda c: network.network_policies(c.spec, c.operator_namespace, keygen=c.keys_in_cluster),
    ),
    Part(
        "monitoring",
        "Monitoring",
        lambda c: c.spec.monitoring.enabled,
        lambda c: [*monitoring.monitoring_manifests(c.spec), *exporter.exporter_manifests(c.spec, c.refs)],
        KEYED,
    ),
    Part(
        "webhook",
        "Webhook",
        lambda c: bool(c.spec.inference.namespaces),
        lambda c: webhook.webhook_manifests(c.spec),
        KEYED,
    ),
)
"""In the order the render lists their objects and the components are created (a part comes
after every part it waits for, see `in_order`)."""

TOP_LEVEL = {"SlurmCluster": "cluster", "Operator": "operator"}
"""The two components a program creates itself (class -> module of sunk.components); every other
component is a part's."""


def components() -> dict[str, str]:
    """Every component class -> its module of sunk.components: the parts' and TOP_LEVEL."""
    return {**TOP_LEVEL, **{p.component: p.name for p in PARTS if p.component is not None}}


def in_order(ctx: Context) -> list[Part]:
    """The enabled parts, each after every enabled part it waits for and otherwise in table order.
    Raises ValueError naming a part that waits for one the table lacks, or for itself through others."""
    parts = PARTS
    enabled = [p for p in parts if p.enabled(ctx)]
    known = {p.name for p in parts}
    for p in parts:
        unknown = sorted(set(p.waits(ctx)) - known)
        if unknown:
            raise ValueError(f"part {p.name!r} waits for {unknown}, which no part is called")
    names = {p.name for p in enabled}
    done: list[Part] = []
    placed: set[str] = set()
    while len(done) < len(enabled):
        ready = [p for p in enabled if p.name not in placed and set(p.waits(ctx)) & names <= placed]
        if not ready:
            stuck = sorted(p.name for p in enabled if p.name not in placed)
            raise ValueError(f"parts {stuck} wait for each other")
        done.append(ready[0])
        placed.add(ready[0].name)
    return done


def part_manifests(ctx: Context) -> list[Manifest]:
    """Every object of the enabled parts, part by part in `in_order`."""
    return [m for p in in_order(ctx) for m in p.manifests(ctx)]
