"""Containers in jobs, proven here: Slurm's native OCI support (the rendered oci.conf, crun from the
slurmd image) runs `srun --container` steps in their own namespaces on an OCI bundle.

What this can't model: the bundle is a minimal one made here (busybox), not an image pulled from a
registry; jobs run as root in the harness, so crun's rootless mode runs with root's ids; the
jail has no cgroup hierarchy (slurmd's cgroup plugins are off locally), so confinement by the job
cgroup is not shown. pyxis+enroot can't be built here (not Debian packages; see test_images)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sunk.runtime.harness import LocalSlurm

from sunk.stackfile import load_stack
from tests.support.stacks import FIXTURE_STACKS
from tests.support.tools import bootstrap_tool

pytestmark = pytest.mark.slurm

BUSYBOX = Path("/bin/busybox")
"""Debian's busybox-static (installed by .ci/bootstrap): one static binary for the bundle's rootfs."""


def _bundle(folder: Path, hostname: str) -> None:
    """A minimal OCI bundle: a read-only busybox rootfs and its runtime config."""
    rootfs = folder / "rootfs"
    for sub in ("bin", "dev", "proc", "sys", "tmp", "etc"):
        (rootfs / sub).mkdir(parents=True)
    shutil.copy(bootstrap_tool("busybox", at=BUSYBOX, package="busybox-static"), rootfs / "bin/busybox")
    (rootfs / "bin/sh").symlink_to("busybox")
    (rootfs / "etc/os-release").write_text("NAME=sunk-test-bundle\n")
    config = {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "args": ["/bin/sh"],
            "env": ["PATH=/bin"],
            "cwd": "/",
        },
        "root": {"path": "rootfs", "readonly": True},
        "hostname": hostname,
        "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"}],
        "linux": {"namespaces": [{"type": t} for t in ("pid", "mount", "uts", "ipc")]},
    }
    (folder / "config.json").write_text(json.dumps(config))


@pytest.fixture(scope="module")
def oci() -> Iterator[LocalSlurm]:
    spec = load_stack("globex-dev", FIXTURE_STACKS).spec
    spec = spec.model_copy(update={"containers": spec.containers.model_copy(update={"enabled": True})})
    with LocalSlurm.start(spec, accounting=False, restapi=False) as slurm:
        yield slurm


def test_oci_conf_is_rendered_for_crun_and_reaches_the_nodes(oci: LocalSlurm) -> None:
    text = oci.files["oci.conf"]
    assert 'RunTimeRun="crun --rootless=true --cgroup-manager=disabled --root=/run/user/%U run --bundle %b' in text
    node = oci.nodes[0].name
    assert (oci.role_root("slurmd") / f"etc/sunk-nodes/{node}/oci.conf").read_text() == text


def test_srun_container_runs_the_step_inside_the_bundle(oci: LocalSlurm) -> None:
    _bundle(oci.root / "tmp/bundle", "in-a-container")
    script = "echo pid=$$; busybox hostname; busybox cat /etc/os-release; busybox touch /x 2>&1 || echo read-only"
    done = oci.run("srun", "-N1", "--container=/tmp/bundle", "/bin/sh", "-c", script, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # Its own pid namespace (the step is pid 1), hostname and root filesystem, read-only.
    assert lines[:3] == ["pid=1", "in-a-container", "NAME=sunk-test-bundle"], lines
    assert lines[-1] == "read-only"
    # The same command outside a container runs on the slurmd image (Debian), not the bundle.
    plain = oci.run("srun", "-N1", "cat", "/etc/os-release", check=True).stdout
    assert "Debian" in plain


def test_sbatch_container_runs_the_batch_script_in_the_bundle(oci: LocalSlurm) -> None:
    _bundle(oci.root / "tmp/batch-bundle", "batch-container")
    script = "#!/bin/sh\necho pid=$$ on $(busybox hostname)\n"
    job = oci.sbatch(script, "--container=/tmp/batch-bundle", "-o", "/tmp/container-%j.out")
    assert oci.wait_job(job, timeout=60) == "COMPLETED"
    # slurmstepd writes the output outside the container; the script ran inside it.
    out = (oci.root / f"tmp/container-{job}.out").read_text().splitlines()
    assert out[0] == "pid=1 on batch-container", out
