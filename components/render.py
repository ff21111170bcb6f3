"""`sunk render STACK --out DIR`: the stack's Kubernetes objects, offline, as kubectl-appliable
YAML, one file per object, deterministic (same stack, same bytes, in any process).

Files are named `<rank>-<kind>-<namespace>-<name>.yaml` (`_cluster` for cluster-scoped objects).
The two-digit rank orders them for `kubectl apply -f DIR`: namespaces, RBAC, config and storage,
Services, workloads, Jobs, then custom resources; CustomResourceDefinitions go to DIR/crds, applied
first (apply_command). A stack's keys are made in the cluster
(render_config), so no file holds one; a program that has Pulumi generate keys gets its Secrets
without those keys (sunk.components.offline). Other Secret values are redacted (every key kept)
unless --show-secrets."""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import shlex
import sys
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sunk import strictyaml
from sunk.manifests.meta import Manifest
from sunk.problem import Problem
from sunk.spec.errors import SpecError
from sunk.stackfile import (
    KEYS_FROM_KEY,
    PROJECT,
    NoDefaultStack,
    default_stack,
    list_stacks,
    load_stack,
    no_stacks_reason,
    project_dir,
    read_stack_file,
    stack_path,
    stacks_dir,
)

from .offline import Evaluation, ProgramFailed, evaluate, is_secret, stack_config

CLUSTER_SCOPE = "_cluster"
"""Namespace part of cluster-scoped objects' file names (no namespace can contain '_')."""
_RANKS = {
    "Namespace": 0,
    "CustomResourceDefinition": 1,
    "ServiceAccount": 2,
    "ClusterRole": 2,
    "Role": 2,
    "ClusterRoleBinding": 3,
    "RoleBinding": 3,
    "ConfigMap": 4,
    "Secret": 4,
    "PersistentVolumeClaim": 4,
    "Service": 5,
    "PodDisruptionBudget": 6,
    "NetworkPolicy": 6,
    "StatefulSet": 7,
    "Deployment": 7,
    "Job": 8,
}
CUSTOM_RANK = 9
CRD_DIR = "crds"
"""CustomResourceDefinitions go to this folder of a render, applied first: a NodeSet in the same
`kubectl apply` as its CRD fails (kubectl maps every kind before it applies anything)."""
OWN_FILE = re.compile(r"^\d\d-[a-z0-9]+-[a-z0-9_.-]+\.yaml$")


