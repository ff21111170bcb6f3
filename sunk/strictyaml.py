"""Stack files read safely by construction: YAML 1.2 scalars, no aliases, no duplicate keys.

PyYAML's safe loader implements YAML 1.1, where `yes`, `no`, `on` and `off` are booleans and
`12:00:00` is a base-60 integer (43200), and it expands aliases, so a 1 KB file of nested aliases
("billion laughs") grows to gigabytes and a self-referencing alias recurses until Python gives up.
A stack file is small, hand-written configuration; this loader accepts exactly that:

- at most MAX_BYTES of text and MAX_DEPTH levels of nesting;
- no aliases (`*name`) or merge keys (`<<`): write the value out;
- mapping keys are strings, each at most once per mapping;
- scalars by YAML 1.2's core schema: `true`/`false`, `null`/`~`, decimal, `0o` and `0x` integers,
  decimal floats, `.inf`/`.nan`; everything else (`12:00:00`, `0777`'s octal reading) is read as
  YAML 1.2 reads it, and a plain `yes`/`no`/`on`/`off`/`y`/`n` is refused, since it means a boolean
  to YAML 1.1 tools (and so to many readers) but a string here.

Every refusal is one `StrictYamlError` whose problems name the line and the field path.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

MAX_BYTES = 1024 * 1024
"""A stack file is configuration: the shipped ones are under 4 KB."""
MAX_DEPTH = 32
"""Deeper than any spec field (affinity terms nest about 8 levels)."""

_YAML11_BOOLEANS = re.compile(r"^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$")


class StrictYamlError(ValueError):
    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class _Resolver(yaml.resolver.BaseResolver):
    """YAML 1.2 core schema for plain scalars (PyYAML ships only 1.1's)."""


_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"),
)
_Resolver.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+.0123456789"),
)
_Resolver.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])


class _Constructor(yaml.constructor.SafeConstructor):
    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text, 10)  # 1.2: a leading zero is still decimal; no base 60, no underscores

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        return str(self.construct_scalar(node)).lower() == "true"


# typeshed types add_constructor's callback against the base class only.
_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_yaml_int)  # type: ignore[type-var]
_Constructor.add_constructor("tag:yaml.org,2002:bool", _Constructor.construct_yaml_bool)  # type: ignore[type-var]


class _Loader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _Constructor,
    _Resolver,
):
    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _Constructor.__init__(self)
        _Resolver.__init__(self)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise StrictYamlError(
                [f"line {event.start_mark.line + 1}: aliases (*{event.anchor}) are not accepted; write the value out"]
            )
        self._depth += 1
        if self._depth > MAX_DEPTH:
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise StrictYamlError([f"line {mark.line + 1}: nested deeper than {MAX_DEPTH} levels"])
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _check(node: yaml.Node, path: str, problems: list[str]) -> None:
    where = path or "(top)"
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode) or key.tag != "tag:yaml.org,2002:str":
                shown = key.value if isinstance(key, yaml.ScalarNode) else "a collection"
                problems.append(f"line {_line(key)}, {where}: keys must be strings, not {shown!r}; quote it")
                continue
            if key.value == "<<" and key.style is None:
                problems.append(f"line {_line(key)}, {where}: merge keys (<<) are not accepted; write the keys out")
                continue
            if key.value in seen:
                problems.append(
                    f"line {_line(key)}, {where}: duplicate key {key.value!r} (first at line {seen[key.value]}); "
                    "each key once"
                )
                continue
            seen[key.value] = _line(key)
            _check(value, f"{path}.{key.value}" if path else key.value, problems)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check(item, f"{path}[{i}]", problems)
    elif isinstance(node, yaml.ScalarNode) and node.style is None and _YAML11_BOOLEANS.match(node.value):
        problems.append(
            f"line {_line(node)}, {where}: {node.value!r} is a boolean in YAML 1.1 but a string in YAML 1.2; "
            "write true or false, or quote it for the text"
        )


def load(text: str) -> Any:
    """One YAML (or JSON) document, strictly. Raises StrictYamlError."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise StrictYamlError([f"(file): {size} bytes; a stack file may hold at most {MAX_BYTES}"])
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        problems: list[str] = []
        _check(node, "", problems)
        if problems:
            raise StrictYamlError(problems)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        reason = getattr(err, "problem", None) or str(err)
        raise StrictYamlError([f"{where}not valid YAML: {reason}"]) from None
    finally:
        loader.dispose()
