"""`sunk init [DIR]`: a Pulumi project that uses sunk as an installed library.

Pulumi.yaml (stack files under stacks/), the program (stack config -> spec -> components, the
same composition as sunk's own project) and one stack that validates. Existing files are never
overwritten: the command refuses and names them."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from sunk.stackfile import STACK_NAME

PROGRAM = '''"""Pulumi program: one Slurm cluster per stack (stacks/Pulumi.<tenant>-<env>.yaml), from sunk.

`sunk validate`, `sunk render STACK --out DIR` and `sunk stacks preview` work in this folder."""

import pulumi
from sunk.components import SlurmCluster, SunkOperator

from sunk.spec.errors import SpecError
from sunk.stackfile import KEYS, allows_state_replacement, parse_config

config = pulumi.Config("sunk")
settings = {key: config.get(key.split(":", 1)[1]) for key in KEYS}
settings = {k: v for k, v in settings.items() if v is not None}
try:
    spec, operator_spec = parse_config(settings, f"stack {pulumi.get_stack()}")
except SpecError as err:
    raise pulumi.RunError(str(err)) from None

crd = SunkOperator("sunk-operator", operator_spec).crd if operator_spec is not None else None
cluster = SlurmCluster(spec.name, spec, nodeset_crd=crd, allow_state_replacement=allows_state_replacement(settings))

pulumi.export("namespace", cluster.namespace)
pulumi.export("controllerHost", cluster.controller_host)
if cluster.login_endpoint is not None:
    pulumi.export("loginEndpoint", cluster.login_endpoint)
'''

PROJECT = """name: {name}
runtime: python
description: Slurm on Kubernetes (sunk), one tenant per stack
stackConfigDir: stacks
"""

STACK = """# One tenant's Slurm cluster. Every field: https://github.com/sunk-dev/sunk (README, the spec).
config:
  # Installs the cluster-wide NodeSet operator and CRD; keep it in one stack per Kubernetes cluster.
  sunk:operator: true
  sunk:cluster:
    name: slurm
    tenant: {tenant}
    # Every role (controller, accounting, restapi, login, each NodeSet, runtime) takes pod settings:
    # nodeSelector, tolerations, affinity, priorityClassName, imagePullSecrets, labels, env, volumes...
    # (README: Per-role pod and Service settings). For example:
    # images: {{registry: registry.example.com/hpc, pullSecrets: [registry-credentials]}}
    # login:
    #   service: {{type: LoadBalancer, sourceRanges: [203.0.113.0/24]}}
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

REQUIREMENTS = "sunk[pulumi]\n"


def scaffold(directory: Path, name: str, stack: str) -> list[Path]:
    """The project's files, written into `directory`. Raises FileExistsError naming any file
    that is already there (nothing is written then), ValueError for a bad stack name."""
    if not STACK_NAME.match(stack):
        raise ValueError(f"stack {stack!r}: use <tenant>-<env> in lowercase letters, digits and '-', e.g. demo-dev")
    tenant = stack.rpartition("-")[0]
    files = {
        directory / "Pulumi.yaml": PROJECT.format(name=name),
        directory / "__main__.py": PROGRAM,
        directory / "requirements.txt": REQUIREMENTS,
        directory / "stacks" / f"Pulumi.{stack}.yaml": STACK.format(tenant=tenant),
    }
    present = [str(p) for p in files if p.exists()]
    if present:
        raise FileExistsError(f"already there, not overwritten: {', '.join(present)}")
    for path, content in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return list(files)


def cmd_init(args: argparse.Namespace) -> int:
    directory = Path(args.directory)
    name = args.name or re.sub(r"[^A-Za-z0-9_.-]", "-", directory.resolve().name) or "slurm"
    try:
        written = scaffold(directory, name, args.stack)
    except (FileExistsError, ValueError) as err:
        print(f"sunk init: {err}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    print(
        f"next: cd {directory} && sunk validate && sunk render {args.stack} --out rendered && pulumi up -s {args.stack}"
    )
    return 0
