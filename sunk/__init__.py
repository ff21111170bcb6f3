"""sunk: Slurm on Kubernetes as a typed Pulumi library.

The pure core lives here (spec models, naming, Slurm file renderers, manifest builders).
`sunk.components` (Pulumi) and `sunk.runtime` (in-cluster controllers) are the source
folders `components/` and `runtime/`: pyproject maps them under this package when installed.
In a source checkout the finder below gives the same mapping, so `sunk.components` means one
thing everywhere and no generic top-level `components` package is ever imported.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from pathlib import Path

__version__ = "0.1.0"

_CHECKOUT = Path(__file__).resolve().parent.parent
_MAPPED = {"sunk.components": _CHECKOUT / "components", "sunk.runtime": _CHECKOUT / "runtime"}


class _CheckoutFolders(importlib.abc.MetaPathFinder):
    """Finds exactly sunk.components and sunk.runtime in a source checkout; their submodules
    are then found through the usual `__path__` search."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        folder = _MAPPED.get(fullname)
        if folder is None or not (folder / "__init__.py").is_file():
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder / "__init__.py", submodule_search_locations=[str(folder)]
        )


if (_CHECKOUT / "pyproject.toml").is_file() and not any(isinstance(f, _CheckoutFolders) for f in sys.meta_path):
    sys.meta_path.append(_CheckoutFolders())
