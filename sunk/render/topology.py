"""topology.conf (https://slurm.schedmd.com/topology.conf.html) from the labels of the Kubernetes
Nodes that host the Slurm nodes: switches for topology/tree, blocks for topology/block; and
topology.yaml (https://slurm.schedmd.com/topology.yaml.html, Slurm 26.05) with several named ones."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sunk.hostlist import compress
from sunk.images import DEFAULT_SLURM, release_of
from sunk.render.slurm_conf import HEADER
from sunk.spec.cluster import ClusterSpec
from sunk.spec.scheduling import NamedTopologySpec, TopologySpec
from sunk.spec.slurmtext import conf_file

UNLABELED = "unlabeled"
"""Tree switch of the nodes lacking a label (joined to the others by the root switch)."""
ROOT_SWITCH = "root"
MAX_NAME = 63
"""slurmctld 24.11 exits on a SwitchName over 64 characters ("must be shorter than 64 chars";
measured: 64 passes, 65 is fatal). BlockName has no limit; one rule for both keeps names short."""
HASH_DIGITS = (8, 16, 32)
"""Suffix lengths tried in turn until every name is unique (32 hex digits: 128 bits)."""

Path = tuple[str, ...]
_DEFINED = re.compile(r"^\s*(?:SwitchName|BlockName)=(\S+)", re.I)


@dataclass(frozen=True)
class TopologyNode:
    """A Slurm node and the labels of the Kubernetes Node that hosts it."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


def _safe(value: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in value)


def _name(path: Path, digits: int) -> str:
    natural = "-".join(_safe(part) for part in path)
    if not digits:
        return natural
    # Hashed from the exact values, so paths that read alike (a-b/c and a/b-c) differ.
    digest = hashlib.sha256(json.dumps(list(path)).encode()).hexdigest()[:digits]
    return f"{natural[: MAX_NAME - digits - 1]}-{digest}"


def unique_names(paths: Iterable[Path], reserved: Collection[str] = ()) -> dict[Path, str]:
    """A Slurm name per label path: its values joined by '-' (characters Slurm may not take become
    '_'). A name that is too long, or that another path or a reserved name also gets, becomes a
    hashed suffix on every path involved, lengthened until nothing clashes: deterministic, and
    slurmctld exits on a name defined twice ("has already been defined", measured 2026-11 on 24.11)."""
    todo = sorted(set(paths))
    level = {p: 0 if len(_name(p, 0)) <= MAX_NAME else 1 for p in todo}
    while True:
        names = {p: _name(p, HASH_DIGITS[level[p] - 1] if level[p] else 0) for p in todo}
        counts = Counter(names.values())
        clashing = [p for p in todo if counts[names[p]] > 1 or names[p] in reserved]
        if not clashing:
            return names
        for p in clashing:
            if level[p] == len(HASH_DIGITS):
                raise ValueError(f"topology: no unique switch name for label values {list(p)}")
            level[p] += 1


def _file(lines: Iterable[str], extra: Iterable[str]) -> str:
    return conf_file(HEADER, lines, extra, file="topology.conf")


def _by_label_path(nodes: Iterable[TopologyNode], label_keys: Sequence[str]) -> tuple[dict[Path, list[str]], list[str]]:
    """Nodes grouped by their values of `label_keys` (top of the fabric down), in the order given;
    a node missing any of them (or with an empty value) is unlabeled."""
    by_path: dict[Path, list[str]] = {}
    unlabeled: list[str] = []
    for n in nodes:
        values = [n.labels.get(k) or "" for k in label_keys]
        if all(values):
            by_path.setdefault(tuple(values), []).append(n.name)
        else:
            unlabeled.append(n.name)
    return by_path, unlabeled


def render_topology_conf(
    spec: ClusterSpec | TopologySpec,
    nodes: Iterable[TopologyNode],
    extra: Sequence[str] = (),
    registered: Collection[str] | None = None,
    release: str | None = None,
) -> str:
    """topology.conf for tree or block from Node labels. A node lacking a label (or with an empty
    value) hangs off the `unlabeled` switch (tree), or stays outside every block (block).

    `registered`: the Slurm nodes slurmctld knows. slurmctld counts only those in a block (a name
    it does not know is skipped), so when given, a block is judged by them; when None, every node
    listed counts (right when all of them have registered, as at deploy time with none).
    `release`: the Slurm release that reads it (default: a ClusterSpec's own, else the default)."""
    topo = spec.topology if isinstance(spec, ClusterSpec) else spec
    if release is None:
        release = spec.slurm.version if isinstance(spec, ClusterSpec) else DEFAULT_SLURM
    if isinstance(spec, ClusterSpec):
        extra = [*extra, *spec.extra_config.topology_conf]
    if topo.plugin == "none":
        return _file(["# topology plugin: none"], extra)
    reserved = {m.group(1) for line in extra if (m := _DEFINED.match(line))}
    by_path, unlabeled = _by_label_path(nodes, topo.label_keys)
    if topo.plugin == "block":
        known = None if registered is None else set(registered)
        return _file(_blocks(topo, by_path, unlabeled, reserved, known), extra)
    return _file(_tree(by_path, unlabeled, reserved, release), extra)


