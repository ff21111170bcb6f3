"""ControlPlane: slurmctld."""

from __future__ import annotations

import pulumi

from sunk import naming
from sunk.manifests.auth import AuthRefs
from sunk.manifests.controller import disruption_budget, headless_service, state_claim, statefulset
from sunk.spec.cluster import ClusterSpec

from ._k8s import child, create


class ControlPlane(pulumi.ComponentResource):
    """slurmctld as a one-replica StatefulSet (its pod name `<cluster>-controller-0` is the
    SlurmctldHost), the state PVC, the headless Service giving it DNS, and a PodDisruptionBudget.
    A reconfigure watcher beside slurmctld applies ConfigMap changes with `scontrol reconfigure`."""

    host: pulumi.Output[str]
    """slurmctld's DNS name inside the Kubernetes cluster."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        refs: AuthRefs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:ControlPlane", name, None, opts)
        claim = create(f"{name}-state", state_claim(spec), child(self), namespace=namespace)
        service = create(f"{name}-service", headless_service(spec), child(self), namespace=namespace)
        create(f"{name}-pdb", disruption_budget(spec), child(self), namespace=namespace)
        create(
            f"{name}-slurmctld",
            statefulset(spec, refs),
            child(self, depends_on=[claim, service]),
            namespace=namespace,
        )
        self.host = pulumi.Output.from_input(naming.controller_fqdn(spec))
        self.register_outputs({"host": self.host})
