"""`sunk images build|push|list` (parsers in sunk/cli.py): the images the manifests name, built
here and pushed anywhere."""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from sunk.images import ROLES, repository, tag_for

from . import cache
from .build import KEEP_UNUSED_SECONDS, Builder, BuildError, Built, require_tools


def _mib(size: int) -> str:
    return f"{size / 2**20:.0f} MiB"


def _roles(names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in ROLES]
    if unknown:
        raise BuildError(f"unknown role {unknown[0]!r}: one of {', '.join(ROLES)}")
    return names or list(ROLES)


def _build(args: argparse.Namespace) -> list[Built]:
    require_tools("buildah", "mmdebstrap")
    roles = _roles(args.roles)
    builder = Builder(args.arch, release=args.slurm)
    unpack = getattr(args, "unpack", False)
    # Roots are what the local cluster and the harness run; an oci-archive only what is pushed or
    # copied out (--out), so --unpack alone writes none.
    archives = not unpack or bool(getattr(args, "out", None))
    return builder.build_many(roles, variant=args.variant, unpack=unpack, archives=archives)


def cmd_build(args: argparse.Namespace) -> int:
    try:
        built = _build(args)
        out = Path(args.out) if args.out else None
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
        for b in built:
            archive = _mib(b.archive_size) if b.archive.is_file() else "-"
            line = f"{b.reference:<48} rootfs {_mib(b.size):>8}  archive {archive:>7}"
            line += f"  built in {b.seconds:.0f} s" if b.seconds else "  cached"
            if out is not None:
                target = out / f"{b.role}-{b.tag_name}.oci.tar"
                shutil.copyfile(b.archive, target)
                line += f"  -> {target}"
            print(line)
    except BuildError as err:
        print(f"sunk images build: {err}", file=sys.stderr)
        return 1
    return 0


def cmd_push(args: argparse.Namespace) -> int:
    try:
        require_tools("skopeo")
        built = _build(args)
        for b in built:
            tag = args.tag or tag_for(ROLES[b.role], b.arch, args.variant, args.slurm)
            dest = f"{repository(b.role, args.registry)}:{tag}"
            cmd = ["skopeo", "copy", "-q", f"oci-archive:{b.archive}", f"docker://{dest}"]
            if args.insecure:
                cmd.insert(2, "--dest-tls-verify=false")
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise BuildError(f"pushing {dest} failed: {reason}")
            print(f"pushed {dest}")
    except BuildError as err:
        print(f"sunk images push: {err}", file=sys.stderr)
        return 1
    print(f"\nin a stack:  images: {{registry: {args.registry}}}  (every role image then comes from there)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    for role in ROLES.values():
        print(
            f"{role.name:<11} {repository(role.name)}:{tag_for(role, args.arch, release=args.slurm)}  ({role.description})"
        )
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    """Removes cached builds that no supported release's current inputs name and nothing used for
    --older-than hours (and, with --max-gib, the least recently used others past that bound)."""
    hours = KEEP_UNUSED_SECONDS / 3600 if args.older_than is None else args.older_than
    if hours < 0:
        print(f"sunk images prune: --older-than {hours:g}: give hours, 0 or more", file=sys.stderr)
        return 2
    if args.max_gib is not None and args.max_gib <= 0:
        print(f"sunk images prune: --max-gib {args.max_gib:g}: give a positive number of GiB", file=sys.stderr)
        return 2
    try:
        require_tools("buildah")
        builder = Builder(args.arch)
        budget = None if args.max_gib is None else int(args.max_gib * 2**30)
        plan, failed = builder.prune(keep_seconds=hours * 3600, budget=budget, dry_run=args.dry_run)
    except (BuildError, cache.CacheError) as err:
        print(f"sunk images prune: {err}", file=sys.stderr)
        return 1
    verb = "would remove" if args.dry_run else "removed"
    for build in plan.delete:
        kinds = ", ".join(sorted({e.kind for e in build.entries}))
        print(f"{verb} {build.key:<52} {_mib(build.size):>9}  ({kinds})")
    print(
        f"{verb} {len(plan.delete)} build(s), {plan.freed / 2**30:.2f} GiB of {plan.total / 2**30:.2f} GiB "
        f"in {builder.cache}; kept {len(plan.kept)}"
    )
    for line in failed:
        print(f"sunk images prune: could not remove {line}", file=sys.stderr)
    return 1 if failed else 0
