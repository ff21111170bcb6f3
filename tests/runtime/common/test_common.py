"""runtime/common: what every controller shares — time format, conditions, Events, settings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import Field
from sunk.runtime.common.conditions import Condition, condition_patch, transition
from sunk.runtime.common.events import MESSAGE_LIMIT, event
from sunk.runtime.common.health import fresh_view
from sunk.runtime.common.settings import EnvSettings, SettingsError
from sunk.runtime.common.timefmt import parse_rfc3339, rfc3339, rfc3339_micro

NOW = datetime(2026, 11, 23, 18, 0, 5, 123456, tzinfo=UTC)


def test_one_time_format_in_utc_both_ways() -> None:
    local = NOW.astimezone(timezone(timedelta(hours=2)))
    assert rfc3339(local) == "2026-11-23T18:00:05Z"
    assert rfc3339_micro(NOW) == "2026-11-23T18:00:05.123456Z"
    assert parse_rfc3339("2026-11-23T18:00:05Z") == NOW.replace(microsecond=0)
    with pytest.raises(ValueError):
        parse_rfc3339("yesterday")


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    old = Condition("Ready", "True", "AllReady", "", "2026-01-01T00:00:00Z")
    same = transition(Condition("Ready", "True", "AllReady", "3 pods"), old, NOW)
    assert same.last_transition_time == "2026-01-01T00:00:00Z"
    flipped = transition(Condition("Ready", "False", "Waiting", ""), old, NOW)
    assert flipped.last_transition_time == "2026-11-23T18:00:05Z"
    assert Condition.from_dict(flipped.to_dict()) == flipped
    # Replacing guards the index (someone else's condition never overwritten); appending doesn't.
    assert condition_patch(flipped, 2, 3)[0] == {"op": "test", "path": "/status/conditions/2/type", "value": "Ready"}  # type: ignore[index]
    assert condition_patch(flipped, None, 3) == [
        {"op": "add", "path": "/status/conditions/-", "value": flipped.to_dict()}
    ]
    assert condition_patch(flipped, None, 0) == {"status": {"conditions": [flipped.to_dict()]}}


def test_events_are_built_one_way() -> None:
    involved = {"apiVersion": "v1", "kind": "Pod", "namespace": "t", "name": "p", "uid": "u"}
    body = event(involved, "SlurmNodeDrained", "x" * 5000, now=NOW, component="sunk-syncer", warning=True)
    assert body["metadata"]["namespace"] == "t" and body["metadata"]["name"].startswith("p.")
    assert body["type"] == "Warning" and len(body["message"]) == MESSAGE_LIMIT
    assert body["firstTimestamp"] == body["lastTimestamp"] == "2026-11-23T18:00:05Z"
    assert "reportingInstance" not in body
    other = event(involved, "R", "m", now=NOW, component="c", instance="op-1")
    assert other["reportingInstance"] == "op-1" and other["metadata"]["name"] != body["metadata"]["name"]


class _Example(EnvSettings):
    ENV = {"interval": "SUNK_EXAMPLE_INTERVAL"}

    cluster: str = Field(min_length=1)
    interval: float = Field(default=1.0, gt=0)


def test_settings_come_from_sunk_variables_and_every_problem_names_one() -> None:
    s = _Example.from_env({"SUNK_CLUSTER": "c", "SUNK_EXAMPLE_INTERVAL": "2.5", "UNRELATED": "x"})
    assert (s.cluster, s.interval) == ("c", 2.5)
    assert "SUNK_EXAMPLE_INTERVAL=2.5" in s.describe()
    with pytest.raises(SettingsError) as err:
        _Example.from_env({"SUNK_CLUSTER": "", "SUNK_EXAMPLE_INTERVAL": "0"})
    assert "SUNK_CLUSTER: Field required" in str(err.value) and "SUNK_EXAMPLE_INTERVAL:" in str(err.value)


def test_the_process_runner_refuses_bad_settings_and_runs_the_loop_until_stopped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import threading

    from prometheus_client import CollectorRegistry
    from sunk.runtime.common import process

    monkeypatch.setenv("SUNK_CLUSTER", "")
    monkeypatch.setenv("SUNK_EXAMPLE_INTERVAL", "0")
    assert process.run("example", _Example, lambda s: pytest.fail("built with bad settings")) == 2
    assert "sunk-example: SUNK_CLUSTER: Field required" in capsys.readouterr().err

    class _WithPort(_Example):
        metrics_port: int = 0  # any free port

    monkeypatch.setenv("SUNK_CLUSTER", "c")
    monkeypatch.setenv("SUNK_EXAMPLE_INTERVAL", "1")
    ran, closed = threading.Event(), threading.Event()

    def loop(stop: threading.Event) -> None:
        ran.set()  # a real loop waits on `stop`; SIGTERM sets it

    def build(settings: _WithPort) -> process.Process:
        assert settings.cluster == "c" and settings.interval == 1.0
        ok = lambda: (True, "ok")  # noqa: E731
        return process.Process(CollectorRegistry(), ok, ok, loop, close=closed.set)

    assert process.run("example", _WithPort, build) == 0
    assert ran.is_set() and closed.is_set()


def test_an_unknown_log_level_stops_the_process_with_its_variable_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sunk.runtime.common import process

    monkeypatch.setenv("SUNK_LOG_LEVEL", "chatty")
    assert process.run("example", _Example, lambda s: pytest.fail("built")) == 2
    assert "SUNK_LOG_LEVEL" in capsys.readouterr().err


def test_a_loop_that_read_slurm_is_ready_only_while_its_view_is_fresh() -> None:
    assert fresh_view(True, ended=100.0, now=110.0, bound=30.0)[0]
    # a cycle blocked on a call (a slurmctld failing over) after a good one: blind, so not ready
    ok, why = fresh_view(True, ended=100.0, now=130.0, bound=30.0)
    assert not ok and "stale" in why
    assert not fresh_view(False, ended=100.0, now=101.0, bound=30.0)[0]