# libyaml's emitter when PyYAML was built with it (the wheels are): the same bytes as the pure
# Python one for every object of the four stacks (compared object by object), ~5x faster, which
# was most of a render's time after the program itself.
_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_SafeDumper):  # type: ignore[valid-type,misc]
    """Multi-line strings (the Slurm files) as literal blocks, so the YAML reads like the file."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(obj: Manifest) -> str:
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=120, allow_unicode=True)


def rank(obj: Manifest) -> int:
    return _RANKS.get(obj["kind"], CUSTOM_RANK)


def file_name(obj: Manifest) -> str:
    """`<rank>-<kind>-<namespace>-<name>.yaml`, under CRD_DIR for a CustomResourceDefinition."""
    meta = obj["metadata"]
    name = f"{rank(obj):02d}-{obj['kind'].lower()}-{meta.get('namespace', CLUSTER_SCOPE)}-{meta['name']}.yaml"
    return f"{CRD_DIR}/{name}" if obj["kind"] == "CustomResourceDefinition" else name


# A CRD is created with `status.conditions: null` (the field has no omitempty) until the API
# server's naming controller writes its first condition. `kubectl wait --for=condition=...` fails at
# once on a null list ("accessor error: <nil> is of the type <nil>") instead of waiting, so the
# command first waits, with a JSONPath that finds nothing in a null list, for any condition to exist
# (a JSONPath with no value needs kubectl 1.29 or newer). Single-quoted: zsh globs `[0]`.
FIRST_CONDITION = "'{.status.conditions[0].type}'"


def apply_command(files: dict[str, str] | list[str], out: Path | str) -> str:
    """The exact commands that apply a render in `out`: its CRDs first, until the API serves them,
    then the rest (`kubectl apply -f DIR` reads DIR's own files, not CRD_DIR)."""
    rest = f"kubectl apply -f {shlex.quote(str(out))}"
    if not any(n.startswith(f"{CRD_DIR}/") for n in files):
        return rest
    crds = shlex.quote(f"{out}/{CRD_DIR}")
    return (
        f"kubectl apply -f {crds}"
        f" && kubectl wait --for=jsonpath={FIRST_CONDITION} --timeout=60s -f {crds}"
        f" && kubectl wait --for=condition=Established --timeout=60s -f {crds}"
        f" && {rest}"
    )


def ordered(objs: list[Manifest]) -> list[Manifest]:
    """Apply order: the CRD folder first, then the files by name."""
    return sorted(objs, key=lambda o: (not file_name(o).startswith(f"{CRD_DIR}/"), file_name(o)))


@dataclass(frozen=True)
class Rendered:
    evaluation: Evaluation
    files: dict[str, str]
    """File name -> YAML text."""
    objects: list[Manifest]


def render_evaluation(evaluation: Evaluation, *, show_secrets: bool = False) -> Rendered:
    dups = evaluation.duplicate_urns()
    if dups:
        raise ValueError(f"duplicate resource URNs (a real `pulumi up` rejects them): {', '.join(dups)}")
    objs = ordered(evaluation.manifests(show_secrets=show_secrets))
    files: dict[str, str] = {}
    for obj in objs:
        name = file_name(obj)
        if name in files:
            raise ValueError(f"two objects render to {name}: the same kind, namespace and name")
        files[name] = to_yaml(obj)
    return Rendered(evaluation=evaluation, files=files, objects=objs)


def project_name() -> str:
    """`name:` of the project's Pulumi.yaml (config keys without a namespace belong to it)."""
    project = project_dir()
    if project is not None:
        try:
            doc = strictyaml.load((project / "Pulumi.yaml").read_text(errors="replace"))
        except strictyaml.StrictYamlError:
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("name"), str):
            return str(doc["name"])
    return PROJECT


def default_program() -> Path:
    """The program of the project around the current directory: __main__.py beside Pulumi.yaml."""
    project = project_dir()
    return (project or Path.cwd()) / "__main__.py"


def render_config(path: Path, project: str = PROJECT) -> tuple[dict[str, str], list[str]]:
    """The stack's config as `sunk render` runs the program with it: keys made in the cluster
    (`sunk:keys: cluster`, sunk.manifests.keygen) whatever the stack says, so a render never holds
    a key, with or without --show-secrets."""
    config, secret_keys = stack_config(path, project)
    config[f"{project}:{KEYS_FROM_KEY.split(':', 1)[1]}"] = "cluster"
    return config, secret_keys


def render_stack(stack: str, *, show_secrets: bool = False, program: Path | None = None) -> Rendered:
    """Validate the stack, then run the real program for it through the mock engine. A stack
    without `sunk:cluster` belongs to a program that builds its spec in code: it is rendered as
    that program makes it, and the program's own checks (the spec's, in load_spec) apply."""
    path = stack_path(stack, stacks_dir())
    name = load_stack(str(path)).name if _configures_cluster(path) else stack_name(path)
    project = project_name()
    config, secret_keys = render_config(path, project)
    evaluation = evaluate(
        (program or default_program()).resolve(),
        stack=name,
        project=project,
        config=config,
        secret_keys=secret_keys,
    )
    return render_evaluation(evaluation, show_secrets=show_secrets)


def stack_name(path: Path) -> str:
    return path.name.removeprefix("Pulumi.").removesuffix(".yaml")


def _configures_cluster(path: Path) -> bool:
    """The stack file sets `sunk:cluster` (or sunk's other keys), so it is validated first. A
    missing file is checked by load_stack, which names the project's stacks."""
    if not path.is_file():
        return True
    doc = read_stack_file(path)
    config = doc.get("config") if isinstance(doc, dict) else None
    if config is None:
        return False
    return not isinstance(config, dict) or any(str(k).startswith(f"{PROJECT}:") for k in config)


