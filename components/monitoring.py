"""Monitoring (optional)."""

from __future__ import annotations

import pulumi

from sunk.manifests.auth import AuthRefs
from sunk.manifests.exporter import exporter_manifests
from sunk.manifests.monitoring import dashboards, prometheus_rule, service_monitor
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create


class Monitoring(Component):
    """The Slurm metrics exporter (a Deployment of the runtime image, its Service and
    ServiceMonitor), a ServiceMonitor for the runtime's metrics Services and a PrometheusRule with
    the alerts (both need the Prometheus Operator CRDs), and the Grafana dashboards (cluster,
    queue, nodes, runtime) as ConfigMaps labelled for the Grafana sidecar."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        refs: AuthRefs,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:Monitoring", name, opts)
        if spec.monitoring.service_monitor:
            create(f"{name}-servicemonitor", service_monitor(spec), child(self), namespace=namespace)
        if spec.monitoring.dashboard:
            for suffix, manifest in dashboards(spec).items():
                create(f"{name}-{suffix}", manifest, child(self), namespace=namespace)
        if spec.monitoring.rules:
            create(f"{name}-alerts", prometheus_rule(spec), child(self), namespace=namespace)
        for manifest in exporter_manifests(spec, refs):
            suffix = manifest["kind"].lower()
            create(f"{name}-exporter-{suffix}", manifest, child(self), namespace=namespace)
        self.register_outputs({})
