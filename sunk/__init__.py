"""sunk: Slurm on Kubernetes as a typed Pulumi library.

The pure core lives here (spec models, naming, Slurm file renderers, manifest builders).
`sunk.components` (Pulumi, `pip install sunk[pulumi]`) and `sunk.runtime` (in-cluster
controllers, `sunk[runtime]`) are the source folders `components/` and `runtime/`, linked into
this package (sunk/components, sunk/runtime), so they mean the same thing in a checkout, in the
wheel and to type checkers.

Programs import what they write from `sunk.api` (the models, the keys, the components and `late`).
This file stays empty: every controller and the CLI run it first.
"""

__version__ = "0.1.0"
