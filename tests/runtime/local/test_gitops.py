"""The GitOps path on the local cluster, driven only through the sunk command and the real kubectl:
`sunk render acme-dev --out DIR` (no `--show-secrets`: what a user commits), the local cluster's
named off-cluster changes (runtime/local/offcluster.py), then the README's exact apply command
against an empty cluster, twice. The render's key generator Job makes every key in the cluster,
the cluster comes up and runs jobs, and a second cluster applied from the same render gets keys of
its own.

Two clusters, one after the other's keys are read (the slow part is the first one's pods: a few
minutes on a loaded machine)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from sunk.runtime.local import cli

from components.render import apply_command
from tests.support import waiting
from tests.support.localcluster import sunk
from tests.support.stacks import FIXTURE_PROJECT

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[3]
NS = "acme-research"
KEYGEN_SECRETS = ("research-auth", "research-jwt", "research-mariadb", "research-login-host-keys")


class Empty:
    """An empty local cluster (the cluster's own process, no stack applied) for a project folder,
    stopped by `sunk local down` run in that folder."""

    def __init__(self, base: Path, project: Path) -> None:
        self.env = {**os.environ, cli.BASE_ENV: str(base)}
        self.project = project
        with mock.patch.dict(os.environ, {cli.BASE_ENV: str(base)}):
            self.folder = cli.workdir(project)  # the folder `sunk local down` in `project` finds
        self.state = cli._start(self.folder, project, timeout=120)  # as `sunk local up` starts it
        self.kubeconfig = self.state.kubeconfig

    def kubectl(self, *args: str, check: bool = True, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", self.kubeconfig, *args], capture_output=True, text=True, timeout=timeout
        )
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done

    def apply(self, render: Path) -> list[str]:
        """The exact command `sunk render` prints (and the docs give), through a shell as a user
        pastes it: the CRDs, a wait until they have conditions, until Established, then the folder.
        The lines `kubectl apply -f DIR` printed (the waits' "condition met" lines left out)."""
        names = [str(p.relative_to(render)) for p in render.rglob("*.yaml")]
        done = subprocess.run(
            ["sh", "-c", apply_command(names, render)], env={**os.environ, "KUBECONFIG": self.kubeconfig},
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, f"{apply_command(names, render)}: {done.stderr}"
        return [line for line in done.stdout.splitlines() if not line.endswith(" condition met")]

    def keys(self) -> dict[str, dict[str, bytes]]:
        out = {}
        for name in KEYGEN_SECRETS:
            secret = json.loads(self.kubectl("get", "secret", "-n", NS, name, "-o", "json").stdout)
            out[name] = {k: base64.b64decode(v) for k, v in secret["data"].items()}
        return out

    def wait_for_keygen(self, timeout: int = 480) -> dict[str, Any]:
        jobs = json.loads(self.kubectl("get", "jobs", "-n", NS, "-o", "json").stdout)["items"]
        (job,) = [j for j in jobs if j["metadata"]["name"].startswith("research-keygen-")]
        name = job["metadata"]["name"]
        done = self.kubectl(
            "wait", "-n", NS, "--for=condition=Complete", f"job/{name}", f"--timeout={timeout}s", check=False,
            timeout=timeout + 30,
        )  # fmt: skip
        if done.returncode != 0:
            pods = self.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
            pytest.fail(f"the key generator Job did not complete: {done.stderr}\n{pods}")
        return dict(json.loads(self.kubectl("get", "job", "-n", NS, name, "-o", "json").stdout))

    def down(self) -> None:
        done = sunk("local", "down", env=self.env, cwd=self.project)
        assert done.returncode == 0, done.stderr
        waiting.wait_for("the cluster's process to exit", lambda: cli.running(self.folder) is None, timeout=30)


@pytest.fixture(scope="module")
def render(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = sunk("images", "build", env=dict(os.environ), timeout=1800)
    assert built.returncode == 0, built.stderr
    folder = tmp_path_factory.mktemp("gitops") / "render"
    # The fixture project's acme-dev (tests/fixtures), as a user renders in their own project.
    done = sunk("render", "acme-dev", "--out", str(folder), env=dict(os.environ), cwd=FIXTURE_PROJECT)
    assert done.returncode == 0, done.stderr
    names = [str(p.relative_to(folder)) for p in folder.rglob("*.yaml")]
    assert f"  {apply_command(names, folder)}" in done.stdout.splitlines()  # what Empty.apply runs
    from sunk.runtime.local.offcluster import override_render

    override_render(folder)  # the named off-cluster changes only (cgroups, node sizes)
    return folder


@pytest.fixture(scope="module")
def cluster(render: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Empty, list[str]]]:
    empty = Empty(tmp_path_factory.mktemp("gitops-clusters"), ROOT)
    try:
        assert not empty.kubectl("get", "secrets", "-n", NS, check=False).stdout.strip()
        empty.apply(render)
        second = empty.apply(render)
        yield empty, second
    finally:
        empty.down()


def test_the_job_makes_every_key_in_the_cluster_and_the_render_holds_none(
    cluster: tuple[Empty, list[str]], render: Path
) -> None:
    empty, _ = cluster
    job = empty.wait_for_keygen()
    assert job["status"].get("succeeded") == 1
    pods = json.loads(empty.kubectl("get", "pods", "-n", NS, "-o", "json").stdout)["items"]
    ran = [
        p for p in pods if any(o["uid"] == job["metadata"]["uid"] for o in p["metadata"].get("ownerReferences") or [])
    ]
    assert [p["status"]["phase"] for p in ran] == ["Succeeded"]  # it ran as the render's pod
    keys = empty.keys()
    text = b"".join(p.read_bytes() for p in render.rglob("*.yaml"))
    for name, items in keys.items():
        for key, value in items.items():
            assert len(value) >= 32, (name, key)
            assert value not in text and base64.b64encode(value) not in text, (name, key)


def test_a_second_apply_changes_nothing_it_owns(cluster: tuple[Empty, list[str]]) -> None:
    """Unchanged but kubectl's resent PodDisruptionBudget selector and the topology ConfigMap the
    operator rewrites (see test_local_cluster.py); never a Secret (the render has no keys)."""
    _, second = cluster
    changed = {line for line in second if not line.endswith(" unchanged")}
    assert changed <= {
        "poddisruptionbudget.policy/research-controller configured",
        "configmap/research-topology configured",
    }


def test_the_cluster_comes_up_and_runs_jobs(cluster: tuple[Empty, list[str]]) -> None:
    empty, _ = cluster
    empty.wait_for_keygen()
    deadline = time.monotonic() + 600
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        nodeset = empty.kubectl("get", "nodeset", "-n", NS, "research-cpu", "-o", "json", check=False)
        status = (json.loads(nodeset.stdout).get("status") or {}) if nodeset.returncode == 0 else {}
        if status.get("idle") == 2:
            break
        time.sleep(5)
    else:
        pods = empty.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout
        pytest.fail(f"the cpu NodeSet's nodes are not idle in Slurm: {status}\n{pods}")
    for name in ("research-controller-0", "research-mariadb-0"):
        empty.kubectl("wait", "-n", NS, "--for=condition=Ready", f"pod/{name}", "--timeout=300s", timeout=330)
    login = ("exec", "-n", NS, "deploy/research-login", "-c", "sshd", "--")
    # One line per node (-N): a compressed list follows registration order (cpu-[1,0]).
    per_node = empty.kubectl(*login, "sinfo", "-h", "-N", "-p", "batch", "-o", "%N %T").stdout.splitlines()
    assert sorted(per_node) == ["cpu-0 idle", "cpu-1 idle"], per_node
    # A job over both nodes waits for the operator's topology.conf to name them: it reconfigures
    # slurmctld 10 to 80 s after writing it (a last time at 90 s), so the first tries may be refused
    # ("Requested node configuration is not available", or "Requested topology configuration ...").
    deadline = time.monotonic() + 300
    ran = empty.kubectl(*login, "srun", "-N2", "-p", "batch", "hostname", check=False, timeout=300)
    while ran.returncode != 0 and "configuration is not available" in ran.stderr and time.monotonic() < deadline:
        time.sleep(10)
        ran = empty.kubectl(*login, "srun", "-N2", "-p", "batch", "hostname", check=False, timeout=300)
    assert sorted(ran.stdout.split()) == ["cpu-0", "cpu-1"], ran.stderr
    submitted = empty.kubectl(
        *login, "sbatch", "--parsable", "--wait", "-N2", "-p", "batch", "--wrap", "true", timeout=300
    )
    job = submitted.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 120
    state = ""
    while time.monotonic() < deadline and state != "COMPLETED":  # slurmdbd records it shortly after
        state = empty.kubectl(*login, "sacct", "-n", "-X", "-j", job, "-o", "State").stdout.strip()
        time.sleep(2)
    assert state == "COMPLETED"


def test_two_clusters_from_one_render_get_two_key_sets(
    cluster: tuple[Empty, list[str]], render: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    first, _ = cluster
    first.wait_for_keygen()
    other = Empty(tmp_path_factory.mktemp("gitops-other"), tmp_path_factory.mktemp("other-project"))
    try:
        other.apply(render)
        other.wait_for_keygen()
        mine, theirs = first.keys(), other.keys()
    finally:
        other.down()
    assert mine.keys() == theirs.keys() == set(KEYGEN_SECRETS)
    for name in KEYGEN_SECRETS:
        assert mine[name].keys() == theirs[name].keys()
        for key in mine[name]:
            assert mine[name][key] != theirs[name][key], (name, key)
