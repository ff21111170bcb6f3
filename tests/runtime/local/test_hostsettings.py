"""`sunk local down` puts back the host settings `up` changed (runtime/local/hostsettings.py), on
a scratch /proc/sys and record: bridge-nf-call-iptables back to what it was once the last running
cluster stops, and the module loaded for it taken out."""

from __future__ import annotations

from pathlib import Path

from sunk.runtime.local import hostsettings
from sunk.runtime.local.hostsettings import BRIDGE_NF_CALL_IPTABLES, Held


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
