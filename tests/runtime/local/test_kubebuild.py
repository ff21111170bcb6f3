"""The control plane's pins and build recipe, without Go: pin.py's go.mod from a release's go.mod,
the committed pins, the cache key and the go commands."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest
from sunk.runtime.local import kubebuild

ROOT = Path(__file__).resolve().parents[3]
PINS = ROOT / "runtime" / "local" / "gomodules"

UPSTREAM = """// This is a generated file. Do not edit directly.
module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
	go.etcd.io/etcd/client/v3 v3.6.8
	k8s.io/api v0.0.0
	k8s.io/apiserver v0.0.0
)

replace (
	k8s.io/apiserver => ./staging/src/k8s.io/apiserver
	k8s.io/api => ./staging/src/k8s.io/api
)
"""


def _pin() -> ModuleType:
    spec = importlib.util.spec_from_file_location("controlplane_pin", ROOT / "tools" / "controlplane" / "pin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pin_replaces_every_staging_module_with_the_release_s_v0_version() -> None:
    gomod = _pin().kubernetes_gomod("v1.36.3", UPSTREAM)
    assert "\tk8s.io/api => k8s.io/api v0.36.3\n\tk8s.io/apiserver => k8s.io/apiserver v0.36.3\n" in gomod
    assert "require k8s.io/kubernetes v1.36.3" in gomod
    assert "\ngo 1.26.0\n" in gomod and "\ngodebug default=go1.26\n" in gomod
    assert "\tk8s.io/kubernetes/cmd/kube-apiserver\n" in gomod


def test_pin_refuses_what_is_not_a_release() -> None:
    with pytest.raises(SystemExit, match=r"like v1\.36\.3"):
        _pin().kubernetes_gomod("1.36", UPSTREAM)
    with pytest.raises(SystemExit, match="no staging replaces"):
        _pin().kubernetes_gomod("v1.36.3", "module k8s.io/kubernetes\n\ngo 1.26.0\n")


def test_committed_pins_replace_each_staging_module_at_the_release() -> None:
    """The committed go.mod is pin.py's: every k8s.io replace at v0.<minor>.<patch> of the release
    required (a hand edit that moves one drifts from what upstream built and tested together)."""
    gomod = (PINS / "kubernetes" / "go.mod").read_text()
    release, minor = kubebuild.release_of(gomod)
    patch = release.rsplit(".", 1)[1]
    replaces = re.findall(r"^\s*(k8s\.io/\S+) => (\S+) (\S+)$", gomod, re.M)
    assert len(replaces) > 25
    assert {(a == b, v) for a, b, v in replaces} == {(True, f"v0.{minor}.{patch}")}
    assert "go.etcd.io/etcd/server/v3 v3.6." in (PINS / "etcd" / "go.mod").read_text()


def test_cache_key_moves_with_any_pin_file_or_the_toolchain() -> None:
    files = [("kubernetes/go.mod", b"a"), ("kubernetes/go.sum", b"b")]
    key = kubebuild.cache_key(files, "go1.26.8")
    assert kubebuild.cache_key(list(reversed(files)), "go1.26.8") == key
    assert kubebuild.cache_key([("kubernetes/go.mod", b"a"), ("kubernetes/go.sum", b"c")], "go1.26.8") != key
    assert kubebuild.cache_key(files, "go1.26.9") != key
    # The length prefixes keep a byte moving across the name/data border from colliding.
    assert kubebuild.cache_key([("ab", b"c")], "go") != kubebuild.cache_key([("a", b"bc")], "go")


def test_steps_build_static_release_binaries_with_the_version_stamped() -> None:
    etcd, kube = kubebuild.steps(Path("/m"), Path("/out"), "v1.36.3", "36")
    assert etcd.cwd == Path("/m/etcd") and etcd.argv[-1] == "go.etcd.io/etcd/server/v3"
    assert kube.cwd == Path("/m/kubernetes")
    assert kube.argv[-3:] == tuple(f"k8s.io/kubernetes/cmd/{c}" for c in kubebuild.KUBERNETES_COMMANDS)
    for step in (etcd, kube):
        assert step.argv[:5] == ("go", "build", "-trimpath", "-tags", "selinux,notest,grpcnotrace")
    flags = kube.argv[kube.argv.index("-ldflags") + 1]
    assert flags.startswith("-s -w ")
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.3" in flags
    assert "-X k8s.io/component-base/version.gitMinor=36" in flags
    assert kubebuild.go_env({})["CGO_ENABLED"] == "0"


def test_locate_names_the_build_command_when_nothing_is_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubebuild, "_go_version", lambda: "go1.26.8")
    with pytest.raises(kubebuild.BuildError, match="sunk local controlplane build"):
        kubebuild.locate(PINS, cache=tmp_path)
