"""Dashboards and alerts: the rules pass promtool and fire on synthetic series where they
should (and stay quiet where they shouldn't); the dashboards are valid JSON with a data source
variable and a labelled series per target, and every query parses (promtool) and names only
metrics the runtime (syncer, scheduler, exporter) exports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry
from sunk.runtime.exporter.collect import families, metric_names
from sunk.runtime.exporter.loop import Exporter
from sunk.runtime.exporter.model import Snapshot
from sunk.runtime.exporter.slurm import TextJobReads
from sunk.runtime.scheduler.metrics import Metrics as SchedulerMetrics
from sunk.runtime.slurmrest import StaticToken
from sunk.runtime.slurmrest.jobtext import SqueueJobs
from sunk.runtime.slurmrest.nodetext import ScontrolNodes
from sunk.runtime.syncer.metrics import SyncerMetrics
from sunk.runtime.syncer.slurm import TextNodeReads

from sunk.manifests.dashboards import BOARDS, EXPORTER_BOARDS, boards, dashboard_json, expressions
from sunk.manifests.monitoring import alert_rules, monitoring_manifests, prometheus_rule
from sunk.stackfile import list_stacks, load_stack
from tests.support.fakes.exporter import FakeSlurm, job, node, partition
from tests.support.fakes.syncer import FakeSlurm as FakeSyncerSlurm
from tests.support.stacks import FIXTURE_STACKS
from tests.support.tools import bootstrap_tool

SPEC = load_stack("acme-prod", FIXTURE_STACKS).spec  # monitoring enabled there
NS = SPEC.ns


def _promtool() -> str:
    beside = Path(sys.executable).with_name("promtool")  # where .ci/bootstrap puts it
    return bootstrap_tool("promtool", at=beside if beside.is_file() else None, package="Debian's prometheus")


def _write_rules(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(prometheus_rule(SPEC)["spec"]))
    return path


def test_the_rules_pass_promtool(tmp_path: Path) -> None:
    done = subprocess.run([_promtool(), "check", "rules", str(_write_rules(tmp_path))], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alert_rules(SPEC))} rules found" in done.stdout


def _alert(name: str, at: str, fires: bool, **series: str) -> dict[str, Any]:
    """`series`: labels the alert keeps from its series (rules that aggregate keep none)."""
    labels = {"severity": next(r["labels"]["severity"] for r in alert_rules(SPEC) if r["alert"] == name)}
    labels |= {"sunk_cluster": SPEC.name, "sunk_tenant": SPEC.tenant, **series}
    expected = []
    if fires:
        summary = next(r["annotations"]["summary"] for r in alert_rules(SPEC) if r["alert"] == name)
        expected = [{"exp_labels": labels, "exp_annotations": {"summary": summary}}]
    return {"eval_time": at, "alertname": name, "exp_alerts": expected}


def test_the_alerts_fire_on_synthetic_series_and_stay_quiet_otherwise(tmp_path: Path) -> None:
    ns = f'namespace="{NS}"'
    series = [
        # The syncer stops succeeding after 10 minutes (the timestamp stops moving).
        {"series": f"sunk_syncer_last_success_timestamp_seconds{{{ns}}}", "values": "0+60x10 600x30"},
        # Two nodes drained for 7 hours (the exporter's view: acme-prod runs it).
        {"series": f'sunk_slurm_nodes{{{ns}, state="drained"}}', "values": "2x480"},
        {"series": f'sunk_slurm_nodes{{{ns}, state="idle"}}', "values": "5x480"},
        # Pods wait and nothing is bound.
        {"series": f"sunk_scheduler_pending_pods{{{ns}}}", "values": "3x40"},
        {"series": f"sunk_scheduler_binds_total{{{ns}}}", "values": "5x40"},
        {"series": f"sunk_syncer_errors_total{{{ns}}}", "values": "0+60x40"},
        {"series": f"sunk_scheduler_errors_total{{{ns}}}", "values": "0x40"},
        {"series": f"sunk_scheduler_last_success_timestamp_seconds{{{ns}}}", "values": "0+60x40"},
        {"series": f'up{{{ns}, job="syncer"}}', "values": "1x40"},
        # scontrol reads, then fails for 40 minutes: every read goes through slurmrestd.
        {"series": f'sunk_syncer_slurm_reads_total{{{ns}, via="scontrol"}}', "values": "0+60x10 600x40"},
        {"series": f'sunk_syncer_slurm_reads_total{{{ns}, via="slurmrestd"}}', "values": "0x10 0+60x40"},
        # The exporter reads jobs through squeue every 30 s, then squeue fails from minute 20 on.
        {"series": f'sunk_exporter_job_reads_total{{{ns}, via="squeue"}}', "values": "0+2x20 40x40"},
        {"series": f'sunk_exporter_job_reads_total{{{ns}, via="slurmrestd"}}', "values": "0x20 0+2x40"},
    ]
    tests = {
        "rule_files": [str(_write_rules(tmp_path))],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    _alert("SunkSlurmUnreachable", "5m", fires=False),
                    _alert("SunkSlurmUnreachable", "25m", fires=True, namespace=NS),
                    _alert("SunkSlurmNodesDrainedLong", "1h", fires=False),
                    _alert("SunkSlurmNodesDrainedLong", "7h", fires=True),
                    _alert("SunkSyncerReadsViaSlurmrestd", "9m", fires=False),
                    _alert("SunkSyncerReadsViaSlurmrestd", "30m", fires=False),
                    _alert("SunkSyncerReadsViaSlurmrestd", "45m", fires=True),
                    _alert("SunkExporterReadsViaSlurmrestd", "19m", fires=False),
                    _alert("SunkExporterReadsViaSlurmrestd", "45m", fires=False),
                    _alert("SunkExporterReadsViaSlurmrestd", "55m", fires=True),
                    _alert("SunkSchedulerQueueStuck", "35m", fires=True),
                    _alert("SunkRuntimeErrors", "30m", fires=True),
                    _alert("SunkSchedulerLag", "30m", fires=False),
                    _alert("SunkRuntimeDown", "30m", fires=False),
                    _alert("SunkSlurmctldDown", "30m", fires=False),
                    _alert("SunkSlurmQueueStuck", "30m", fires=False),
                    _alert("SunkSlurmdbdBacklog", "30m", fires=False),
                ],
            }
        ],
    }
    path = tmp_path / "tests.yaml"
    path.write_text(yaml.safe_dump(tests))
    done = subprocess.run([_promtool(), "test", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("stack", list_stacks(FIXTURE_STACKS))
def test_the_dashboards_have_a_data_source_variable_and_labelled_series(stack: str) -> None:
    spec = load_stack(stack, FIXTURE_STACKS).spec
    shipped = boards(spec)
    assert shipped == (list(BOARDS) if spec.monitoring.exporter.enabled else ["runtime"])
    uids = set()
    for name in shipped:
        board = json.loads(dashboard_json(spec, name))
        uids.add(board["uid"])
        assert len(board["uid"]) <= 40
        variables = {v["name"]: v for v in board["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
        assert board["panels"] and len({p["id"] for p in board["panels"]}) == len(board["panels"])
        for panel in board["panels"]:
            assert panel["datasource"]["uid"] == "${datasource}"
            refs = [t["refId"] for t in panel["targets"]]
            assert len(set(refs)) == len(refs)
            for target in panel["targets"]:
                assert target["legendFormat"], panel["title"]
                assert "by (__name__)" not in target["expr"]  # rate() drops the name: one unlabelled series
                assert 'namespace="$namespace"' in target["expr"]
    assert len(uids) == len(shipped)
    made = monitoring_manifests(spec)
    kinds = [m["kind"] for m in made]
    assert ("PrometheusRule" in kinds) == (spec.monitoring.enabled and spec.monitoring.rules)
    maps = [m for m in made if m["kind"] == "ConfigMap"]
    assert len(maps) == (len(shipped) if spec.monitoring.enabled and spec.monitoring.dashboard else 0)
    for cm in maps:
        assert spec.monitoring.dashboard_labels.items() <= cm["metadata"]["labels"].items()  # the sidecar's label
        (text,) = cm["data"].values()
        json.loads(text)


def _exported() -> set[str]:
    """Every series name the runtime serves: the exporter's Slurm families (from a snapshot with
    every kind of job, node and per-user series on) and its own metrics, the syncer's and the
    scheduler's (each counter with _total, each histogram with _bucket/_count/_sum), and `up`."""
    fake = FakeSlurm(
        jobs=[job(1, "RUNNING"), job(2, "PENDING", reason="Resources")],
        nodes=[node("n", ("MIXED",), alloc_cpus=1, gpus=1)],
        partitions=[partition("batch")],
    )
    snapshot = Snapshot(tuple(fake.list_jobs()), tuple(fake.list_nodes()), tuple(fake.list_partitions()), fake.diag())
    names = metric_names(families(snapshot, 10_000, per_user=True)) | {"up"}
    registry = CollectorRegistry()
    Exporter(FakeSlurm(), registry=registry)
    SyncerMetrics(registry)
    TextNodeReads(FakeSyncerSlurm(), ScontrolNodes(StaticToken("-"), "/etc/slurm/slurm.conf"), registry=registry)
    TextJobReads(FakeSlurm(), SqueueJobs(StaticToken("-"), "/etc/slurm/slurm.conf"), registry=registry)
    SchedulerMetrics(registry)
    for metric in registry.collect():
        if metric.type == "counter":
            names.add(f"{metric.name}_total")
        elif metric.type == "histogram":
            names |= {f"{metric.name}_{suffix}" for suffix in ("bucket", "count", "sum")}
        elif metric.name.startswith("sunk_"):
            names.add(metric.name)
    return names


