"""Reading a Slurm file the way Slurm's parser does (src/common/parse_config.c), written from the
parser's description and apart from sunk.spec.slurmtext, so the tests that judge the writer don't
share its blind spots: a line runs up to '\\n'; an unescaped '#' ends it; an odd run of trailing
backslashes (blanks after them allowed) joins the next line; a backslash escapes the next
character; keys match in any case; a repeated key keeps its last value. Blanks are C's isspace()
(space, tab, CR, LF, VT, FF): U+0085 and U+2028 are not, so they end no value and no line (as real
slurmdbd showed, tests/slurm/test_dbd_parse_back.py), where Python's own \\s would end one."""

from __future__ import annotations

import re

_KEY_VALUE = re.compile(r'([A-Za-z0-9_.]+)\s*[-*+/]?=\s*("[^"]*"|\S*)', re.ASCII)


def slurm_read(body: str) -> list[tuple[int, int, str]]:
    """(first physical line, physical lines joined, text as Slurm reads it) per logical line."""
    out: list[tuple[int, int, str]] = []
    physical = body.split("\n")
    n = 0
    while n < len(physical):
        start, text = n, ""
        while True:
            cut = _cut(physical[n])
            trimmed = cut.rstrip(" \t\r\n\x0b\x0c")
            run = len(trimmed) - len(trimmed.rstrip("\\"))
            n += 1
            if run % 2 == 1 and n < len(physical):
                text += trimmed[:-1]
                continue
            text += cut
            break
        out.append((start + 1, n - start, re.sub(r"\\(.)", r"\1", text, flags=re.DOTALL)))
    return out


def _cut(line: str) -> str:
    escaped = False
    for i, ch in enumerate(line):
        if ch == "#" and not escaped:
            return line[:i]
        escaped = ch == "\\" and not escaped
    return line


def slurm_keys(text: str) -> list[str]:
    """Every key of a logical line, lower case (anywhere on it, as a conservative reader would)."""
    return [k.lower() for k in re.findall(r"([A-Za-z0-9_.]+)\s*[-*+/]?=", text, re.ASCII)]


def settings(body: str, records: frozenset[str] = frozenset()) -> dict[str, str]:
    """The global `Key=Value` settings of a file as Slurm ends up with them (lower-case key ->
    value, the last of a repeated key), lines starting with a record key (NodeName=...) aside."""
    out: dict[str, str] = {}
    for _, _, text in slurm_read(body):
        pairs = _KEY_VALUE.findall(text)
        if not pairs or pairs[0][0].lower() in records:
            continue
        for key, value in pairs:
            out[key.lower()] = value.strip('"')
    return out


RECORD_KEYS = frozenset({"nodename", "nodeset", "partitionname", "downnodes", "frontendname", "name", "switchname"})
RECORD_KEYS |= {"blockname"}
"""Keys that start a line of several `Key=Value` words (slurm.conf's nodes, node sets, partitions
and down nodes, gres.conf's GRES, topology.conf's switches and blocks)."""


def refused_lines(body: str) -> list[int]:
    """Lines Slurm's parser refuses, failing the whole file: a second `Key=Value` on a line that
    starts no record (measured: fatal to slurmctld, slurmdbd and the clients)."""
    out = []
    for first, _, text in slurm_read(body):
        pairs = _KEY_VALUE.findall(text)
        if len(pairs) > 1 and pairs[0][0].lower() not in RECORD_KEYS:
            out.append(first)
    return out
