"""Stack files read safely by construction: YAML 1.2 scalars, no aliases, no duplicate keys.

PyYAML's safe loader implements YAML 1.1, where `yes`, `no`, `on` and `off` are booleans and
`12:00:00` is a base-60 integer (43200), and it expands aliases, so a 1 KB file of nested aliases
("billion laughs") grows to gigabytes and a self-referencing alias recurses until Python gives up.
A stack file is small, hand-written configuration; this loader accepts exactly that:

- at most MAX_BYTES of text and MAX_DEPTH levels of nesting;
- no aliases (`*name`) or merge keys (`<<`): write the value out;
- mapping keys are strings, each at most once per mapping;
- scalars by YAML 1.2's core schema: `true`/`false`, `null`/`~`, decimal, `0o` and `0x` integers,
  decimal floats, `.inf`/`.nan`; everything else (`12:00:00`) is read as YAML 1.2 reads it, and a
  plain `yes`/`no`/`on`/`off`/`y`/`n` is refused, since it means a boolean to YAML 1.1 tools (and
  so to many readers) but a string here;
- no explicit tags (`!!bool "yes"`, `!!int`, `!custom`): a tag makes a scalar mean what the tag's
  constructor decides (`!!bool "yes"` is false, `!!int "٤"` is 4), not what the reader sees;
- no decimal integer with a leading zero (`0440` is 288 to a reader who thinks octal, 440 to YAML
  1.2): write `0o440` or the decimal number; integers fit 64 bits;
- UTF-8 text of printable characters, tab and line breaks: a NUL, C0/C1 control or Unicode line
  separator is refused with its line, as are bytes that are not UTF-8.

Every refusal is one `StrictYamlError` whose problems (sunk.problem.Problem) each carry the line
and the field path.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from sunk.problem import Problem

MAX_BYTES = 1024 * 1024
"""A stack file is configuration: the shipped ones are under 4 KB."""
MAX_JSON_BYTES = 2 * MAX_BYTES
"""The JSON text Pulumi hands a program for one setting: the same document as the stack file's, with
every key and string quoted (30,000 one-line accounts: 0.94 MB of YAML, 1.18 MB of JSON), so a file
within MAX_BYTES is read by the program too."""
MAX_DEPTH = 32
"""Deeper than any spec field (affinity terms nest about 8 levels)."""

_YAML11_BOOLEANS = re.compile(r"^(y|Y|yes|Yes|YES|n|N|no|No|NO|on|On|ON|off|Off|OFF)$")
_LEADING_ZERO = re.compile(r"^[-+]?0[0-9]+$")
_INT64 = 2**63
_UNREADABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")
"""Characters a stack file may not hold raw: C0 controls but tab, LF and CR; DEL; C1 controls (NEL
among them); the Unicode line and paragraph separators (one line to some readers, two to others);
lone surrogates and the two non-characters. Written escaped inside double quotes they still reach
the spec, whose fields refuse them where they matter."""


class StrictYamlError(ValueError):
    def __init__(self, problems: list[Problem], document: Any = None) -> None:
        self.items = problems
        """Each refusal: its line, the file's path to it where it has one, and the message."""
        self.document = document
        """When every problem is a refused scalar: the document with each of them as REFUSED,
        so the fields around them can still be checked in the same round. Else None."""
        super().__init__("\n".join(self.problems))

    @property
    def problems(self) -> list[str]:
        """Each refusal as printed (`line 3, (top): duplicate key 'name' ...`)."""
        return [str(p) for p in self.items]


def _refusal(line: int | None, message: str, where: str | None = None) -> Problem:
    return Problem(where, message, line, by_reader=True)


class _Refused:
    """Stands in a document for a scalar the loader refused (a YAML 1.1 boolean, a leading zero,
    an integer beyond 64 bits): the refusal already names it, so no check reports it again."""

    def __repr__(self) -> str:
        return "<refused by the YAML reader>"


REFUSED: Any = _Refused()
_REFUSED_TAG = "tag:sunk.dev,2026:refused"


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
        return int(text, 10)  # leading zeros refused before (_check); no base 60, no underscores

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        return str(self.construct_scalar(node)).lower() == "true"


# typeshed types add_constructor's callback against the base class only.
_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_yaml_int)  # type: ignore[type-var]
_Constructor.add_constructor("tag:yaml.org,2002:bool", _Constructor.construct_yaml_bool)  # type: ignore[type-var]
_Constructor.add_constructor(_REFUSED_TAG, lambda _loader, _node: REFUSED)


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
        self.refused_at: dict[tuple[int, int], str] = {}
        """(line, column) of each explicit tag and alias -> its refusal."""

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        """The node, with explicit tags and aliases noted by their place (`marks`) for `_check`
        to refuse at the field that holds them; an alias is never expanded (a small file of nested
        aliases would expand to gigabytes): it stands as an empty scalar at the alias's place."""
        if self.check_event(yaml.AliasEvent):
            event = self.get_event()  # type: ignore[no-untyped-call]
            self.refused_at[_place(event.start_mark)] = (
                f"aliases (*{event.anchor}) are not accepted; write the value out"
            )
            return yaml.ScalarNode("tag:yaml.org,2002:null", "", event.start_mark, event.end_mark)
        event = self.peek_event()  # type: ignore[no-untyped-call]
        tag = getattr(event, "tag", None)
        if tag is not None:
            self.refused_at[_place(event.start_mark)] = (
                f"explicit tag {tag!r} is not accepted; write the value plainly (quote it for text)"
            )
        self._depth += 1
        if self._depth > MAX_DEPTH:
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise StrictYamlError([_refusal(mark.line + 1, f"nested deeper than {MAX_DEPTH} levels")])
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _place(mark: Any) -> tuple[int, int]:
    return int(mark.line), int(mark.column)


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _check(
    node: yaml.Node,
    path: str,
    problems: list[Problem],
    refused: list[yaml.ScalarNode] | None = None,
    marks: dict[tuple[int, int], str] | None = None,
) -> None:
    """Every refusal under `node`, each with its line and the path of the field that holds it."""
    where = path or "(top)"
    marked = (marks or {}).get(_place(node.start_mark))
    if marked is not None:
        problems.append(_refusal(_line(node), marked, where))
        return
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            refusal = _key_refusal(key, seen, where, marks or {})
            if refusal is not None:
                problems.append(refusal)
                continue
            seen[key.value] = _line(key)
            _check(value, f"{path}.{key.value}" if path else key.value, problems, refused, marks)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _check(item, f"{path}[{i}]", problems, refused, marks)
    elif isinstance(node, yaml.ScalarNode) and node.style is None:
        before = len(problems)
        _check_scalar(node, where, problems)
        if len(problems) > before and refused is not None:
            refused.append(node)