def test_every_panel_query_names_a_metric_the_runtime_exports() -> None:
    exported = _exported()
    for board in BOARDS:
        for expr in expressions(board):
            named = set(re.findall(r"\b(sunk_[a-z0-9_]+|up)\b(?=\{)", expr))
            assert named, expr
            assert named <= exported, (board, sorted(named - exported))
    # ...and the exporter's boards are built from the exporter's metrics.
    for board in EXPORTER_BOARDS:
        assert all("sunk_slurm_" in e for e in expressions(board)), board


def test_every_panel_query_parses(tmp_path: Path) -> None:
    """promtool parses each query as a recording rule (with the namespace variable filled in)."""
    rules = [
        {"record": f"dashboard:{board}:{i}", "expr": expr.replace("$namespace", NS)}
        for board in BOARDS
        for i, expr in enumerate(expressions(board))
    ]
    path = tmp_path / "panels.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    done = subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0 and f"SUCCESS: {len(rules)} rules found" in done.stdout, done.stdout + done.stderr


def test_the_alerts_name_only_exported_metrics() -> None:
    exported = _exported()
    for rule in alert_rules(SPEC):
        named = set(re.findall(r"\b(sunk_[a-z0-9_]+|up)\b(?=\{)", rule["expr"]))
        assert named and named <= exported, (rule["alert"], sorted(named - exported))


