"""Every `sunk` command and option, read from the CLI's argparse parser (never its --help text,
whose wrapping follows the terminal's width)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass

from .markdown import code, page, table


@dataclass(frozen=True)
class Command:
    words: str
    """`sunk images build`."""
    help: str
    description: str
    options: list[tuple[str, str, str, str]]
    """(option or argument, value, default, help)."""


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    # argparse keeps its actions private; the parser has no public list of them.
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _help(action: argparse.Action, prog: str) -> str:
    text = action.help or ""
    if text == argparse.SUPPRESS:
        return ""
    if "%(" in text:
        text = text % {**vars(action), "prog": prog}
    return text


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return "one of " + ", ".join(str(c) for c in action.choices)
    name = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    suffix = {"*": " ...", "+": " ...", "?": " (optional)"}.get(str(action.nargs), "")
    return f"{name}{suffix}"


def _default(action: argparse.Action) -> str:
    if action.required and action.nargs not in ("?", "*"):
        return "required"
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.default == []:
        return ""
    return code(str(action.default))


def _options(parser: argparse.ArgumentParser) -> list[tuple[str, str, str, str]]:
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        name = ", ".join(action.option_strings) if action.option_strings else action.metavar or action.dest
        rows.append((code(str(name)), _value(action), _default(action), _help(action, parser.prog)))
    return rows


def commands(parser: argparse.ArgumentParser, words: str = "sunk", helptext: str = "") -> Iterator[Command]:
    """The parser and every subcommand under it, depth first in the order they were added."""
    yield Command(words, helptext, parser.description or "", _options(parser))
    sub = _subparsers(parser)
    if sub is None:
        return
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    for name, child in sub.choices.items():
        yield from commands(child, f"{words} {name}", helps.get(name, ""))


def cli_page(parser: argparse.ArgumentParser) -> tuple[str, int, int]:
    """The page, how many commands it lists (runnable ones: with no subcommand of their own) and
    how many options and arguments."""
    found = list(commands(parser))
    runnable = [c for c in found if not any(o.words.startswith(c.words + " ") for o in found)]
    parts = []
    for command in found:
        lines = [f'<a id="{_slug(command.words)}"></a>', "", f"## `{command.words}`", ""]
        if command.help:
            lines += [command.help[0].upper() + command.help[1:] + ("" if command.help.endswith(".") else "."), ""]
        if command.description and command.description != command.help:
            lines += [command.description, ""]
        if command.options:
            lines.append(table(("Option or argument", "Value", "Default", "What it does"), command.options))
        if command not in runnable:
            depth = command.words.count(" ") + 1
            subs = [c.words for c in found if c.words.startswith(command.words + " ") and c.words.count(" ") == depth]
            lines += ["Subcommands: " + ", ".join(f"[`{s}`](#{_slug(s)})" for s in subs) + ".", ""]
        parts.append("\n".join(lines))
    intro = (
        "Every command of the `sunk` CLI and each of its options and arguments, as `sunk --help` "
        "and `sunk <command> --help` print them. A command that needs an extra (Pulumi, the local "
        "cluster) says which to install when it is missing."
    )
    return page("CLI", intro, parts), len(runnable), sum(len(c.options) for c in found)


def _slug(words: str) -> str:
    """An id of our own (`cmd-sunk-images-build`): the heading's id is the site's to choose."""
    return "cmd-" + "-".join(words.split())