def _key_refusal(key: yaml.Node, seen: dict[str, int], where: str, marks: dict[tuple[int, int], str]) -> Problem | None:
    """Why a mapping's key is refused (a tag or alias, not a string, a merge key, a repeat), or None."""
    marked = marks.get(_place(key.start_mark))
    if marked is not None:
        return _refusal(_line(key), f"a key: {marked}", where)
    if not isinstance(key, yaml.ScalarNode) or key.tag != "tag:yaml.org,2002:str":
        shown = key.value if isinstance(key, yaml.ScalarNode) else "a collection"
        return _refusal(_line(key), f"keys must be strings, not {shown!r}; quote it", where)
    if key.value == "<<" and key.style is None:
        return _refusal(_line(key), "merge keys (<<) are not accepted; write the keys out", where)
    if key.value in seen:
        return _refusal(
            _line(key), f"duplicate key {key.value!r} (first at line {seen[key.value]}); each key once", where
        )
    return None


def _check_scalar(node: yaml.ScalarNode, where: str, problems: list[Problem]) -> None:
    """A plain scalar the loader refuses: one problem, else none."""
    if _YAML11_BOOLEANS.match(node.value):
        problems.append(
            _refusal(
                _line(node),
                f"{node.value!r} is a boolean in YAML 1.1 but a string in YAML 1.2; "
                "write true or false, or quote it for the text",
                where,
            )
        )
    elif _LEADING_ZERO.match(node.value):
        problems.append(
            _refusal(
                _line(node),
                f"{node.value!r} has a leading zero: octal to some readers, decimal to YAML 1.2; "
                f"write 0o{node.value.lstrip('+-0') or '0'} for octal or the decimal number without the zero",
                where,
            )
        )
    elif node.tag == "tag:yaml.org,2002:int" and not _fits_int64(node.value):
        problems.append(_refusal(_line(node), f"{node.value[:40]!r}... is beyond a 64-bit integer", where))


def _fits_int64(text: str) -> bool:
    body, base = (text[2:], 8 if text[1] == "o" else 16) if text.startswith(("0o", "0x")) else (text, 10)
    # 22 digits exceed 2**63 in every base accepted, and stay far below Python's int-string limit.
    return len(body.lstrip("+-")) <= 22 and -_INT64 <= int(body, base) < _INT64


def _unreadable(text: str) -> list[Problem]:
    """A line-numbered problem per line holding a character the loader refuses (the first 10)."""
    problems = []
    for number, line in enumerate(text.split("\n"), start=1):
        match = _UNREADABLE.search(line)
        if match:
            problems.append(
                _refusal(
                    number,
                    f"raw control character U+{ord(match.group()):04X} is not accepted in a stack file; "
                    'write it escaped in a double-quoted string ("\\x..") if a field really takes it',
                )
            )
            if len(problems) == 10:
                break
    return problems


def decode(data: bytes) -> str:
    """A stack file's bytes as text: UTF-8 (a BOM allowed), else StrictYamlError naming the line."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise StrictYamlError(
            [_refusal(line, f"byte 0x{data[err.start]:02x} is not UTF-8; save the file as UTF-8")]
        ) from None


def load(text: str, *, json_text: bool = False) -> Any:
    """One YAML (or JSON) document, strictly. `json_text`: the JSON Pulumi hands a program for a
    setting (bounded by MAX_JSON_BYTES, not MAX_BYTES). Raises StrictYamlError."""
    size = len(text.encode("utf-8", "surrogatepass"))
    limit, what = (MAX_JSON_BYTES, "Pulumi's JSON text of a setting") if json_text else (MAX_BYTES, "a stack file")
    if size > limit:
        raise StrictYamlError([_refusal(None, f"{size} bytes; {what} may hold at most {limit}", "(file)")])
    unreadable = _unreadable(text)
    if unreadable:
        raise StrictYamlError(unreadable)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        problems: list[Problem] = []
        refused: list[yaml.ScalarNode] = []
        _check(node, "", problems, refused, loader.refused_at)
        if problems and len(problems) == len(refused):
            # Only scalars were refused: the rest of the document is still read, so the checks
            # of everything around them run in the same round.
            for scalar in refused:
                scalar.tag = _REFUSED_TAG
            raise StrictYamlError(problems, loader.construct_document(node))
        if problems:
            raise StrictYamlError(problems)
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(err, "problem", None) or str(err)
        raise StrictYamlError([_refusal(line, f"not valid YAML: {reason}")]) from None
    finally:
        loader.dispose()
