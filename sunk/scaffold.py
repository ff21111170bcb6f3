"""`sunk init [DIR]`: a Pulumi project that uses sunk as an installed library.

Pulumi.yaml (stack files under stacks/), the program (two lines that call sunk's program body,
sunk.components.program.stack_program, as sunk's own project does), requirements.txt naming this
very sunk, and one stack that validates and that an ordinary user can run jobs on. In an existing project it adds a stack.
Existing files are never overwritten: the command refuses and names them."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from sunk.images import DEFAULT_SLURM
from sunk.install import requirement
from sunk.spec.errors import SpecError
from sunk.stackfile import OPERATOR_KEY, STACK_NAME, list_stacks, read_stack_file, stacks_dir

PROGRAM = '''"""Pulumi program: one Slurm cluster per stack (stacks/Pulumi.<tenant>-<env>.yaml), from sunk.

`sunk validate`, `sunk render STACK --out DIR` and `sunk stacks preview` work in this folder."""

from sunk.api import stack_program

stack_program()
'''

PROJECT = """name: {name}
runtime: python
description: Slurm on Kubernetes (sunk), one tenant per stack
stackConfigDir: stacks
"""

STACK = """# One tenant's Slurm cluster. `sunk validate` checks it and names every unknown field with the
# known ones; the sunk docs (docs/stacks.md and the reference) document each section.
config:
{operator}  sunk:cluster:
    name: slurm
    tenant: {tenant}
    # The Slurm release, pinned: a new sunk with another default never upgrades this cluster unasked
    # (moving it is an upgrade: docs/upgrading.md).
    slurm: {{version: "{release}"}}
    # Every role (controller, accounting, restapi, login, each NodeSet, runtime) takes pod settings:
    # nodeSelector, tolerations, affinity, priorityClassName, imagePullSecrets, labels, env, volumes...
    # (sunk docs: Pod and Service settings). For example:
    # images: {{registry: registry.example.com/hpc, pullSecrets: [registry-credentials]}}
    login:
      # sshd is reached inside the cluster (kubectl port-forward svc/slurm-login 2222:22). To expose
      # it, put a line that says who may connect in place of the one below it:
      # service: {{type: LoadBalancer, sourceRanges: [203.0.113.0/24]}}
      service: {{type: ClusterIP}}
    accounting:
      # Anyone who can log in may run jobs; usage is still recorded. To let only listed users run
      # jobs and hold QOS limits, list `accounts` (name, users) and set
      # enforce: [associations, limits, qos, safe].
      enforce: []
    nodesets:
      - name: cpu
        replicas: 2
        cpus: 4
        memoryMib: 8192
        # tolerations: [{{key: dedicated, operator: Exists, effect: NoSchedule}}]
        # volumes: [{{name: dshm, mountPath: /dev/shm, emptyDir: {{medium: Memory, sizeLimit: 2Gi}}}}]
    partitions:
      - name: batch
        nodesets: [cpu]
        default: true
"""

OPERATOR = """  # Installs the cluster-wide NodeSet operator and CRD; keep it in one stack per Kubernetes cluster.
  # Its policy admits slurmd pods with sunk's images only: with images from your own registry, say so:
  # sunk:operator: {policy: {imagePrefixes: [registry.example.com/hpc/]}}
  sunk:operator: true
"""
OPERATOR_ELSEWHERE = """  # The NodeSet operator and CRD come from stack {stack} (one per Kubernetes cluster); a stack
  # for another Kubernetes cluster sets `sunk:operator: true` here.
"""


def requirements() -> str:
    """requirements.txt: this very sunk (version and source), with the `pulumi` extra."""
    req = requirement("pulumi")
    return f"# {req.note}.\n{req.line}\n"


def scaffold(directory: Path, name: str, stack: str) -> list[Path]:
    """The project's files, written into `directory`. Raises FileExistsError naming any file
    that is already there (nothing is written then), ValueError for a bad stack name. In a folder
    that already holds a Pulumi project, only the stack file is added, to its stackConfigDir."""
    if not STACK_NAME.match(stack):
        raise ValueError(f"stack {stack!r}: use <tenant>-<env> in lowercase letters, digits and '-', e.g. demo-dev")
    tenant = stack.rpartition("-")[0]
    if (directory / "Pulumi.yaml").is_file():
        folder = stacks_dir(directory)
        installs = [s for s in list_stacks(folder) if _installs_operator(folder / f"Pulumi.{s}.yaml")]
        operator = OPERATOR_ELSEWHERE.format(stack=installs[0]) if installs else OPERATOR
        files = {folder / f"Pulumi.{stack}.yaml": STACK.format(tenant=tenant, operator=operator, release=DEFAULT_SLURM)}
    else:
        files = {
            directory / "Pulumi.yaml": PROJECT.format(name=name),
            directory / "__main__.py": PROGRAM,
            directory / "requirements.txt": requirements(),
            directory / "stacks" / f"Pulumi.{stack}.yaml": STACK.format(
                tenant=tenant, operator=OPERATOR, release=DEFAULT_SLURM
            ),
        }
    present = [str(p) for p in files if p.exists()]
    if present:
        raise FileExistsError(f"already there, not overwritten: {', '.join(present)}")
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return list(files)


def _installs_operator(path: Path) -> bool:
    try:
        doc = read_stack_file(path)
    except (SpecError, OSError):
        return False
    config = doc.get("config") if isinstance(doc, dict) else None
    value = config.get(OPERATOR_KEY, False) if isinstance(config, dict) else False
    return value not in (False, "false", None)


def cmd_init(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    name = args.name or re.sub(r"[^A-Za-z0-9_.-]", "-", directory.resolve().name) or "slurm"
    existing = (directory / "Pulumi.yaml").is_file()
    try:
        written = scaffold(directory, name, args.stack)
    except (FileExistsError, ValueError) as err:
        print(f"sunk init: {err}", file=sys.stderr)
        return 1
    if existing:
        print(f"{directory} is already a Pulumi project: added stack {args.stack}")
    for path in written:
        print(f"wrote {path}")
    enter = "" if directory.resolve() == Path.cwd().resolve() else f"cd {directory} && "
    print(f"next: {enter}sunk validate && sunk render {args.stack} --out rendered && pulumi up -s {args.stack}")
    req = requirement("pulumi")
    if not existing and not req.pinned:
        print(f"note: requirements.txt: {req.note}", file=sys.stderr)
    return 0
