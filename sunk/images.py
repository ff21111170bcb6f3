"""The images sunk builds: one per role and supported Slurm release, layered on shared Debian bases.

Pure data, shared by the spec (default image references), the manifests (the users and commands
the images are made for) and the builder (runtime/images/build.py, which turns each role into an
OCI image with mmdebstrap and buildah). Package lists live beside the builder, one file per
layer: runtime/images/<layer>/packages.txt.

Layers, each a buildah commit on its parent, so registries and nodes store the shared ones once:

    base     Debian (apt variant): the suite of the image family's Slurm release (RELEASES)
    slurm    base + Slurm clients, plugins and munge (every Slurm role)
    python   base + Debian's python3 and the runtime's pinned dependencies (no pulumi)
    <role>   one of those + the role's own packages and files
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Release:
    """One supported Slurm release: everything sunk does differently for it, in one row. Code asks
    the row (`release_of(spec.slurm.version).named_topologies`); nothing else compares release
    strings (tests/test_releases.py greps for such comparisons)."""

    version: str
    """Slurm's major release, as `slurm.version` in a stack names it: "26.05"."""
    slurm: str
    """The upstream Slurm version its images ship (the tag of every Slurm role image): "26.05.5"."""
    suite: str
    """Debian suite of the whole family (base, Slurm, Python): never mixed within a release, so
    slurmd, its plugins and the libraries they were built against come from one archive."""
    python: str
    """The suite's python3 (the runtime image's wheels are chosen for it)."""
    protocol: int
    """The first byte of the release's SLURM_PROTOCOL_VERSION, which slurmctld writes at the head
    of each state file (measured: 42 for 24.11, 45 for 26.05): how an upgrade's state guard tells
    which release wrote StateSaveLocation (sunk/manifests/scripts/state-guard.sh)."""
    rest_api: tuple[str, ...]
    """The data_parser versions its slurmrestd serves, newest first (measured 2026-11: 24.11 serves
    v0.0.40-v0.0.42, 26.05 v0.0.42-v0.0.45). The runtime's client uses the newest it speaks among
    those the server's own document lists (runtime/slurmrest/versions.py)."""
    metrics: bool
    """slurmctld has its own OpenMetrics endpoints (MetricsType, Slurm 25.11 and later); an older
    slurmctld exits on the key, so `controller.metrics` is refused."""
    named_topologies: bool
    """slurmctld reads several named topologies from topology.yaml (Slurm 25.05 and later); an older
    one reads one topology, from topology.conf, so `topologies` and a partition's `topology` are refused."""
    block_plugin_at_start: bool
    """topology/block in topology.conf starts with no registered node (24.11). slurmctld 26.05 exits
    at start ("No blocks configured") unless a block holds a node that exists then, and a NodeSet's
    nodes are dynamic, registering after it: `topology.plugin: block` is refused there (a block
    topology under `topologies` is written flat until a block fills)."""
    node_less_tree_root: bool
    """A tree topology with no node yet (deploy time) is written as the root switch alone:
    slurmctld 26.05 exits on a tree without a switch ("No switches configured"), 24.11 on a switch
    without nodes or switches ("neither child switches nor nodes"), both measured 2026-11."""
    probes_gpus: bool
    """slurmd probes every GPU library at start on a node without GPUs when GresTypes=gpu, logging
    "System GPU detection failed" twice (26.05, measured 2026-11; 24.11 probes only with AutoDetect
    set): so a GPU-less NodeSet of a GPU cluster gets a gres.conf with `AutoDetect=off`."""

    @property
    def pins(self) -> str:
        """The file, beside the image builder (runtime/images/pins/), holding the exact Debian
        version of every Slurm package the family installs."""
        return f"{self.version}.txt"

    def debs(self, arch: str) -> str:
        """The file beside the pins holding the archive's Packages stanzas (SHA256 included) of the
        pinned packages and their Slurm dependencies on `arch`: what a verified copy is checked against."""
        return f"{self.version}-{arch}.Packages"


