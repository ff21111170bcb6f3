"""Filling a shipped start script's input lines (sunk/manifests/scripts/, package data); the
rules are in sunk.manifests.scripts. Here, below sunk.manifests, so the Slurm file renderers
(the health check program) use it too."""

from __future__ import annotations

import functools
import re
import shlex
from importlib import resources

_INPUT = re.compile(r"^([a-z_][a-z0-9_]*)=@([A-Z][A-Z0-9_]*)@$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"@[A-Z][A-Z0-9_]*@")


@functools.cache
def source(name: str) -> str:
    """The script file `name` as shipped (sunk/manifests/scripts/)."""
    return resources.files("sunk.manifests").joinpath("scripts", name).read_text(encoding="utf-8")


def render(name: str, **values: str) -> str:
    """The script `name` with each input line's placeholder replaced by its value, shell-quoted.
    Every placeholder must be given a value and every value must have a placeholder."""
    text = source(name)
    inputs = [placeholder for _, placeholder in _INPUT.findall(text)]
    if len(_PLACEHOLDER.findall(text)) != len(inputs) or len(set(inputs)) != len(inputs):
        raise ValueError(f"{name}: a placeholder stands outside an input line `name=@NAME@`, or twice")
    if set(inputs) != set(values):
        raise ValueError(f"{name}: placeholders {sorted(inputs)}, values given for {sorted(values)}")
    return _INPUT.sub(lambda m: f"{m[1]}={shlex.quote(values[m[2]])}", text)
