"""`sunk` command line: the composition root of the tools (render, stacks, images, harness, local
cluster), above components/ and runtime/, which sit above the pure core (.importlinter). Each
subcommand that needs Pulumi or the runtime imports its module inside its handler, an ordinary
import the layer contracts see, so `sunk --help` and `sunk validate` load neither."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from sunk import __version__
from sunk.spec.advice import warnings
from sunk.spec.errors import SpecError
from sunk.stackfile import NoDefaultStack, default_stack, list_stacks, load_stack, no_stacks_reason

EXTRAS = {
    "pulumi": "pulumi",
    "pulumi_kubernetes": "pulumi",
    "pulumi_random": "pulumi",
    "pulumi_tls": "pulumi",
    "kubernetes": "runtime",
    "httpx": "runtime",
    "prometheus_client": "runtime",
    "msgspec": "runtime",
    "aiohttp": "local",
}
"""Top-level module -> the extra of pyproject.toml that installs it."""


def cmd_validate(args: argparse.Namespace) -> int:
    stacks = args.stacks or list_stacks()
    if not stacks:
        print(f"sunk validate: {no_stacks_reason()}", file=sys.stderr)
        return 1
    failed = 0
    for stack in stacks:
        try:
            loaded = load_stack(stack)
        except SpecError as err:
            failed += 1
            print(f"✗ {stack}: {len(err.items)} problem(s)", file=sys.stderr)
            for line in err.lines:
                print(f"    {line}", file=sys.stderr)
            for note in err.notes:
                print(f"    ({note})", file=sys.stderr)
            continue
        s = loaded.spec
        print(
            f"✓ {stack}: cluster {s.name} (tenant {s.tenant}, namespace {s.ns}), "
            f"{len(s.nodesets)} nodeset(s), {len(s.partitions)} partition(s)"
        )
        for warning in warnings(s):
            print(f"    ! {warning}", file=sys.stderr)
    return 1 if failed else 0


def cmd_slurm_files(args: argparse.Namespace) -> int:
    from sunk.render import render_slurm_files

    try:
        spec = load_stack(args.stack).spec
    except SpecError as err:
        print(err, file=sys.stderr)
        return 1
    out = Path(args.out)
    files = render_slurm_files(spec)
    try:
        written = write_slurm_files(files, out)
    except (OSError, ValueError) as err:
        print(f"sunk slurm-files: --out {out}: {err}", file=sys.stderr)
        return 1
    for target in written:
        print(target)
    return 0


SLURM_FILES_LIST = ".sunk-slurm-files"
"""In a `slurm-files` output folder: what the last run wrote, so the next one removes what it no
longer renders (a reused folder never mixes two stacks' files) and leaves anything else alone."""


def write_slurm_files(files: dict[str, str], out: Path) -> list[Path]:
    """Write the rendered files into `out` (created), removing files an earlier run there wrote
    that this one does not. Raises ValueError for an `out` that is not a folder."""
    if out.exists() and not out.is_dir():
        raise ValueError("is a file; give a folder (it is created if missing)")
    out.mkdir(parents=True, exist_ok=True)
    listing = out / SLURM_FILES_LIST
    before = listing.read_text().split("\n") if listing.is_file() else []
    for rel in before:
        old = out / rel
        if rel and rel not in files and ".." not in Path(rel).parts and old.is_file():
            old.unlink()
            if old.parent != out and not any(old.parent.iterdir()):
                old.parent.rmdir()
    written = []
    for rel, text in files.items():
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        # Slurm runs prolog/epilog scripts directly, and slurmdbd refuses a readable slurmdbd.conf.
        target.chmod(0o755 if text.startswith("#!") else 0o600 if rel == "slurmdbd.conf" else 0o644)
        written.append(target)
    listing.write_text("\n".join(sorted(files)) + "\n")
    return written


Command = Callable[[argparse.Namespace], int]


def missing_extra(err: ModuleNotFoundError) -> str | None:
    """The extra to install when `err` is one of an extra's packages missing, else None."""
    return EXTRAS.get((err.name or "").partition(".")[0])


def needs_extra(command: Command) -> Command:
    """`command`, where a missing package of one of pyproject's extras becomes a one-line hint to
    install that extra (exit 2) instead of a traceback."""

    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except ModuleNotFoundError as err:
            extra = missing_extra(err)
            if extra is None:
                raise
            from sunk.install import requirement

            print(
                f"sunk {args.command}: needs the `{extra}` extra ({err.name} is not installed); install it "
                f"with: pip install '{requirement(extra).line}'",
                file=sys.stderr,
            )
            return 2

    return run


# The tools' handlers, each importing its module when its subcommand runs.


@needs_extra
def _render(args: argparse.Namespace) -> int:
    from sunk.components.render import cmd_render

    return cmd_render(args)


@needs_extra
def _stacks(args: argparse.Namespace) -> int:
    from sunk.components.stacks import cmd_stacks

    return cmd_stacks(args)


@needs_extra
def _init(args: argparse.Namespace) -> int:
    from sunk.scaffold import cmd_init

    return cmd_init(args)


@needs_extra
def _demo(args: argparse.Namespace) -> int:
    from sunk.runtime.harness.cli import cmd_demo

    return cmd_demo(args)


@needs_extra
def _slurm_up(args: argparse.Namespace) -> int:
    from sunk.runtime.harness.cli import cmd_slurm_up

    return cmd_slurm_up(args)


@needs_extra
def _images_build(args: argparse.Namespace) -> int:
    from sunk.runtime.images.cli import cmd_build

    return cmd_build(args)


@needs_extra
def _images_push(args: argparse.Namespace) -> int:
    from sunk.runtime.images.cli import cmd_push

    return cmd_push(args)


@needs_extra
def _images_prune(args: argparse.Namespace) -> int:
    from sunk.runtime.images.cli import cmd_prune

    return cmd_prune(args)


@needs_extra
def _images_list(args: argparse.Namespace) -> int:
    from sunk.runtime.images.cli import cmd_list

    return cmd_list(args)


@needs_extra
def _local_up(args: argparse.Namespace) -> int:
    from sunk.runtime.local.cli import cmd_up

    return cmd_up(args)


@needs_extra
def _local_apply(args: argparse.Namespace) -> int:
    from sunk.runtime.local.cli import cmd_apply

    return cmd_apply(args)


def _local_demo(args: argparse.Namespace) -> int:
    from sunk.runtime.local.demo import cmd_demo

    return cmd_demo(args)


def _local_status(args: argparse.Namespace) -> int:
    from sunk.runtime.local.cli import cmd_status

    return cmd_status(args)


@needs_extra
def _local_kubeconfig(args: argparse.Namespace) -> int:
    from sunk.runtime.local.cli import cmd_kubeconfig

    return cmd_kubeconfig(args)


@needs_extra
def _local_node(args: argparse.Namespace) -> int:
    from sunk.runtime.local.cli import cmd_node

    return cmd_node(args)


def _rate(text: str) -> float:
    """An argparse type: a rate per second, above 0, else a one-line error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number per second") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text}: give a rate above 0 per second")
    return value


def _seconds(minimum: float) -> Callable[[str], float]:
    """An argparse type: a number of seconds of at least `minimum`, else a one-line error."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not value >= minimum:
            raise argparse.ArgumentTypeError(f"{text} s: give at least {minimum:g} s")
        return value

    return parse


def _local_controlplane_build(args: argparse.Namespace) -> int:
    from sunk.runtime.local.kubebuild import cmd_build

    return cmd_build(args)


@needs_extra
def _local_down(args: argparse.Namespace) -> int:
    from sunk.runtime.local.cli import cmd_down

    return cmd_down(args)


def with_default_stack(command: Command) -> Command:
    """`args.stack` None (no STACK given) becomes the project's only stack, or a one-line error."""

    def run(args: argparse.Namespace) -> int:
        if args.stack is None:
            try:
                args.stack = default_stack()
            except NoDefaultStack as err:
                print(f"sunk {args.command}: give a STACK: {err}", file=sys.stderr)
                return 1
        return command(args)

    return run


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sunk", description="Slurm on Kubernetes, as Pulumi stacks.")
    parser.add_argument("--version", action="version", version=f"sunk {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("validate", help="validate stacks; print every problem; exit 1 if any")
    p.add_argument("stacks", nargs="*", help="stack names (acme-dev) or files; default: all in stacks/")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "slurm-files",
        help="write a stack's rendered Slurm files",
        description="Renders STACK's Slurm files (slurm.conf, slurmdbd.conf, cgroup.conf, gres, topology, "
        "plugstack, prolog/epilog, job_submit.lua) into OUT: the files the stack's ConfigMaps hold.",
    )
    p.add_argument("stack", metavar="STACK", help="stack name (acme-dev) or path to a stack file")
    p.add_argument(
        "--out",
        required=True,
        metavar="OUT",
        help="folder for the files (created; files an earlier run wrote are replaced)",
    )
    p.set_defaults(func=cmd_slurm_files)

    for register in _EXTENSIONS:
        register(sub)
    return parser


# The subcommands that front a tool outside the core (render, stacks, init, harness, images,
# local). Their register functions below add them; each handler imports its tool when it runs.
_EXTENSIONS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = []


def _positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (argparse prints the message and exits 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number; give 1 or more") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1; give 1 or more")
    return value


def _register_render(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "render",
        help="evaluate a stack's program offline (Pulumi mock engine) and write its Kubernetes objects",
        description="Runs the real Pulumi program for STACK through Pulumi's mock engine and writes one "
        "kubectl-appliable YAML file per object, named <rank>-<kind>-<namespace>-<name>.yaml.",
    )
    p.add_argument(
        "stacks",
        nargs="*",
        metavar="STACK",
        help="stack names or files (default: the project's only stack); with several, each goes to OUT/<stack>/",
    )
    p.add_argument("--all", action="store_true", help="every stack of the project (each into OUT/<stack>/)")
    p.add_argument(
        "--jobs", type=_positive_int, default=None, help="worker processes for several stacks (default: CPUs)"
    )
    p.add_argument("--out", required=True, help="folder for the YAML files (earlier renders there are replaced)")
    p.add_argument(
        "--show-secrets",
        action="store_true",
        help="write the values of Secrets your own program writes (a stack's render has none: unchanged)",
    )
    p.add_argument("--program", type=Path, default=None, help="Pulumi program (default: the project's __main__.py)")
    p.set_defaults(func=_render)


def _register_stacks(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "stacks",
        help="list, or pulumi preview/up/refresh/destroy, every stack of this project (Automation API)",
        description="Every stack of the Pulumi project around the current directory. Stacks installing the "
        "operator (sunk:operator) run first (last for destroy); a stack that does not validate fails alone.",
    )
    p.add_argument("action", choices=["list", "preview", "up", "refresh", "destroy"])
    p.add_argument("--tenant", action="append", help="only this tenant (repeatable)")
    p.add_argument("--env", action="append", help="only this environment, e.g. prod (repeatable)")
    p.add_argument(
        "--stacks-dir", default=None, help="folder of Pulumi.<stack>.yaml files (default: the project's stackConfigDir)"
    )
    p.add_argument("--fail-fast", action="store_true", help="start no further stack after a failure")
    p.add_argument("--parallel", type=_positive_int, default=1, metavar="N", help="run up to N tenant stacks at once")
    p.add_argument("--json", action="store_true", help="print one JSON document with every stack's result")
    p.set_defaults(func=_stacks)


def _register_init(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("init", help="scaffold a Pulumi project using sunk: Pulumi.yaml, __main__.py, one stack")
    p.add_argument("directory", nargs="?", default=".", help="project folder (default: the current one)")
    p.add_argument("--name", default=None, help="project name (default: the folder's name)")
    p.add_argument("--stack", default="demo-dev", help="the first stack, <tenant>-<env> (default: demo-dev)")
    p.set_defaults(func=_init)


def _register_harness(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="validate a stack, render its Slurm files, boot them on real local daemons, run a job, tear down",
    )
    p.add_argument("stack", nargs="?", default=None, help="stack name or file (default: the project's only stack)")
    p.add_argument("--debug", action="store_true", help="log the harness's steps and timings")
    p.set_defaults(func=with_default_stack(_demo))

    p = sub.add_parser("slurm-up", help="boot a stack's Slurm files on real local daemons until Ctrl-C")
    p.add_argument("stack", nargs="?", default=None, help="stack name or file (default: the project's only stack)")
    p.add_argument("--no-accounting", action="store_true", help="skip MariaDB and slurmdbd")
    p.add_argument("--seconds", type=float, default=0, help="tear down after this long (default: wait for Ctrl-C)")
    p.add_argument("--debug", action="store_true", help="log the harness's steps and timings")
    p.set_defaults(func=with_default_stack(_slurm_up))


def _register_images(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from sunk.images import DEFAULT_SLURM, ROLES, SUPPORTED_SLURM

    images = sub.add_parser("images", help="build and push the images the manifests name (buildah, no daemon)")
    verbs = images.add_subparsers(dest="verb", required=True)
    for verb, helptext in (
        ("build", "build role images from Debian packages of one Slurm release (cached by input hash)"),
        ("push", "build if needed, then copy role images to a registry with skopeo"),
    ):
        p = verbs.add_parser(verb, help=helptext)
        p.add_argument("roles", nargs="*", metavar="ROLE", help=f"default: all ({', '.join(ROLES)})")
        p.add_argument("--arch", default="amd64", help="amd64 (default) or arm64 (needs a qemu-user binfmt handler)")
        p.add_argument(
            "--slurm",
            choices=SUPPORTED_SLURM,
            default=DEFAULT_SLURM,
            help=f"the Slurm release's image family (default: {DEFAULT_SLURM})",
        )
        p.add_argument(
            "--with",
            dest="variant",
            choices=["pyxis"],
            default=None,
            help="optional stage: pyxis and enroot (NVIDIA's releases, not Debian) on slurmd and login",
        )
        if verb == "build":
            p.add_argument("--out", help="also copy each image's oci-archive into this folder")
            p.add_argument(
                "--unpack",
                action="store_true",
                help="write each image's root filesystem now, as `sunk local` and the harness run them, "
                "and no oci-archive (unless --out)",
            )
            p.set_defaults(func=_images_build)
        else:
            p.add_argument("--registry", required=True, help="e.g. registry.example.com/hpc")
            p.add_argument("--tag", help="push under this tag instead of each role's own")
            p.add_argument("--insecure", action="store_true", help="plain-HTTP or self-signed registry")
            p.set_defaults(func=_images_push)
    p = verbs.add_parser("list", help="every role's image and the reference the manifests use by default")
    p.add_argument("--arch", default="amd64")
    p.add_argument("--slurm", choices=SUPPORTED_SLURM, default=DEFAULT_SLURM)
    p.set_defaults(func=_images_list)
    p = verbs.add_parser(
        "prune",
        help="remove cached images, archives and unpacked roots that neither release's current inputs name",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would go and how many bytes; delete nothing")
    p.add_argument(
        "--older-than", type=float, metavar="HOURS", help="only builds unused this long (default 6; 0: all stale)"
    )
    p.add_argument("--max-gib", type=float, metavar="GIB", help="also the least recently used others past this size")
    p.add_argument("--arch", default="amd64", help="the architecture whose current builds are kept (default amd64)")
    p.set_defaults(func=_images_prune)


def _register_local(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    local = sub.add_parser(
        "local",
        help="a one-machine Kubernetes running a stack's rendered objects from the built images (sunk[local])",
    )
    verbs = local.add_subparsers(dest="verb", required=True)
    p = verbs.add_parser("up", help="render STACK, start this project's local cluster, apply, wait until Ready")
    p.add_argument("stack", nargs="?", default=None, help="stack name or file (default: the project's only stack)")
    p.add_argument("--timeout", type=float, default=600, help="seconds to wait for every pod Ready (default 600)")
    p.add_argument("--no-wait", action="store_true", help="return once the render is applied")
    p.add_argument(
        "--nodes", type=Path, default=None, help="YAML file of the cluster's Nodes (default: derived from the render)"
    )
    p.add_argument(
        "--node-monitor-grace-period",
        type=_seconds(1),
        default=50.0,
        help="seconds without a heartbeat before a Node's Ready turns Unknown (default 50, Kubernetes 1.32's)",
    )
    p.add_argument(
        "--default-toleration-seconds",
        type=lambda text: int(_seconds(0)(text)),
        default=300,
        help="tolerationSeconds of the not-ready/unreachable tolerations added to pods without one (default 300)",
    )
    p.add_argument(
        "--node-startup-grace-period",
        type=_seconds(1),
        default=60.0,
        help="seconds a Node that never posted Ready has before it turns Unknown (default 60, Kubernetes 1.32's)",
    )
    p.add_argument(
        "--node-eviction-rate",
        type=_rate,
        default=0.1,
        help="Nodes per second and zone that get the NoExecute taint while the zone is healthy (default 0.1)",
    )
    p.set_defaults(func=with_default_stack(_local_up))
    p = verbs.add_parser("apply", help="re-render STACK and apply the difference to the running local cluster")
    p.add_argument("stack", nargs="?", default=None, help="stack name or file (default: the project's only stack)")
    p.set_defaults(func=with_default_stack(_local_apply))
    p = verbs.add_parser(
        "demo", help="up STACK, show its pods, sinfo, a 2-node job, a pod placed by Slurm beside a job, a drain; down"
    )
    p.add_argument("stack", nargs="?", default=None, help="stack name or file (default: the project's only stack)")
    p.add_argument("--timeout", type=float, default=600, help="seconds to wait for every pod Ready (default 600)")
    p.set_defaults(func=with_default_stack(_local_demo))
    p = verbs.add_parser("node", help="stop one Node's agent as if the Node lost power, or start it again")
    p.add_argument("action", choices=["stop", "start"])
    p.add_argument("name", help="the Node's name (kubectl get nodes)")
    p.add_argument(
        "--keep-containers",
        action="store_true",
        help="stop: only the agent stops (a kubelet crash); the Node's containers keep running until it starts again",
    )
    p.set_defaults(func=_local_node)
    p = verbs.add_parser("controlplane", help="the real Kubernetes control plane built from the pinned Go modules")
    p.add_argument(
        "action",
        choices=["build"],
        help="build: etcd, kube-apiserver, kube-controller-manager, kube-scheduler into ~/.cache/sunk/controlplane",
    )
    p.set_defaults(func=_local_controlplane_build)
    for verb, helptext, handler in (
        ("status", "is this project's local cluster running; its pods", _local_status),
        ("kubeconfig", "print the path of the local cluster's kubeconfig", _local_kubeconfig),
        ("down", "stop the local cluster: no process, mount, bridge or veth of it is left", _local_down),
    ):
        p = verbs.add_parser(verb, help=helptext)
        p.set_defaults(func=handler)


def cmd_upgrade_plan(args: argparse.Namespace) -> int:
    """The steps that move STACK's cluster from the release it runs to `slurm.version`."""
    from sunk.images import SUPPORTED_SLURM
    from sunk.upgrade import plan_text, upgrade_plan

    try:
        spec = load_stack(args.stack).spec
    except SpecError as err:
        print(err, file=sys.stderr)
        return 1
    source = args.source or spec.slurm.upgrade_from
    if source is None:
        print(
            f"sunk upgrade-plan: {args.stack} has no slurm.upgradeFrom, and the release the cluster runs "
            "can't be read offline: set slurm.upgradeFrom to it in the stack, or pass --from "
            f"({', '.join(SUPPORTED_SLURM)})",
            file=sys.stderr,
        )
        return 1
    if source not in SUPPORTED_SLURM:
        print(
            f"sunk upgrade-plan: --from {source!r} is not a Slurm release sunk supports; "
            f"supported: {', '.join(SUPPORTED_SLURM)}",
            file=sys.stderr,
        )
        return 1
    try:
        plan = upgrade_plan(spec, source)
    except ValueError as err:
        print(f"sunk upgrade-plan: {err}", file=sys.stderr)
        return 1
    print(plan_text(plan), end="")
    return 0


def _register_upgrade(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "upgrade-plan",
        help="print the steps of a Slurm release upgrade, their order and what each waits for",
        description="Prints how STACK's cluster moves from the release it runs (slurm.upgradeFrom, or "
        "--from) to slurm.version: each step, the gate before the next, how long it waits, and the way "
        "back (docs/upgrading.md). A downgrade is refused.",
    )
    p.add_argument("stack", metavar="STACK", help="stack name (acme-dev) or path to a stack file")
    p.add_argument(
        "--from", dest="source", default=None, help="the release the cluster runs (default: slurm.upgradeFrom)"
    )
    p.set_defaults(func=cmd_upgrade_plan)


_EXTENSIONS += [
    _register_upgrade,
    _register_render,
    _register_stacks,
    _register_init,
    _register_harness,
    _register_images,
    _register_local,
]


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