RELEASES: dict[str, Release] = {
    r.version: r
    for r in (
        # sid (unstable), not forky (testing): forky lacks slurm-wlm-nvml-plugin 26.05 (measured 2026-11
        # 2026-11-26: only sid contrib has it), and a plugin from one suite beside the slurmd of
        # another risks version skew. Exact package versions are pinned in runtime/images/pins/; when
        # sid drops them, the build installs a verified copy (docs/slurm-releases.md).
        Release(
            "26.05",
            "26.05.5",
            "sid",
            "3.14",
            45,
            rest_api=("v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42"),
            metrics=True,
            named_topologies=True,
            block_plugin_at_start=False,
            node_less_tree_root=True,
            probes_gpus=True,
        ),
        Release(
            "24.11",
            "24.11.5",
            "trixie",
            "3.13",
            42,
            rest_api=("v0.0.42", "v0.0.41", "v0.0.40"),
            metrics=False,
            named_topologies=False,
            block_plugin_at_start=True,
            node_less_tree_root=False,
            probes_gpus=False,
        ),
    )
}
"""Every Slurm release sunk supports, newest first; exact Debian package versions per release
live beside the builder (runtime/images/pins/<version>.txt)."""
DEFAULT_SLURM = "26.05"
"""The release a stack gets without `slurm.version`."""
SUPPORTED_SLURM: tuple[str, ...] = tuple(RELEASES)
SLURM_VERSION = DEFAULT_SLURM
"""The default release (renderers take the cluster's own, ClusterSpec.slurm.version)."""
MARIADB_VERSION = "11.8"
"""Debian trixie's mariadb-server version: the tag of the mariadb image (one image, whatever the
Slurm release: it is built from Debian stable, STABLE_RELEASE's suite)."""
STABLE_RELEASE = "24.11"
"""The release whose suite (Debian stable) builds the images that do not depend on Slurm (mariadb)."""
RUNTIME_VERSION = "0.1.0"
"""The sunk package version: the tag of the runtime image (operator, syncer, scheduler), followed
by the Slurm release of the clients it ships (`0.1.0-slurm26.05`)."""
DEFAULT_REGISTRY = "ghcr.io/sunk-dev"
"""Where released images live; `images.registry` in a stack points elsewhere (`sunk images push`)."""

Arch = Literal["amd64", "arm64"]
ARCHES: tuple[Arch, ...] = ("amd64", "arm64")
DEFAULT_ARCH: Arch = "amd64"
TRIPLETS: dict[Arch, str] = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}
"""Debian's multiarch directory: Slurm's plugins are in /usr/lib/<triplet>/slurm."""

SLURM_UID = 64030
"""Debian's slurm-wlm packages create `slurm` with this fixed id (and group)."""
MUNGE_UID = 990
"""Fixed in our base, so files munged owns mean the same in every Slurm image."""
MARIADB_UID = 999
"""`mysql` in our mariadb image (the id the official image uses too)."""
NOBODY_UID = 65534
"""slurmrestd refuses to run as root or as SlurmUser; `nobody` is the documented choice."""
RUNTIME_UID = 10001
"""The runtime image's unprivileged user `sunk` (a plain Python process)."""

PYXIS_VARIANT = "pyxis"
"""Tag suffix of slurmd/login images built with the optional pyxis+enroot stage."""
SPANK_DIR = "/usr/local/lib/sunk/spank"
"""Architecture-neutral folder of SPANK plugins in our images (links into /usr/lib/<triplet>/slurm),
so one plugstack.conf serves amd64 and arm64 NodeSets."""
S6_INIT = "/usr/local/sbin/sunk-init"
"""In the slurmd image: runs a NodeSet's one-shot scripts, supervises its s6 services with Debian's
s6, and runs slurmd in the foreground (what s6-overlay's `/init` does, which Debian lacks)."""
MARIADB_ENTRYPOINT = "/usr/local/bin/sunk-mariadb-entrypoint"


@dataclass(frozen=True)
class Role:
    """One image: its repository name, the layer it builds on, and its OCI config."""

    name: str
    image: str
    """Repository name under the registry."""
    parent: Literal["base", "slurm", "python"]
    tag: str
    """The tag, with `{slurm}` (the release's upstream version) and `{release}` filled per release."""
    cmd: tuple[str, ...]
    """What the image runs by default: the manifests' command for this role."""
    user: str
    """Image User: the account the manifests run the role's main container as."""
    description: str
    entrypoint: tuple[str, ...] = ()
    workdir: str = "/"
    env: tuple[str, ...] = ()


