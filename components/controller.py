"""Controller: slurmctld (the spec's `controller`)."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from sunk import naming
from sunk.manifests.auth import AuthRefs
from sunk.manifests.controller import (
    backup_claims,
    disruption_budget,
    fence_access,
    headless_service,
    state_claim,
    statefulset,
)
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create, state_options, text, typed


class Controller(Component):
    """slurmctld as a StatefulSet of `controller.replicas` pods (each pod name `<cluster>-controller-<i>`
    is a SlurmctldHost: one restarted pod, or a primary and backups on a ReadWriteMany claim), the
    state PVC, the headless Service giving each pod DNS, and a PodDisruptionBudget. A reconfigure
    watcher beside slurmctld applies ConfigMap changes with `scontrol reconfigure`. With backups, a
    fence beside it holds the cluster's Lease while its slurmctld is the primary (sunk.fence), as
    the ServiceAccount, Role and RoleBinding it creates allow."""

    host: pulumi.Output[str]
    """The DNS name of pod 0, the first SlurmctldHost (with backups, the primary Slurm prefers)."""
    statefulset: k8s.apps.v1.StatefulSet
    service: k8s.core.v1.Service
    """The headless Service giving slurmctld its DNS name."""
    state_claim: k8s.core.v1.PersistentVolumeClaim
    """StateSaveLocation: retained on destroy; protected unless `allow_state_replacement`."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        refs: AuthRefs,
        allow_state_replacement: bool = False,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        # Named ControlPlane until the components took the spec's names; the alias keeps existing
        # stacks' slurmctld, its Service and its protected state PVC in place.
        super().__init__("sunk:index:Controller", name, opts, formerly=["sunk:index:ControlPlane"])
        claim = create(
            f"{name}-state",
            state_claim(spec),
            child(self, **state_options(allow_state_replacement)),
            namespace=namespace,
        )
        self.state_claim = typed(k8s.core.v1.PersistentVolumeClaim, claim)
        # The state snapshot's volume (slurm.upgradeFrom): kept when the stack drops it (the way back).
        claims = [claim] + [
            create(
                f"{name}-backup-{spec.slurm.upgrade_from}",
                backup,
                child(self, retain_on_delete=True),
                namespace=namespace,
            )
            for backup in backup_claims(spec)
        ]
        service = create(f"{name}-service", headless_service(spec), child(self), namespace=namespace)
        self.service = typed(k8s.core.v1.Service, service)
        create(f"{name}-pdb", disruption_budget(spec), child(self), namespace=namespace)
        # With backups: the fence's ServiceAccount, Role and RoleBinding (its pods run as it).
        fence = [
            create(f"{name}-fence-{m['kind'].lower()}", m, child(self), namespace=namespace) for m in fence_access(spec)
        ]
        sts = create(
            f"{name}-slurmctld",
            statefulset(spec, refs),
            child(self, depends_on=[*claims, service, *fence]),
            namespace=namespace,
        )
        self.statefulset = typed(k8s.apps.v1.StatefulSet, sts)
        self.host = text(naming.controller_fqdn(spec))
        self.register_outputs({"host": self.host})