def test_the_exporter_alerts_fire_on_synthetic_series(tmp_path: Path) -> None:
    ns = f'namespace="{NS}"'
    series = [
        # slurmctld stops answering after 10 minutes.
        {"series": f"sunk_slurm_up{{{ns}}}", "values": "1x10 0x30"},
        # An eligible job waits longer and longer and no job starts after 20 minutes.
        {"series": f'sunk_slurm_pending_oldest_eligible_seconds{{{ns}, partition="batch"}}', "values": "0+60x120"},
        {"series": f"sunk_slurm_jobs_started_total{{{ns}}}", "values": "0+1x20 20x100"},
        # Accounting goes away at 30 minutes: slurmctld's queue for slurmdbd grows.
        {"series": f"sunk_slurm_dbd_agent_queue_size{{{ns}}}", "values": "0x30 0+200x90"},
        # A drained node, an idle one.
        {"series": f'sunk_slurm_nodes{{{ns}, state="drained"}}', "values": "1x120"},
    ]
    tests = {
        "rule_files": [str(_write_rules(tmp_path))],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    _alert("SunkSlurmctldDown", "11m", fires=False),
                    _alert("SunkSlurmctldDown", "15m", fires=True, namespace=NS),
                    # Older than an hour at 60m, no start since 20m: pending for 15m from then on.
                    _alert("SunkSlurmQueueStuck", "65m", fires=False),
                    _alert("SunkSlurmQueueStuck", "80m", fires=True),
                    _alert("SunkSlurmdbdBacklog", "35m", fires=False),
                    # Over 1000 from 36m (6 x 200), for 10 minutes.
                    _alert("SunkSlurmdbdBacklog", "50m", fires=True),
                    _alert("SunkSlurmNodesDrainedLong", "2h", fires=False),
                ],
            }
        ],
    }
    path = tmp_path / "tests.yaml"
    path.write_text(yaml.safe_dump(tests))
    done = subprocess.run([_promtool(), "test", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_operator_is_scraped_and_alerted_on_like_the_tenants(tmp_path: Path) -> None:
    from sunk.manifests.operator import operator_manifests
    from sunk.spec.operator import OperatorSpec

    assert not [m for m in operator_manifests(OperatorSpec()) if m["kind"] in ("ServiceMonitor", "PrometheusRule")]
    made = {m["kind"]: m for m in operator_manifests(OperatorSpec(monitoring=True, monitoring_labels={"release": "p"}))}
    monitor, service = made["ServiceMonitor"], made["Service"]
    wanted = monitor["spec"]["selector"]["matchLabels"]
    assert wanted.items() <= service["metadata"]["labels"].items()  # it selects the metrics Service
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert monitor["metadata"]["labels"]["release"] == "p"
    path = tmp_path / "operator-rules.yaml"
    path.write_text(yaml.safe_dump(made["PrometheusRule"]["spec"]))
    done = subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0 and "SUCCESS: 3 rules found" in done.stdout, done.stdout + done.stderr
