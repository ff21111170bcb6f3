"""`sunk local down` puts back the host settings `up` changed (runtime/local/hostsettings.py), on
a scratch /proc/sys and record: bridge-nf-call-iptables back to what it was once the last running
cluster stops, and the module loaded for it taken out; then through `sunk local up` and `down` on
empty clusters (a few seconds each)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from sunk.runtime.local import hostsettings
from sunk.runtime.local.cli import _alive
from sunk.runtime.local.hostsettings import BRIDGE_NF_CALL_IPTABLES, Held

from tests.runtime.local.test_gitops import ROOT, Empty
from tests.support import waiting


def _proc(tmp_path: Path, value: str | None) -> Path:
    proc = tmp_path / "proc-sys"
    setting = proc / BRIDGE_NF_CALL_IPTABLES
    setting.parent.mkdir(parents=True)
    if value is not None:
        setting.write_text(f"{value}\n")
    return proc


def _value(proc: Path) -> str:
    return (proc / BRIDGE_NF_CALL_IPTABLES).read_text().strip()


def test_the_last_cluster_down_puts_the_prior_value_back(tmp_path: Path) -> None:
    proc, record = _proc(tmp_path, "0"), tmp_path / "run" / "host-settings.json"
    hostsettings.take_bridge_nf("skaaaa", proc=proc, record=record)
    assert _value(proc) == "1"
    hostsettings.take_bridge_nf("skbbbb", proc=proc, record=record)  # a second cluster finds it on
    up = {"skaaaa", "skbbbb"}
    assert hostsettings.release("skaaaa", up.__contains__, proc=proc, record=record) == {}
    assert _value(proc) == "1"  # skbbbb still enforces NetworkPolicy
    assert hostsettings.release("skbbbb", up.__contains__, proc=proc, record=record) == {BRIDGE_NF_CALL_IPTABLES: "0"}
    assert _value(proc) == "0"
    assert not record.exists() and list(hostsettings.holders(record)) == []


def test_a_setting_that_was_on_stays_on(tmp_path: Path) -> None:
    proc, record = _proc(tmp_path, "1"), tmp_path / "host-settings.json"
    hostsettings.take_bridge_nf("skaaaa", proc=proc, record=record)
    hostsettings.release("skaaaa", lambda _: False, proc=proc, record=record)
    assert _value(proc) == "1"


def test_a_killed_clusters_hold_does_not_keep_the_setting(tmp_path: Path) -> None:
    proc, record = _proc(tmp_path, "0"), tmp_path / "host-settings.json"
    hostsettings.take_bridge_nf("skdead", proc=proc, record=record)  # its process killed: never released
    hostsettings.take_bridge_nf("skaaaa", proc=proc, record=record)
    hostsettings.release("skaaaa", lambda bridge: bridge == "skaaaa", proc=proc, record=record)
    assert _value(proc) == "0"


def test_a_module_loaded_for_the_setting_is_taken_out(tmp_path: Path) -> None:
    proc, record = _proc(tmp_path, None), tmp_path / "host-settings.json"
    calls: list[tuple[str, ...]] = []

    def modprobe(*args: str) -> None:
        calls.append(args)
        if args == ("br_netfilter",):  # loading it makes the setting, on by default
            (proc / BRIDGE_NF_CALL_IPTABLES).write_text("1\n")

    hostsettings.take_bridge_nf("skaaaa", proc=proc, record=record, modprobe=modprobe)
    hostsettings.release("skaaaa", lambda _: False, proc=proc, record=record, modprobe=modprobe)
    assert calls == [("br_netfilter",), ("-r", "br_netfilter")]


def test_the_decision_records_the_first_prior_only() -> None:
    record = hostsettings.taken({}, "s", "0", "a")
    record = hostsettings.taken(record, "s", "1", "b")
    assert record == {"s": Held("0", ("a", "b"))}
    assert hostsettings.released(record, "a", lambda _: True) == ({"s": Held("0", ("b",))}, {})
    assert hostsettings.released(record, "a", lambda _: False) == ({}, {"s": "0"})


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    waiting.wait_for("the killed cluster's process to go", lambda: not _alive(pid), timeout=30)


@pytest.mark.slurm
def test_sunk_local_down_releases_what_up_took_even_after_a_kill(tmp_path: Path) -> None:
    """Through the real commands, on empty clusters (no pods): `up` holds bridge-nf-call-iptables
    under its bridge; `down` lets go, and so does `down` after the cluster's process was killed.
    Other checkouts' clusters may hold it meanwhile, so the host's value is checked only where
    nobody holds it any more: then it is the value recorded before the first cluster."""
    for killed in (False, True):
        cluster = Empty(tmp_path / f"clusters-{killed}", ROOT)
        held = hostsettings._load(hostsettings.RECORD)[BRIDGE_NF_CALL_IPTABLES]
        assert cluster.state.bridge in held.holders
        assert _value(hostsettings.PROC_SYS) == "1"
        if killed:
            _kill(cluster.state.pid)
        cluster.down()
        assert cluster.state.bridge not in hostsettings.holders()
        if not list(hostsettings.holders()) and held.prior is not None:
            assert _value(hostsettings.PROC_SYS) == held.prior
