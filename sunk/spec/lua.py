"""Just enough of Lua's lexer to tell code from comments and strings (https://www.lua.org/manual/5.4/manual.html#3.1),
so a check for a function definition can't be satisfied by a comment or a string that mentions it."""

from __future__ import annotations

import re

_LONG_OPEN = re.compile(r"\[(=*)\[")


def code_only(source: str) -> str:
    """`source` with every comment and string literal replaced by one space (line breaks kept, so
    line numbers still hold). An unterminated string or comment runs to the end, as Lua reads it."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        ch = source[i]
        if source.startswith("--", i):
            long = _LONG_OPEN.match(source, i + 2)
            if long:
                end = source.find(f"]{long.group(1)}]", long.end())
                stop = n if end < 0 else end + len(long.group(1)) + 2
            else:
                end = source.find("\n", i)
                stop = n if end < 0 else end
            out.append(" " + "\n" * source.count("\n", i, stop))
            i = stop
        elif ch == "[" and (long := _LONG_OPEN.match(source, i)):
            end = source.find(f"]{long.group(1)}]", long.end())
            stop = n if end < 0 else end + len(long.group(1)) + 2
            out.append(" " + "\n" * source.count("\n", i, stop))
            i = stop
        elif ch in "'\"":
            j = i + 1
            while j < n and source[j] != ch and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            out.append(" ")
            i = min(j + 1, n)
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def defines_global_function(source: str, name: str) -> bool:
    """Whether code (not a comment or string) defines the global function `name`:
    `function name(...)` (not `local function`) or `name = function(...)`."""
    code = code_only(source)
    word = re.escape(name)
    statement = re.compile(rf"(?<![\w.:])(local\s+)?function\s+{word}\s*\(")
    assigned = re.compile(rf"(?<![\w.:])(local\s+)?{word}\s*=\s*function\s*\(")
    return any(m.group(1) is None for rx in (statement, assigned) for m in rx.finditer(code))
