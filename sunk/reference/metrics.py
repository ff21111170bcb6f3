"""Every metric the controllers and the exporter serve (read from the metric objects they
register and the families the exporter builds from a read of Slurm) and every alert sunk renders
(the tenant's PrometheusRule and the operator's)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from prometheus_client import CollectorRegistry
from sunk.runtime.exporter.collect import families
from sunk.runtime.exporter.metrics import ExporterMetrics
from sunk.runtime.exporter.model import Snapshot
from sunk.runtime.exporter.slurm import TextJobReads
from sunk.runtime.operator.metrics import Metrics as OperatorMetrics
from sunk.runtime.scheduler.metrics import Metrics as SchedulerMetrics
from sunk.runtime.slurmrest.models import Diag
from sunk.runtime.syncer.metrics import SyncerMetrics
from sunk.runtime.syncer.slurm import TextNodeReads
from sunk.runtime.webhook.metrics import Metrics as WebhookMetrics

from sunk.manifests.monitoring import alert_rules
from sunk.manifests.operator import operator_alert_rules
from sunk.spec import ClusterSpec

from .markdown import code, page, table


@dataclass(frozen=True)
class MetricRow:
    name: str
    """As the exposition writes it: counters end in `_total`."""
    kind: str
    labels: tuple[str, ...]
    help: str


def _exposed(name: str, kind: str) -> str:
    return f"{name}_total" if kind == "counter" else name


def _registered(registry: CollectorRegistry) -> list[MetricRow]:
    rows = []
    # prometheus_client exposes a metric's label names only on the object (no public accessor);
    # the registry maps each registered object to its names.
    for collector in list(registry._collector_to_names):
        name = getattr(collector, "_name", None)
        kind = getattr(collector, "_type", None)
        if not isinstance(name, str) or not isinstance(kind, str):
            continue
        labels = tuple(getattr(collector, "_labelnames", ()))
        rows.append(MetricRow(_exposed(name, kind), kind, labels, str(getattr(collector, "_documentation", ""))))
    return sorted(rows, key=lambda r: r.name)


def controller_metrics() -> dict[str, list[MetricRow]]:
    """Each process's own metrics, registered as the process registers them."""
    out: dict[str, list[MetricRow]] = {}
    registry = CollectorRegistry()
    OperatorMetrics(registry)
    out["operator"] = _registered(registry)
    registry = CollectorRegistry()
    SyncerMetrics(registry)
    # Its node reads through scontrol, falling back to slurmrestd, as deployed (no call is made).
    TextNodeReads(cast(Any, None), cast(Any, None), registry=registry)
    out["syncer"] = _registered(registry)
    registry = CollectorRegistry()
    SchedulerMetrics(registry)
    out["scheduler"] = _registered(registry)
    registry = CollectorRegistry()
    ExporterMetrics(registry)
    TextJobReads(cast(Any, None), cast(Any, None), registry=registry)
    out["exporter"] = _registered(registry)
    registry = CollectorRegistry()
    WebhookMetrics(registry)
    out["webhook"] = _registered(registry)
    return out


def slurm_metrics() -> list[MetricRow]:
    """The families the exporter serves from each read of Slurm (per-user ones included): the
    same families whatever the read held, so an empty read lists them all."""
    found = families(Snapshot((), (), (), Diag()), 0, per_user=True)
    return [MetricRow(_exposed(f.name, f.kind), f.kind, f.labels, f.help) for f in found]


EXAMPLE = ClusterSpec.model_validate(
    {
        "name": "research",
        "tenant": "acme",
        "nodesets": [{"name": "cpu", "replicas": 1, "cpus": 1, "memoryMib": 1024}],
        "partitions": [{"name": "batch", "nodesets": ["cpu"]}],
        "monitoring": {"enabled": True, "exporter": {"enabled": True}},
    }
)
"""The cluster the alert expressions are shown for (namespace acme-research)."""


def _alert_rows(
    rules: list[dict[str, Any]], without_exporter: dict[str, dict[str, Any]]
) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for rule in rules:
        name = str(rule["alert"])
        other = without_exporter.get(name)
        expr = code(str(rule["expr"]))
        if other is None:
            expr += " (only with `monitoring.exporter.enabled`)"
        elif other["expr"] != rule["expr"]:
            expr += f"; without the exporter: {code(str(other['expr']))}"
        labels = rule.get("labels", {})
        rows.append(
            (
                code(name),
                str(labels.get("severity", "")),
                code(str(rule["for"])),
                expr,
                str(rule.get("annotations", {}).get("summary", "")),
            )
        )
    return rows


def _metric_table(rows: list[MetricRow]) -> str:
    return table(
        ("Metric", "Type", "Labels", "Help"),
        [(code(r.name), r.kind, ", ".join(code(label) for label in r.labels), r.help) for r in rows],
    )


def metrics_page() -> tuple[str, int, int]:
    """The page, how many metrics and how many alerts it lists."""
    own = controller_metrics()
    slurm = slurm_metrics()
    no_exporter = EXAMPLE.model_copy(
        update={
            "monitoring": EXAMPLE.monitoring.model_copy(
                update={"exporter": EXAMPLE.monitoring.exporter.model_copy(update={"enabled": False})}
            )
        }
    )
    tenant_rules = alert_rules(EXAMPLE)
    plain = {str(r["alert"]): r for r in alert_rules(no_exporter)}
    operator_rules = [dict(r) for r in operator_alert_rules()]
    parts = [
        "## Slurm (the exporter)\n\n"
        "Read from slurmctld each collection (squeue, sinfo's view of the nodes, sdiag) and served "
        "until the next; none while Slurm cannot be read (`sunk_slurm_up` is 0 then). Histograms are "
        "gauge histograms (`_bucket`, `_gcount`, `_gsum`). Per-user families need "
        "`monitoring.exporter.perUserMetrics`.\n\n" + _metric_table(slurm)
    ]
    for name, rows in own.items():
        parts.append(
            f"## {name}\n\nThe {name}'s own metrics, on its `/metrics` (SUNK_METRICS_PORT).\n\n" + _metric_table(rows)
        )
    header = ("Alert", "Severity", "For", "Expression", "Summary")
    parts.append(
        "## Alerts: each cluster\n\n"
        f"The `<cluster>-alerts` PrometheusRule (with `monitoring.enabled`), shown for cluster "
        f"`{EXAMPLE.name}` of tenant `{EXAMPLE.tenant}` in namespace `{EXAMPLE.ns}`. Each alert also "
        "carries the labels `sunk_cluster` and `sunk_tenant`; its summary starts with `<tenant>/<cluster>: `.\n\n"
        + table(header, _alert_rows(tenant_rules, plain))
    )
    parts.append(
        "## Alerts: the operator\n\nThe `sunk-operator-alerts` PrometheusRule (with the operator's `monitoring`).\n\n"
        + table(header, _alert_rows(operator_rules, {str(r["alert"]): r for r in operator_rules}))
    )
    intro = (
        "Every metric sunk's processes serve and every alert it renders. Scraped through the "
        "ServiceMonitor (`monitoring.enabled`), each series also carries its target's `namespace`, "
        "which the alerts select on."
    )
    count = len(slurm) + sum(len(rows) for rows in own.values())
    return page("Metrics and alerts", intro, parts), count, len(tenant_rules) + len(operator_rules)
