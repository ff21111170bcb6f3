"""`python -m sunk.reference [FOLDER]`: write the reference pages (default: docs/reference of the
checkout this module is in); `--check` writes nothing and exits 1 naming each page that differs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import build

CHECKOUT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sunk.reference", description=__doc__)
    parser.add_argument("folder", nargs="?", type=Path, default=CHECKOUT / "docs" / "reference")
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on a difference")
    args = parser.parse_args(argv)
    reference = build()
    folder: Path = args.folder
    stale = [name for name, text in reference.pages.items() if _read(folder / name) != text]
    if args.check:
        for name in stale:
            print(f"{folder / name}: differs from the code; run make docs-ref", file=sys.stderr)
        return 1 if stale else 0
    folder.mkdir(parents=True, exist_ok=True)
    for name in stale:
        (folder / name).write_text(reference.pages[name])
    print(" ".join(f"{k}={v}" for k, v in reference.figures.items()))
    return 0


def _read(path: Path) -> str | None:
    return path.read_text() if path.is_file() else None


if __name__ == "__main__":
    sys.exit(main())
