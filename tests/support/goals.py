"""One verdict line per goal, the same shape in every benchmark:
`GOAL <name>: <measured> (goal <target>) ok|short` (bench/). Nothing is asserted about time."""

from __future__ import annotations


def goal(name: str, measured: float, target: float, unit: str = "", *, at_least: bool = False, digits: int = 2) -> str:
    """Print and return the line. By default lower is better; `at_least` for rates."""
    met = measured >= target if at_least else measured <= target
    suffix = f" {unit}" if unit else ""
    line = f"GOAL {name}: {measured:.{digits}f}{suffix} (goal {target:g}{suffix}) {'ok' if met else 'short'}"
    print(line)
    return line
