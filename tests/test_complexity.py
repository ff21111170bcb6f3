"""No function outside the tests grows past radon's grade C (cyclomatic complexity 20): one that
does is split along the phases its docstring names (read, decide, build...), each phase a function
a reader takes in at once. None is over it today; one that had to be would be named below with
its reason, and the list only shrinks (an entry whose function is split, renamed or gone fails too,
so it is removed)."""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_rank, cc_visit

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sunk", "components", "runtime")

EXCEPTIONS: dict[str, str] = {}
"""`file:function` -> why it is still graded D to F."""


def graded_d_to_f(root: Path = ROOT) -> dict[str, int]:
    """Every function and method graded D, E or F in the production packages -> its complexity
    (closures count towards the function that holds them, as `radon cc` shows them)."""
    found: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            for block in cc_visit(path.read_text()):
                if cc_rank(block.complexity) in "DEF":
                    found[f"{path.relative_to(root).as_posix()}:{block.fullname}"] = block.complexity
    return found


def test_no_new_function_graded_d_to_f() -> None:
    new = {name: c for name, c in graded_d_to_f().items() if name not in EXCEPTIONS}
    assert not new, (
        "graded D-F by radon (complexity over 20); split each along the phases its docstring names: "
        + ", ".join(f"{name} ({c})" for name, c in sorted(new.items()))
    )


def test_exceptions_are_still_needed() -> None:
    stale = sorted(set(EXCEPTIONS) - set(graded_d_to_f()))
    assert not stale, f"no longer graded D-F (split, renamed or gone): remove from EXCEPTIONS: {', '.join(stale)}"


def test_the_check_sees_a_complex_function(tmp_path: Path) -> None:
    # 21 branches: grade D. The check reads it like any production module.
    body = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(21))
    (tmp_path / "sunk").mkdir()
    (tmp_path / "sunk" / "tangled.py").write_text(f"def tangled(x):\n{body}    return -1\n")
    assert graded_d_to_f(tmp_path) == {"sunk/tangled.py:tangled": 22}
