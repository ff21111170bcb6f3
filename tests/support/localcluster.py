"""One harness for the test modules that boot a local cluster (`sunk local up`) and drive it only
through `sunk local`, kubectl and the login pod's Slurm clients (tests/runtime/local): the `sunk`
command as a user runs it, the images built, the stack written and brought up once per module and
always taken down, a kubectl wrapper, and a wait that prints every pod when it gives up.

Each module keeps what is its own (its stack, its Slurm helpers) in a subclass of LocalCluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from tests.support import waiting

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def sunk(*args: str, env: dict[str, str], cwd: Path = ROOT, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`python -m sunk ARGS` in `cwd` (the checkout), as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "sunk", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def ready(pod: dict[str, Any]) -> bool:
    """The pod's Ready condition is True."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def kubectl_at(
    kubeconfig: str | Path, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The real kubectl on `kubeconfig`; with `check`, a failure fails the test naming the command
    and kubectl's error."""
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )
    if check:
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done


def token_kubeconfig(kubeconfig: str | Path, token: str, out: Path) -> Path:
    """A kubeconfig at `out` for the cluster of `kubeconfig` that presents `token` and nothing else:
    with the admin's client certificate beside it, Kubernetes' API server would take the
    certificate (its x509 authenticator comes first) and the request would be the admin's."""
    view = json.loads(kubectl_at(kubeconfig, "config", "view", "--raw", "--minify", "-o", "json").stdout)
    cluster = view["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": "token", "user": {"token": token}}],
        "contexts": [{"name": "token", "context": {"cluster": "local", "user": "token"}}],
        "current-context": "token",
    }
    out.write_text(json.dumps(config))
    out.chmod(0o600)
    return out


@dataclass
class Boot:
    """A local cluster brought up by `booted`: its environment (SUNK_LOCAL_DIR), kubeconfig, the
    folder it lives in, and what `sunk local up` returned (the caller checks it: a failed `up` is
    still taken down)."""

    env: dict[str, str]
    kubeconfig: str
    folder: Path
    up: subprocess.CompletedProcess[str]


@contextmanager
def booted(
    folder: Path,
    stack: dict[str, Any] | str,
    *,
    stack_name: str = "",
    builds: Sequence[Sequence[str]] = ((),),
    up: Sequence[str] = (),
    clusters: Path | None = None,
) -> Iterator[Boot]:
    """The images built (`sunk images build` with each of `builds`' arguments: cached by input hash,
    so quick when built), the stack (a document written to `folder/Pulumi.<stack_name>.yaml`, or a
    stack's name) brought up with `sunk local up STACK *up`, and always taken down after."""
    env = {**os.environ, "SUNK_LOCAL_DIR": str(clusters or folder / "clusters")}
    for args in builds:
        built = sunk("images", "build", *args, env=env, timeout=1800)
        assert built.returncode == 0, built.stderr
    if isinstance(stack, dict):
        path = folder / f"Pulumi.{stack_name}.yaml"
        path.write_text(yaml.safe_dump(stack, sort_keys=False))
        target = str(path)
    else:
        target = stack
    result = sunk("local", "up", target, *up, env=env)
    try:
        yield Boot(env, sunk("local", "kubeconfig", env=env).stdout.strip(), folder, result)
    finally:
        down = sunk("local", "down", env=env)
        assert down.returncode == 0, down.stderr


class LocalCluster:
    """kubectl on one local cluster, and waits that say what they saw."""

    interval = 1.0
    """Seconds between a wait's probes."""

    def __init__(self, env: dict[str, str], kubeconfig: str = "") -> None:
        self.env, self.kubeconfig = env, kubeconfig

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return kubectl_at(self.kubeconfig, *args, stdin=stdin, check=check, timeout=timeout)

    def get(self, *args: str) -> Any:
        """`kubectl get -o json ARGS`, parsed."""
        return json.loads(self.kubectl("get", "-o", "json", *args).stdout)

    def pod(self, name: str, namespace: str) -> dict[str, Any]:
        """The pod, or an empty one's shape when it does not exist (mid-replacement)."""
        done = self.kubectl("get", "pod", "-n", namespace, name, "-o", "json", check=False)
        return dict(json.loads(done.stdout)) if done.returncode == 0 else {"metadata": {}, "spec": {}, "status": {}}

    def wait(self, what: str, probe: Callable[[], T], done: Callable[[T], bool], timeout: float = 300) -> T:
        """`probe()` every `interval` seconds until `done` accepts what it returns, and return that.
        A probe that raises AssertionError (no pod of a component for a moment, mid-rollout) is
        'not yet'. After `timeout` seconds, fail naming `what`, the last answer, every pod and
        `diagnose()`."""
        seen: list[Any] = []

        def check() -> tuple[T] | None:
            try:
                value = probe()
            except AssertionError as missing:
                seen[:] = [f"not yet: {missing}"]
                return None
            seen[:] = [value]
            return (value,) if done(value) else None

        try:
            value = waiting.wait_for(what, check, timeout=timeout, interval=self.interval)[0]
        except AssertionError:
            pods = self.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
            last = str(seen[0] if seen else None)[:2000]
            pytest.fail(f"{what}: not after {timeout:.0f} s; last: {last}\n{pods}{self.diagnose()}")
        self.waited(what)
        return value

    def waited(self, what: str) -> None:
        """Called when a wait for `what` ends (a module's timeline)."""

    def diagnose(self) -> str:
        """What a failed wait prints beside the pods (a module's logs of interest)."""
        return ""