def _blocks(
    topo: TopologySpec,
    by_path: dict[Path, list[str]],
    unlabeled: list[str],
    reserved: set[str],
    registered: set[str] | None,
) -> list[str]:
    names = unique_names(by_path, reserved)

    def count(path: Path) -> int:
        members = set(by_path[path])
        return len(members if registered is None else members & registered)

    # Slurm 24.11 exits ("children count lower than bblock_node_cnt", measured 2026-11) when a block
    # holds fewer registered nodes than the base block size: the first BlockSizes value, else the
    # first block's size. So without sizes the smallest block goes first, and with sizes a smaller
    # block (a partly filled clique) stays a comment until it fills: its nodes cannot run jobs in
    # a partition that has block nodes, but slurmctld keeps running. A block none of whose nodes
    # has registered is a comment too (all of them empty is fatal: "Block not contains any nodes").
    base = topo.base_block_size or 0
    order = sorted(by_path) if base else sorted(by_path, key=lambda p: (count(p), p))
    what = "nodes" if registered is None else "registered nodes"
    lines = []
    for path in order:
        line = f"BlockName={names[path]} Nodes={compress(by_path[path])}"
        if count(path) < max(base, 1):
            line = f"# {line} (fewer {what} than the base block size {base})" if base else f"# {line} (none registered)"
        lines.append(line)
    if unlabeled:
        # Not a block of their own: they share no NVLink domain, and a partition without block
        # nodes schedules them as if there were no topology (measured 2026-11 on 24.11).
        lines.append(f"# In no block (no {topo.label_keys[0]} label): {compress(unlabeled)}")
    if topo.block_sizes:
        lines.append(f"BlockSizes={','.join(str(b) for b in topo.block_sizes)}")
    return lines


def _tree(by_path: dict[Path, list[str]], unlabeled: list[str], reserved: set[str], release: str) -> list[str]:
    # Leaves hold nodes; each level above lists its child switches.
    children: dict[Path, set[Path]] = {}
    for path in by_path:
        for depth in range(1, len(path)):
            children.setdefault(path[:depth], set()).add(path[: depth + 1])
    names = unique_names([*by_path, *children], {*reserved, UNLABELED, ROOT_SWITCH})
    lines = [f"SwitchName={names[path]} Nodes={compress(by_path[path])}" for path in sorted(by_path)]
    if unlabeled:
        lines.append(f"SwitchName={UNLABELED} Nodes={compress(unlabeled)}")
    for parent in sorted(children, key=lambda p: (-len(p), p)):
        kids = ",".join(sorted(names[c] for c in children[parent]))
        lines.append(f"SwitchName={names[parent]} Switches={kids}")
    # Pods on one Kubernetes cluster can all reach each other: a root joins the top switches so
    # jobs may span fabrics (Slurm never places a job across disconnected trees).
    tops = sorted({names[path[:1]] for path in by_path} | ({UNLABELED} if unlabeled else set()))
    if len(tops) > 1:
        lines.append(f"SwitchName={ROOT_SWITCH} Switches={','.join(tops)}")
    if not lines and release_of(release).node_less_tree_root:
        # No node yet (deploy time): what slurmctld accepts differs by release (Release.node_less_tree_root).
        lines.append(f"SwitchName={ROOT_SWITCH}")
    return lines


def _quoted(value: str) -> str:
    # A JSON string is a YAML double-quoted scalar: a name such as `true` or `1` stays a string.
    return json.dumps(value)


def _words(line: str) -> dict[str, str]:
    return dict(word.split("=", 1) for word in line.split())


def _yaml_tree(lines: Sequence[str]) -> list[str]:
    out = ["  tree:", "    switches:"]
    for line in lines:
        words = _words(line)
        out.append(f"      - switch: {_quoted(words['SwitchName'])}")
        if "Nodes" in words:
            out.append(f"        nodes: {_quoted(words['Nodes'])}")
        if "Switches" in words:
            out.append(f"        children: {_quoted(words['Switches'])}")
    return out


def _yaml_block(lines: Sequence[str], key: str) -> list[str]:
    blocks = [_words(line) for line in lines if line.startswith("BlockName=")]
    notes = [f"  {line}" for line in lines if line.startswith("#")]
    if not blocks:
        # slurmctld 26.05 exits on a block topology without a block ("No blocks configured",
        # measured), and turns a flat topology into a block one on reconfigure (measured): so flat
        # until a block holds enough registered nodes.
        return [f"  # block topology on {key}: no block holds enough registered nodes yet", *notes, "  flat: true"]
    out = ["  block:"]
    sizes = [line.split("=", 1)[1] for line in lines if line.startswith("BlockSizes=")]
    if sizes:
        out.append(f"    block_sizes: [{', '.join(sizes[0].split(','))}]")
    out.append("    blocks:")
    for words in blocks:
        out += [f"      - block: {_quoted(words['BlockName'])}", f"        nodes: {_quoted(words['Nodes'])}"]
    return [*out, *notes]


def render_topology_yaml(
    topologies: Sequence[NamedTopologySpec],
    nodes: Iterable[TopologyNode],
    registered: Collection[str] | None = None,
    release: str = DEFAULT_SLURM,
) -> str:
    """topology.yaml (Slurm 26.05) with every named topology, each laid out from the Node labels
    as render_topology_conf lays out one (the same switch and block names, the same rules for
    unlabeled nodes and for blocks not yet full), the default one marked `cluster_default`.
    A block topology without a block yet is written flat (see _yaml_block)."""
    nodes = list(nodes)
    default = next((t.name for t in topologies if t.default), topologies[0].name if topologies else None)
    out = [HEADER.rstrip("\n"), "---"]
    for topo in topologies:
        single = topo.as_topology()
        out += [
            f"- topology: {_quoted(topo.name)}",
            f"  cluster_default: {'true' if topo.name == default else 'false'}",
        ]
        if topo.plugin == "flat":
            out.append("  flat: true")
            continue
        by_path, unlabeled = _by_label_path(nodes, topo.label_keys)
        if topo.plugin == "block":
            known = None if registered is None else set(registered)
            out += _yaml_block(_blocks(single, by_path, unlabeled, set(), known), topo.label_keys[0])
        else:
            out += _yaml_tree(_tree(by_path, unlabeled, set(), release))
    return "\n".join(out) + "\n"
