"""What the node agent runs for a container, decided as the kubelet and containerd decide it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from sunk.runtime.local.container import (
    DEFAULT_CAPABILITIES,
    ConfigError,
    Image,
    capabilities,
    launch,
    volume_files,
)

IMAGE = Image(entrypoint=("/entry",), cmd=("serve",), env={"PATH": "/usr/bin", "LANG": "C"}, uid=0, gid=0,
              primary={64030: 64030, 0: 0}, groups={64030: (5,)})  # fmt: skip
CONFIGMAPS = {("ns", "conf"): {"level": "debug"}}
SECRETS = {("ns", "auth"): {"token": "s3cret"}}


def _find(table: Mapping[tuple[str, str], Mapping[str, Any]]) -> Any:
    return lambda namespace, name: table.get((namespace, name))


def _pod(container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"app": "x"}},
        "spec": {"containers": [container], "nodeName": "n1", **spec},
        "status": {"podIP": "10.233.0.5"},
    }


def _launch(container: dict[str, Any], **spec: Any) -> Any:
    pod = _pod(container, **spec)
    return launch(pod, container, IMAGE, _find(CONFIGMAPS), _find(SECRETS), {"KUBERNETES_SERVICE_HOST": "10.233.0.1"})


def test_user_group_and_supplementary_groups() -> None:
    run = _launch(
        {"name": "c", "securityContext": {"runAsUser": 64030}},
        securityContext={"fsGroup": 7, "supplementalGroups": [9]},
    )
    assert (run.uid, run.gid) == (64030, 64030)  # the user's group from the image's /etc/passwd
    assert run.groups == (64030, 5, 7, 9)
    run = _launch({"name": "c", "securityContext": {"runAsUser": 1000, "runAsGroup": 2000}})
    assert (run.uid, run.gid) == (1000, 2000)
    with pytest.raises(ConfigError, match="runAsNonRoot"):
        _launch({"name": "c", "securityContext": {"runAsNonRoot": True}})


def test_capabilities_follow_drop_and_add() -> None:
    assert capabilities({}) == tuple(sorted(DEFAULT_CAPABILITIES))
    assert capabilities({"capabilities": {"drop": ["ALL"], "add": ["CHOWN", "CAP_SETUID"]}}) == ("CHOWN", "SETUID")
    assert capabilities({"capabilities": {"drop": ["NET_RAW"]}}) == tuple(
        sorted(set(DEFAULT_CAPABILITIES) - {"NET_RAW"})
    )
    assert capabilities({"privileged": True}) == ("ALL",)
    run = _launch({"name": "c", "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True}})
    assert run.no_new_privs and run.read_only_root


def test_command_args_and_environment() -> None:
    container = {
        "name": "c",
        "args": ["--level", "$(LEVEL)", "$$(LEVEL)"],
        "workingDir": "/work",
        "env": [
            {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "level"}}},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "auth", "key": "token"}}},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "URL", "value": "http://$(IP):80"},
            {"name": "GONE", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "nope", "optional": True}}},
        ],
    }
    run = _launch(container)
    assert run.argv == ("/entry", "--level", "debug", "$(LEVEL)")  # args replace the image's cmd only
    assert run.cwd == "/work"
    env = run.env
    assert (env["LEVEL"], env["TOKEN"], env["IP"], env["APP"], env["NODE"]) == (
        "debug",
        "s3cret",
        "10.233.0.5",
        "x",
        "n1",
    )
    assert env["URL"] == "http://10.233.0.5:80" and "GONE" not in env
    assert env["PATH"] == "/usr/bin" and env["HOSTNAME"] == "p" and env["KUBERNETES_SERVICE_HOST"] == "10.233.0.1"
    assert _launch({"name": "c", "command": ["sh"]}).argv == ("sh",)  # command replaces the entrypoint and cmd


def test_a_missing_key_or_object_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="couldn't find key nope in configmap ns/conf"):
        _launch(
            {"name": "c", "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "nope"}}}]}
        )
    with pytest.raises(ConfigError, match='secret "other" not found'):
        _launch({"name": "c", "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}]})


def test_volume_files_of_projected_configmaps_secrets_and_downward_api() -> None:
    volume = {
        "name": "v",
        "projected": {
            "defaultMode": 0o444,
            "sources": [
                {"configMap": {"name": "conf", "items": [{"key": "level", "path": "etc/level", "mode": 0o400}]}},
                {"secret": {"name": "auth"}},
                {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
            ],
        },
    }
    pod = _pod({"name": "c"})
    encoded = {k: {kk: vv.encode() for kk, vv in v.items()} for k, v in (CONFIGMAPS | SECRETS).items()}
    files = volume_files(pod, volume, _find(encoded), _find(encoded))
    assert files == {"etc/level": (b"debug", 0o400), "token": (b"s3cret", 0o444), "name": (b"p", 0o444)}
    missing = {"name": "m", "configMap": {"name": "conf", "items": [{"key": "nope", "path": "x"}]}}
    with pytest.raises(ConfigError, match="non-existent config key: nope"):
        volume_files(pod, missing, _find(encoded), _find(encoded))
    assert volume_files(pod, {"name": "e", "emptyDir": {}}, _find(encoded), _find(encoded)) is None


def test_mount_points_resolve_inside_the_root(tmp_path: Path) -> None:
    """/var/run -> /run in Debian images: a mount point under it must land in the root's /run."""
    from sunk.runtime.local.sandbox import in_root

    (tmp_path / "run").mkdir()
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "run").symlink_to("/run")
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "up").symlink_to("../../../..")
    assert (
        in_root(tmp_path, "/var/run/secrets/kubernetes.io/serviceaccount")
        == "/run/secrets/kubernetes.io/serviceaccount"
    )
    assert in_root(tmp_path, "/etc/up/x") == "/x"  # `..` stops at the root
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(ConfigError, match="symbolic links"):
        in_root(tmp_path, "/loop/x")