ROLES: dict[str, Role] = {
    r.name: r
    for r in (
        Role("slurmctld", "slurmctld", "slurm", "{slurm}", ("slurmctld", "-D"), "slurm", "Slurm controller"),
        Role("slurmdbd", "slurmdbd", "slurm", "{slurm}", ("slurmdbd", "-D"), "slurm", "Slurm accounting"),
        Role(
            "slurmrestd",
            "slurmrestd",
            "slurm",
            "{slurm}",
            ("slurmrestd", "-a", "rest_auth/jwt", "0.0.0.0:6820"),
            "nobody",
            "Slurm REST API",
            env=("SLURM_JWT=daemon",),
        ),
        Role("slurmd", "slurmd", "slurm", "{slurm}", ("slurmd", "-D"), "root", "Slurm compute node"),
        Role(
            "login",
            "login",
            "slurm",
            "{slurm}",
            ("/usr/sbin/sshd", "-D", "-e"),
            "root",
            "Slurm login node: sshd, SSSD, sackd and the Slurm clients",
        ),
        Role(
            "mariadb",
            "mariadb",
            "base",
            MARIADB_VERSION,
            (),
            str(MARIADB_UID),
            "MariaDB for in-cluster Slurm accounting",
            entrypoint=(MARIADB_ENTRYPOINT,),
        ),
        Role(
            "runtime",
            "sunk-runtime",
            "python",
            RUNTIME_VERSION + "-slurm{release}",
            ("python", "-m", "sunk.runtime.operator"),
            str(RUNTIME_UID),
            "sunk operator, syncer and scheduler",
            env=("PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"),
        ),
    )
}
"""Every image a rendered manifest may name (besides a user's own, e.g. NodeSet sidecars)."""

LAYERS = ("base", "slurm", "python")
"""Shared parent layers, in build order."""


def supported_release(value: str) -> str:
    """`value` if it names a supported release (a field validator: the error lists them)."""
    if value not in RELEASES:
        raise ValueError(f"{value!r} is not a Slurm release sunk supports; supported: {', '.join(RELEASES)}")
    return value


def release_of(version: str = DEFAULT_SLURM) -> Release:
    """The supported release `version` names (KeyError for any other: the spec refuses those)."""
    return RELEASES[version]


def releases_where(has: Callable[[Release], bool]) -> list[str]:
    """The supported releases that have a feature, for a message saying what would be valid:
    `releases_where(lambda r: r.metrics)` -> ["26.05"]."""
    return [r.version for r in RELEASES.values() if has(r)]


def shared_rest_api(spoken: Iterable[str] | None = None) -> str:
    """The newest data_parser version every supported release serves (and, given, that `spoken`
    holds): what a tool uses without asking the server, and a client that can't read the
    server's document falls back to. ValueError when the releases share none."""
    common = set.intersection(*(set(r.rest_api) for r in RELEASES.values()))
    if spoken is not None:
        common &= set(spoken)
    if not common:
        raise ValueError(f"the Slurm releases {', '.join(RELEASES)} serve no data_parser version in common")
    return max(common, key=lambda v: tuple(int(part) for part in v.lstrip("v").split(".")))


def tag_for(role: Role, arch: Arch = DEFAULT_ARCH, variant: str | None = None, release: str = DEFAULT_SLURM) -> str:
    """`26.05.5` for amd64, `26.05.5-arm64` for arm64; a variant adds `-pyxis`."""
    tag = role.tag.format(slurm=release_of(release).slurm, release=release)
    if variant:
        tag = f"{tag}-{variant}"
    return tag if arch == DEFAULT_ARCH else f"{tag}-{arch}"


def repository(role: str, registry: str = DEFAULT_REGISTRY) -> str:
    return f"{registry.rstrip('/')}/{ROLES[role].image}"


def reference(
    role: str,
    registry: str = DEFAULT_REGISTRY,
    arch: Arch = DEFAULT_ARCH,
    variant: str | None = None,
    release: str = DEFAULT_SLURM,
) -> str:
    return f"{repository(role, registry)}:{tag_for(ROLES[role], arch, variant, release)}"


def plugin_dir(arch: Arch) -> str:
    """Slurm's PluginDir in a Debian image of `arch`."""
    return f"/usr/lib/{TRIPLETS[arch]}/slurm"
