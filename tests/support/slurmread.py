"""Reading a Slurm file the way Slurm's parser does (src/common/parse_config.c), written from the
parser's description and apart from sunk.spec.slurmtext, so the tests that judge the writer don't
share its blind spots: a line runs up to '\\n'; an unescaped '#' ends it; an odd run of trailing
backslashes (blanks after them allowed) joins the next line; a backslash escapes the next
character; keys match in any case; a repeated key keeps its last value."""

from __future__ import annotations

import re

_KEY_VALUE = re.compile(r'([A-Za-z0-9_.]+)\s*[-*+/]?=\s*("[^"]*"|\S*)')


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
        out.append((start + 1, n - start, re.sub(r"\\(.)", r"\1", text)))
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
    return [k.lower() for k in re.findall(r"([A-Za-z0-9_.]+)\s*[-*+/]?=", text)]


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
