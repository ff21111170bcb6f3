"""The architecture page's table of folders stays true: every folder of the checkout and every
package of sunk and sunk.runtime has its row, no row names a folder that is gone, and each row's
size is within a fifth of the code's.

`python tests/docs/test_architecture.py` prints each row's size as the page should show it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "concepts" / "architecture.md"

CODE = {".py", ".sh"}
"""What a size counts: Python and shell, and extensionless scripts (a `#!` first line: .ci/run)."""

TOLERANCE = 0.2
"""A row may be this far from the code's size (a fifth) before the page must be updated, so the
table is not rewritten for every commit but can't drift into fiction."""


def _rows(text: str) -> dict[str, str]:
    """The folder table's rows: the folder (as written, `sunk/spec/`) -> its `lines` cell."""
    table = text.split("## The folders", 1)[1]
    lines = [line for line in table.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    column = header.index("lines")
    rows: dict[str, str] = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        folder = re.match(r"`([^`]+)`", cells[0])
        assert folder, f"a row of the folder table does not start with a `folder`: {line}"
        rows[folder.group(1)] = cells[column]
    return rows


def _is_code(path: Path) -> bool:
    if path.suffix in CODE:
        return True
    if path.suffix:
        return False
    with path.open("rb") as f:
        return f.read(2) == b"#!"


def size(row: str, rows: list[str]) -> int:
    """Lines of code in `row` (a folder, or a file), leaving out the folders that have rows of
    their own and the links (sunk/components, sunk/runtime: their folders have rows)."""
    base = ROOT / row
    if base.is_file():
        return len(base.read_text().splitlines())
    nested = {ROOT / other for other in rows if other != row and (ROOT / other).is_relative_to(base)}
    total = 0
    for dirpath, dirnames, filenames in os.walk(base):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if d != "__pycache__" and (here / d) not in nested]
        for name in filenames:
            path = here / name
            if not path.is_symlink() and _is_code(path):
                total += len(path.read_text(errors="replace").splitlines())
    return total


def shown(lines: int) -> str:
    """A size as the page shows it: two significant figures (7,300; 230; 38), `—` for none."""
    if lines == 0:
        return "—"
    return f"{round(lines, 2 - len(str(lines))):,}"


def _paths(rows: dict[str, str]) -> list[str]:
    return [row.split(" ", 1)[0].rstrip("/") for row in rows]


def _tracked_folders() -> set[str]:
    """Every top-level folder of the checkout git tracks, and every package below sunk/ and runtime/."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    folders = {path.split("/", 1)[0] for path in tracked if "/" in path}
    for top in ("sunk", "runtime", "tests"):
        folders |= {
            f"{top}/{child.name}"
            for child in (ROOT / top).iterdir()
            if child.is_dir() and not child.is_symlink() and (child / "__init__.py").is_file()
        }
    return folders


def missing_rows(text: str) -> list[str]:
    """Folders without a row, and rows naming a folder that is gone."""
    rows = set(_paths(_rows(text)))
    folders = _tracked_folders()
    return [f"no row for {f}" for f in sorted(folders - rows)] + [
        f"{row} is gone" for row in sorted(rows) if not (ROOT / row).exists()
    ]


def wrong_sizes(text: str) -> list[str]:
    """Rows whose size is further from the code's than TOLERANCE."""
    rows = _rows(text)
    paths = _paths(rows)
    wrong = []
    for path, cell in zip(paths, rows.values(), strict=True):
        lines = size(path, paths)
        written = 0 if cell == "—" else int(cell.replace(",", ""))
        if abs(written - lines) > max(TOLERANCE * lines, 50):
            wrong.append(f"{path}: {cell} on the page, {lines} lines ({shown(lines)})")
    return wrong


def test_every_folder_has_its_row() -> None:
    missing = missing_rows(PAGE.read_text())
    assert not missing, f"docs/concepts/architecture.md's table of folders: {missing}"


def test_every_size_is_close_to_the_code() -> None:
    wrong = wrong_sizes(PAGE.read_text())
    assert not wrong, f"update docs/concepts/architecture.md (python tests/docs/test_architecture.py): {wrong}"


def test_a_wrong_size_or_a_missing_row_is_found() -> None:
    """The checks above can fail: a row dropped from the table is named, and so is a size ten
    times the code's."""
    text = PAGE.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `runtime/operator/`"))
    assert missing_rows(text.replace(row + "\n", "")) == ["no row for runtime/operator"]
    cell = _rows(text)["runtime/operator/"]
    tenfold = f"{10 * int(cell.replace(',', '')):,}"
    wrong = wrong_sizes(text.replace(row, row.replace(f"| {cell} |", f"| {tenfold} |")))
    assert [w.split(":", 1)[0] for w in wrong] == ["runtime/operator"]


if __name__ == "__main__":
    names = _paths(_rows(PAGE.read_text()))
    for name in names:
        print(f"{name:<22} {size(name, names):>7} {shown(size(name, names)):>7}")
    sys.exit(0)
