"""Test and benchmark support: fakes of the controllers' APIs, kubesim (a Kubernetes API on
kmock), a kubelet's admission model, an in-memory list/watch, a Slurm file reader, NodeSet objects
from a spec, and the benchmarks' GOAL line. Lives beside the tests, outside the packages the wheel
ships: nothing in sunk/, components/ or runtime/ imports it, and it needs the dev dependencies
(kmock). Importable as `tests.support` from the checkout's root (pytest's `pythonpath`, and the
benchmarks run from the root)."""