def write(rendered: Rendered, out: Path) -> list[Path]:
    """Write every file; remove files of an earlier render that this one no longer has."""
    return write_files(rendered.files, out)


def write_files(files: dict[str, str], out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    for folder in (out, out / CRD_DIR):
        for old in folder.iterdir() if folder.is_dir() else []:
            rel = old.relative_to(out).as_posix()
            if old.is_file() and OWN_FILE.match(old.name) and rel not in files:
                old.unlink()
    if (out / CRD_DIR).is_dir() and not any((out / CRD_DIR).iterdir()):
        (out / CRD_DIR).rmdir()
    paths = []
    for name, text in files.items():
        path = out / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(text.encode())
        paths.append(path)
    return paths


def summary(rendered: Rendered, out: Path | None, show_secrets: bool) -> str:
    ev = rendered.evaluation
    lines = [f"Previewing {ev.project}/{ev.stack} offline (Pulumi mock engine, same program as `pulumi up`):", ""]
    width = max((len(f"{o['apiVersion']} {o['kind']}") for o in rendered.objects), default=0)
    for obj in rendered.objects:
        meta = obj["metadata"]
        where = f"{meta['namespace']}/{meta['name']}" if "namespace" in meta else meta["name"]
        lines.append(f"  + {(obj['apiVersion'] + ' ' + obj['kind']).ljust(width)}  {where}")
    kinds = Counter(o["kind"] for o in rendered.objects)
    generated = Counter(r.type.split(":")[-1] for r in ev.generated())
    lines += [
        "",
        f"Resources: {len(rendered.objects)} Kubernetes objects, {len(ev.components())} components, "
        f"{sum(generated.values())} generated values ({_counts(generated)})",
        f"  by kind: {_counts(kinds)}",
    ]
    secrets = kinds.get("Secret", 0)
    if secrets:
        lines.append(
            f"  secrets: {secrets} Secret(s), values "
            + (
                "shown; generated keys are made at deploy time"
                if show_secrets
                else "redacted (--show-secrets shows them)"
            )
        )
    outputs = ev.plain_outputs(show_secrets=show_secrets)
    if outputs:
        lines += ["", "Outputs:", *(f"    {k}: {_scalar(v)}" for k, v in outputs.items())]
    if out is not None:
        lines += [
            "",
            f"Wrote {len(rendered.files)} files to {out}; apply them with:",
            f"  {apply_command(rendered.files, out)}",
        ]
    return "\n".join(lines)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{k} {n}" for k, n in sorted(counter.items()))


def _scalar(value: Any) -> str:
    return "[secret]" if is_secret(value) else str(value)


@dataclass(frozen=True)
class StackRender:
    """One stack of a matrix render: its files, or the error that stopped it (never both)."""

    stack: str
    files: dict[str, str]
    error: str = ""


def _render_files(stack: str, show_secrets: bool, program: Path | None) -> StackRender:
    try:
        return StackRender(stack, render_stack(stack, show_secrets=show_secrets, program=program).files)
    except SpecError as err:
        return StackRender(stack, {}, str(err))
    except ProgramFailed as err:
        return StackRender(stack, {}, f"the program failed: {err}")


def _render_share(args: tuple[list[str], bool, Path | None]) -> list[StackRender]:
    stacks, show_secrets, program = args
    return [_render_files(s, show_secrets, program) for s in stacks]


def render_many(
    stacks: list[str], *, jobs: int = 1, show_secrets: bool = False, program: Path | None = None
) -> list[StackRender]:
    """Render several stacks, in the order given, in `jobs` worker processes.

    One process per stack would import pulumi and pulumi_kubernetes again each time (~1.4 s, more
    than the program itself); a worker imports once and evaluates its share one after another
    (the mock engine is set up afresh for each). Workers are spawned, not forked: a process that
    has run the engine holds threads, and forked children of it hung on their locks (measured 2026-11 under
    pytest). Each stack's result is independent: one stack's error does not stop the rest."""
    if jobs <= 1 or len(stacks) <= 1:
        return _render_share((stacks, show_secrets, program))
    jobs = min(jobs, len(stacks))
    shares = [stacks[i::jobs] for i in range(jobs)]
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(_render_share, [(share, show_secrets, program) for share in shares]))
    by_stack = {r.stack: r for share in done for r in share}
    return [by_stack[s] for s in stacks]


