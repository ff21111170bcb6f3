"""The stack file's line for a problem's field path, so an error names where to look as well as
what (`line 14, nodesets[0].gpus: ...`), as YAML syntax errors already do.

The path is followed through the composed YAML document key by key, matching each step against
the keys that are really there (a key may hold dots: `extraConfig.files.oci.conf`). A field that
is missing (`auth.ldap.uris`) gets the line of the deepest part that exists (`ldap:`)."""

from __future__ import annotations

import dataclasses

import yaml

from sunk.problem import Problem


def compose(text: str) -> yaml.Node | None:
    """The document's node tree (positions only; nothing is constructed). Only for text the
    strict reader already accepted: no aliases, bounded size and depth."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def _step(node: yaml.Node, rest: str) -> tuple[yaml.Node, yaml.Node, str] | None:
    """One step along `rest` from `node`: (the key or item node, its value node, what remains)."""
    if rest.startswith("["):
        index, _, after = rest[1:].partition("]")
        if isinstance(node, yaml.SequenceNode) and index.isdigit() and int(index) < len(node.value):
            item = node.value[int(index)]
            return item, item, after.removeprefix(".")
        return None
    if isinstance(node, yaml.MappingNode):
        best: tuple[yaml.Node, yaml.Node, str] | None = None
        longest = -1
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else None
            if not isinstance(name, str) or not rest.startswith(name) or len(name) <= longest:
                continue
            after = rest[len(name) :]
            if after and after[0] not in ".[":
                continue
            best, longest = (key, value, after.removeprefix(".")), len(name)
        return best
    return None


def line_of(node: yaml.Node, path: str) -> int | None:
    """The 1-based line of the deepest part of `path` present under `node`."""
    line = None
    rest = path
    while rest:
        found = _step(node, rest)
        if found is None:
            break
        key, node, rest = found
        line = int(key.start_mark.line) + 1
    return line


def with_lines(problems: list[Problem], config: yaml.Node | None, cluster_key: str) -> list[Problem]:
    """Each Problem with its line: paths starting `sunk:` are config keys, the rest lie under
    `cluster_key`. The YAML reader's own problems (their line their own) and those of no field
    are kept as they are."""
    if config is None:
        return problems
    found = _step(config, cluster_key)
    cluster = found[1] if found is not None else None
    out: list[Problem] = []
    for p in problems:
        if p.by_reader or p.path is None or p.line is not None:
            out.append(p)
            continue
        if p.path.startswith("sunk:"):
            line = line_of(config, p.path)
        elif cluster is not None:
            line = line_of(cluster, p.path) if p.path else (found[0].start_mark.line + 1 if found else None)
        else:
            line = None
        out.append(dataclasses.replace(p, line=line) if line is not None else p)
    # In the file's order, so the list reads top to bottom beside the file (stable: a line's
    # problems keep their order; those without a line stay last).
    return sorted(out, key=lambda p: p.line if p.line is not None else 1 << 30)


def config_node(root: yaml.Node | None) -> yaml.Node | None:
    """The `config:` mapping of a stack file's document."""
    if root is None:
        return None
    found = _step(root, "config")
    return found[1] if found is not None else None
