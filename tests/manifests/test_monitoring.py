"""Issue 16, dashboards and alerts: the rules pass promtool and fire on synthetic series where they
should (and stay quiet where they shouldn't); the dashboard is valid JSON with a data source
variable and a labelled series per panel."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sunk.manifests.monitoring import alert_rules, dashboard_json, monitoring_manifests, prometheus_rule
from sunk.stackfile import list_stacks, load_stack

SPEC = load_stack("acme-prod").spec  # monitoring enabled there
NS = SPEC.ns


def _promtool() -> str:
    beside = Path(sys.executable).with_name("promtool")  # where .ci/bootstrap puts it
    found = str(beside) if beside.is_file() else shutil.which("promtool")
    assert found, "promtool is missing: `make bootstrap` takes it from Debian's prometheus package"
    return found


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
        # Two nodes drained for 7 hours.
        {"series": f'sunk_syncer_slurm_nodes{{{ns}, state="drain"}}', "values": "2x480"},
        # Pods wait and nothing is bound.
        {"series": f"sunk_scheduler_pending_pods{{{ns}}}", "values": "3x40"},
        {"series": f"sunk_scheduler_binds_total{{{ns}}}", "values": "5x40"},
        {"series": f"sunk_syncer_errors_total{{{ns}}}", "values": "0+60x40"},
        {"series": f"sunk_scheduler_errors_total{{{ns}}}", "values": "0x40"},
        {"series": f"sunk_scheduler_last_success_timestamp_seconds{{{ns}}}", "values": "0+60x40"},
        {"series": f'up{{{ns}, job="syncer"}}', "values": "1x40"},
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
                    _alert("SunkSchedulerQueueStuck", "35m", fires=True),
                    _alert("SunkRuntimeErrors", "30m", fires=True),
                    _alert("SunkSchedulerLag", "30m", fires=False),
                    _alert("SunkRuntimeDown", "30m", fires=False),
                ],
            }
        ],
    }
    path = tmp_path / "tests.yaml"
    path.write_text(yaml.safe_dump(tests))
    done = subprocess.run([_promtool(), "test", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("stack", list_stacks())
def test_the_dashboard_has_a_data_source_variable_and_labelled_series(stack: str) -> None:
    spec = load_stack(stack).spec
    board = json.loads(dashboard_json(spec))
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for panel in board["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        for target in panel["targets"]:
            assert target["legendFormat"], panel["title"]
            assert "by (__name__)" not in target["expr"]  # rate() drops the name: one unlabelled series
    kinds = [m["kind"] for m in monitoring_manifests(spec)]
    assert ("PrometheusRule" in kinds) == (spec.monitoring.enabled and spec.monitoring.rules)


def test_the_operator_is_scraped_and_alerted_on_like_the_tenants(tmp_path: Path) -> None:
    from sunk.manifests.operator import OperatorSpec, operator_manifests

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
