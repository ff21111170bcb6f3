"""Monitoring (optional)."""

from __future__ import annotations

import pulumi

from sunk.manifests.monitoring import dashboard, prometheus_rule, service_monitor
from sunk.spec.cluster import ClusterSpec

from ._k8s import Component, child, create


class Monitoring(Component):
    """A ServiceMonitor for the runtime's metrics Services and a PrometheusRule with its alerts
    (both need the Prometheus Operator CRDs), and a Grafana dashboard ConfigMap labelled for the
    Grafana sidecar."""

    def __init__(
        self,
        name: str,
        spec: ClusterSpec,
        *,
        namespace: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("sunk:index:Monitoring", name, opts)
        if spec.monitoring.service_monitor:
            create(f"{name}-servicemonitor", service_monitor(spec), child(self), namespace=namespace)
        if spec.monitoring.dashboard:
            create(f"{name}-dashboard", dashboard(spec), child(self), namespace=namespace)
        if spec.monitoring.rules:
            create(f"{name}-alerts", prometheus_rule(spec), child(self), namespace=namespace)
        self.register_outputs({})