def _matrix_names(stacks: list[str]) -> dict[str, str]:
    """Stack argument -> the folder its files go to under --out (the stack's name)."""
    names = {s: stack_path(s, stacks_dir()).name.removeprefix("Pulumi.").removesuffix(".yaml") for s in stacks}
    seen: dict[str, str] = {}
    for arg, name in names.items():
        if name in seen:
            raise SpecError(
                [Problem(None, f"stacks {seen[name]!r} and {arg!r} are both stack {name!r}: give each once")],
                "sunk render",
            )
        seen[name] = arg
    return names


def out_problem(out: Path) -> str | None:
    """Why `--out` can't take the files, checked before anything renders: an existing file, or a
    path under something that is not a writable folder. None when it can."""
    if out.exists():
        if not out.is_dir():
            return "is a file; give a folder (it is created if missing)"
        return None if os.access(out, os.W_OK | os.X_OK) else "is a folder you may not write to"
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is a file, so no folder can be made under it"
    return None if os.access(parent, os.W_OK | os.X_OK) else f"can't create it: {parent} is not writable"


def cmd_render(args: argparse.Namespace) -> int:
    bad_out = out_problem(Path(args.out))
    if bad_out is not None:
        print(f"sunk render: --out {args.out}: {bad_out}", file=sys.stderr)
        return 1
    if not args.stacks and not args.all:
        try:
            args.stacks = [default_stack()]
        except NoDefaultStack as err:
            print(f"sunk render: give a STACK (or --all): {err}", file=sys.stderr)
            return 1
    stacks: list[str] = list(dict.fromkeys(args.stacks))
    if args.all:
        stacks += [s for s in list_stacks() if s not in stacks]
    if args.all and not stacks:
        print(f"sunk render --all: {no_stacks_reason()}", file=sys.stderr)
        return 1
    if len(stacks) == 1 and not args.all:
        return _render_one(stacks[0], args)
    return _render_matrix(stacks, args)


def _render_one(stack: str, args: argparse.Namespace) -> int:
    try:
        rendered = render_stack(stack, show_secrets=args.show_secrets, program=args.program)
    except SpecError as err:
        print(err, file=sys.stderr)
        return 1
    except ProgramFailed as err:
        print(f"the program failed: {err}", file=sys.stderr)
        return 1
    out = Path(args.out)
    try:
        write(rendered, out)
    except OSError as err:
        print(f"sunk render: --out {out}: {err.strerror or err}", file=sys.stderr)
        return 1
    print(summary(rendered, out, args.show_secrets))
    return 0


def _render_matrix(stacks: list[str], args: argparse.Namespace) -> int:
    """Every stack into `--out/<stack>/`; nothing is written unless every stack renders."""
    try:
        names = _matrix_names(stacks)
    except SpecError as err:
        print(err, file=sys.stderr)
        return 1
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    results = render_many(stacks, jobs=jobs, show_secrets=args.show_secrets, program=args.program)
    failed = [r for r in results if r.error]
    if failed:
        for r in failed:
            print(f"{r.stack}: {r.error}", file=sys.stderr)
        print(f"{len(failed)} of {len(results)} stacks failed; nothing written", file=sys.stderr)
        return 1
    out = Path(args.out)
    for r in results:
        try:
            write_files(r.files, out / names[r.stack])
        except OSError as err:
            print(f"sunk render: --out {out / names[r.stack]}: {err.strerror or err}", file=sys.stderr)
            return 1
        print(f"{names[r.stack]}: {len(r.files)} objects -> {out / names[r.stack]}")
    print(f"Rendered {len(results)} stacks into {out} ({min(jobs, len(results))} at a time)")
    return 0
