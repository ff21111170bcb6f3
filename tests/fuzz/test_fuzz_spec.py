"""A generative fuzzer over the stack: stacks drawn from the spec's own JSON schema (every field,
with the hostile values of its kind; tests/fuzz/schema_stacks.py says how), judged by invariants,
not examples: a stack is either refused, each problem naming a field, or every rendered Slurm file
reads back (tests/support/slurmread.py) as sunk wrote it, no password key sits in a file, sssd.conf
reads as an INI reader reads it, and no pod gets what its role's row lacks. Never a traceback.

Bounded by example count, not time: SUNK_FUZZ_EXAMPLES (default 200 in CI;
`SUNK_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest tests/fuzz -q` is the longer mode). The example
database is off: every failure the fuzzer has found is in FOUND below, as an explicit example, so a
fresh clone runs it.

What it can't reach: the judges see the Slurm files, sssd.conf and the pods' specs, not what a
script or a job_submit.lua does when it runs (scripts are drawn, their text is not judged); the
invariants of the Kubernetes objects beyond the pods (Services, NetworkPolicies, RBAC) are other
tests'; a value is drawn per field, so a rule across many entries (duplicates over thousands of
accounts, sizes near the caps) is out of its budget; a Kubernetes pass-through object is walked
five levels deep (tests/fuzz/slots.py, KUBE_DEPTH); and the Slurm reading is the judges' model of Slurm's
parser (tests/slurm/ runs the real daemons)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import re
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sunk import keys, podgate, roles
from sunk.manifests.auth import allowed_secret_names, secret_purposes
from sunk.manifests.sssd import SssdTextError, render_sssd_conf
from sunk.podgate import stack_objects
from sunk.render import render_slurm_files
from sunk.spec import SpecError, identity, slurmtext
from sunk.spec.cluster import ClusterSpec
from sunk.spec.scheduling import EXTRA_SLURM_FILES
from sunk.spec.slurmtext import OVERRIDABLE
from sunk.stackfile import parse_config
from tests.fuzz.schema_stacks import BASE, draw_stack
from tests.support.slurmread import refused_lines, slurm_keys, slurm_read

EXAMPLES = int(os.environ.get("SUNK_FUZZ_EXAMPLES", "200"))

# ----- the judges, written apart from the code they judge so they don't share its blind spots
# (tests.support.slurmread reads a file as Slurm's parser does). `violations` lists what a
# stack that validate accepted must never produce.
BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
"""Characters some reader (Python's splitlines, an editor, a YAML reader) breaks a line at."""
REPEATABLE = {"nodename", "nodeset", "partitionname", "prologslurmctld", "epilogslurmctld", "name", "switchname"}
REPEATABLE |= {"blockname", "required", "optional", "include"}


def conf_violations(name: str, body: str) -> list[str]:
    """What Slurm would read otherwise than sunk wrote in one of sunk's files (or, for a file the
    stack brings whole, a password key)."""
    own = name not in EXTRA_SLURM_FILES
    found = []
    for n, line in enumerate(body.split("\n"), 1):
        if any(ch in line for ch in BREAKS) or any(ord(ch) < 32 and ch != "\t" for ch in line):
            found.append(f"{name}:{n}: a character some reader breaks a line at, or a control character")
    counts: dict[str, int] = {}
    found += [f"{name}:{n}: a second key on a line that starts no record (Slurm refuses the file)"
              for n in refused_lines(body)]  # fmt: skip
    for first, joined, text in slurm_read(body):
        if joined > 1:
            found.append(f"{name}:{first}: Slurm joins {joined} lines into one")
        words = slurm_keys(text)
        if any("pass" in k for k in words):
            found.append(f"{name}:{first}: a password key {words}")
        if words:
            counts[words[0]] = counts.get(words[0], 0) + 1
    tunable = OVERRIDABLE.get(name, frozenset())
    if own and name != "plugstack.conf":  # SPANK's `required <plugin> [args]` lines hold no keys
        found += [
            f"{name}: {key} set {c} times" for key, c in counts.items() if c > 1 and key not in REPEATABLE | tunable
        ]
    else:
        found = [f for f in found if "password" in f]
    return found


def _pods(objs: Iterable[dict[str, Any]]) -> Iterable[tuple[str, dict[str, Any], dict[str, Any]]]:
    for m in objs:
        if m["kind"] == "Pod":
            yield m["metadata"]["name"], m["metadata"], m["spec"]
        elif m["kind"] in ("Deployment", "StatefulSet", "Job", "DaemonSet"):
            yield m["metadata"]["name"], m["spec"]["template"]["metadata"], m["spec"]["template"]["spec"]


def _volume_secrets(volume: dict[str, Any]) -> list[str]:
    """The Secrets a volume holds: its own, or those a projected volume gathers."""
    own = [(volume.get("secret") or {}).get("secretName")]
    projected = [(s.get("secret") or {}).get("name") for s in (volume.get("projected") or {}).get("sources") or []]
    return [ref for ref in own + projected if ref]


def pod_violations(spec: ClusterSpec) -> list[str]:
    """No pod gets a capability, privilege, hostPath or one of the cluster's Secrets that its
    role's row (sunk.roles) lacks, and no container a Secret the row does not allow that
    container, whatever the gate said."""
    objs, _ = stack_objects(spec)
    ours = secret_purposes(spec)
    found = []
    for name, meta, pod in _pods(objs):
        row = roles.ROLES[(meta.get("labels") or {})[keys.APP_COMPONENT]]
        allowed = allowed_secret_names(spec, row.name)
        volume_secrets = {v["name"]: _volume_secrets(v) for v in pod.get("volumes", [])}
        for c in [*pod.get("initContainers", []), *pod.get("containers", [])]:
            own = allowed_secret_names(spec, row.name, c["name"])  # this container's, not the pod's
            for mount in c.get("volumeMounts", []):
                for ref in volume_secrets.get(mount["name"], []):
                    if ref in ours and ref not in own:
                        found.append(f"{name}/{c['name']}: mounts Secret {ref}")
            ctx = c.get("securityContext") or {}
            added = set((ctx.get("capabilities") or {}).get("add") or ())
            if not added <= row.containers.get(c["name"], frozenset()):
                found.append(f"{name}/{c['name']}: adds {sorted(added)}")
            if ctx.get("privileged") and c["name"] not in row.privileged:
                found.append(f"{name}/{c['name']}: privileged")
            for env in c.get("env", []):
                env_ref = ((env.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
                if env_ref in ours and env_ref not in own:
                    found.append(f"{name}/{c['name']}: env from Secret {env_ref}")
        for v in pod.get("volumes", []):
            found += [
                f"{name}: volume of Secret {ref}" for ref in _volume_secrets(v) if ref in ours and ref not in allowed
            ]
            if "hostPath" in v and row.host_paths != roles.POLICY:
                found.append(f"{name}: hostPath")
    return found


SSSD_SECTIONS = ["[sssd]", "[nss]", "[pam]", "[ssh]", "[domain/ldap]"]
INI_LINE = re.compile(r"(#.*|\[[^\]]+\]|[a-z_]+ = \S.*|)")


def sssd_violations(body: str) -> list[str]:
    """sssd.conf read the way an INI reader does: only sunk's five sections, in order, each line a
    comment, a section or `key = value`, no key twice in a section, nothing any reader breaks at."""
    found: list[str] = []
    sections: list[str] = []
    keys_seen: set[str] = set()
    for n, line in enumerate(body.split("\n"), 1):
        if any(ch in line for ch in BREAKS) or any(ord(ch) < 32 or 0x7F <= ord(ch) <= 0x9F for ch in line):
            found.append(f"sssd.conf:{n}: a character some reader breaks a line at, or a control character")
        if not INI_LINE.fullmatch(line) or line[:1].isspace():
            found.append(f"sssd.conf:{n}: not a comment, a section or `key = value`: {line[:40]!r}")
        if line.startswith("["):
            sections.append(line)
            keys_seen = set()
        elif " = " in line and not line.startswith("#"):
            key = line.split(" = ")[0]
            found += [f"sssd.conf:{n}: {key} twice in {sections[-1:]}"] if key in keys_seen else []
            keys_seen.add(key)
    return found + ([] if sections == SSSD_SECTIONS else [f"sssd.conf: sections {sections}"])


def violations(spec: ClusterSpec) -> list[str]:
    """Everything a validated stack must never produce (no traceback is the caller's to catch)."""
    found = []
    if spec.auth.ldap is not None:
        found += sssd_violations(render_sssd_conf(spec.auth.ldap))
    for name, body in render_slurm_files(spec).items():
        if name.endswith(".conf"):
            found += conf_violations(name, body)
    return found + pod_violations(spec)


# ----- the stacks: drawn from the spec's JSON schema (tests/fuzz/schema_stacks.py)
stacks = st.randoms(use_true_random=False).map(draw_stack)
"""Hypothesis hands the draw its own Random, so a failing stack shrinks as the draw's choices do."""
PATH = re.compile(r"^[A-Za-z(][\w.:\[\]()/-]*(\.|\[|:| )")


REFUSED = ["(refused, every problem naming its field)"]
"""What `judge` answers for a stack validate refused as it should."""


def judge(doc: dict[str, Any], operator: Any) -> list[str]:
    """[] when validate accepted the stack and the invariants hold, REFUSED when it refused it
    naming a field for every problem; else what broke. A traceback propagates."""
    try:
        spec, _ = parse_config({"sunk:cluster": doc, "sunk:operator": operator}, "fuzz")
    except SpecError as err:
        unnamed = [p for p in err.problems if not PATH.match(p)]
        problems = [f"refused without a field: {p!r}" for p in unnamed] + (
            [] if err.problems else ["refused, no problem"]
        )
        return problems or REFUSED
    except SssdTextError as err:  # the load-time check missed what the writer then refused
        return [f"a traceback from the sssd.conf writer: {err}"]
    return violations(spec)


def _run(max_examples: int) -> dict[str, int]:
    """Run the fuzzer; how many stacks validate refused (each problem naming a field) and
    accepted (every invariant held)."""
    counts = {"refused": 0, "accepted": 0}

    @settings(
        max_examples=max_examples,
        database=None,
        derandomize=True,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(stacks)
    def run(stack: tuple[dict[str, Any], Any]) -> None:
        found = judge(*stack)
        assert found in ([], REFUSED)
        counts["refused" if found == REFUSED else "accepted"] += 1

    run()
    return counts


def test_fuzz_every_accepted_stack_keeps_the_invariants() -> None:
    counts = _run(EXAMPLES)
    print(
        f"fuzz: {sum(counts.values())} stacks, {counts['refused']} refused naming fields, {counts['accepted']} accepted"
    )
    assert counts["accepted"] > 0 and counts["refused"] > 0, counts


FOUND: dict[str, tuple[dict[str, Any], Any]] = {
    # 2000-example run: a key set twice by verbatim lines (Slurm keeps the last, silently).
    "a verbatim key set twice": (
        {**BASE, "controller": {"extraSlurmConf": ["ConstrainDevices=1", "ConstrainDevices=1"]}},
        False,
    ),
    # 3000-example run: a byte-order mark passed plugstackConf's pattern and the writer refused it
    # at render (a traceback).
    "BOM in a plugstack line": ({**BASE, "extraConfig": {"plugstackConf": ["optional x.so \ufeff"]}}, False),
    # The corpus classes the fuzzer was built from, kept as examples too.
    "continuation into EnforcePartLimits": ({**BASE, "controller": {"extraSlurmConf": ["MessageTimeout=30\\"]}}, False),
    "escaped password key": ({**BASE, "controller": {"extraSlurmConf": ["Storage\\Pass=x"]}}, False),
    "NEL in a line": ({**BASE, "controller": {"extraSlurmConf": ["A=1\x85PreemptType=preempt/none"]}}, False),
    # Real slurmctld and slurmdbd: a second key on a line that starts no record is a parse error
    # (every daemon exits); the judge took every key of a line as set.
    "a second key on a line": (
        {**BASE, "controller": {"extraSlurmConf": ["MessageTimeout=30 EnforcePartLimits=NO"]}},
        False,
    ),
    # 10,000-example run: a blank after '=' makes the next word the value (one key to Slurm and
    # to the writer), so a password line sat in slurm.conf as ConstrainDevices's value.
    "a password key as another key's value": (
        {**BASE, "controller": {"extraSlurmConf": ["ConstrainDevices= StoragePass=1"]}},
        False,
    ),
    "ALL on sshd": ({**BASE, "login": {"securityContext": {"capabilities": {"add": ["ALL"]}}}}, False),
    # The schema-drawn fuzzer, its first runs: a password word on a PartitionName line, which the
    # hand-picked injections never tried (they drew OverSubscribe and Hidden only).
    "a password key as a partition word": (
        {**BASE, "partitions": [{**BASE["partitions"][0], "extra": ["JobCompPass=1"]}]},
        False,
    ),
}
"""Stacks the fuzzer once found breaking an invariant (kept, since its database does not survive a
fresh clone); filled by hand from a failing run's falsifying example."""


@pytest.mark.parametrize("name", sorted(FOUND))
def test_found_examples_keep_the_invariants(name: str) -> None:
    assert judge(*FOUND[name]) in ([], REFUSED)


def _without_continuation_check(text: str, *, comment: bool = False) -> str | None:
    return _ORIGINAL_TEXT_PROBLEM(text.rstrip().rstrip("\\") or "x", comment=comment)


_ORIGINAL_TEXT_PROBLEM = slurmtext.text_problem

_SECRET_PROBLEMS = podgate._secret_problems


def _per_pod_only(spec: ClusterSpec, row: roles.Role, pod: dict[str, Any]) -> list[str]:
    """The Secret check as it was before it went per container: every container of a role may
    reach what any of them may."""
    pooled = dataclasses.replace(row, container_secrets=dict.fromkeys(row.containers, row.secrets))
    return _SECRET_PROBLEMS(spec, pooled, pod)


class _Everything(frozenset[str]):
    def __contains__(self, key: object) -> bool:
        return True


GUARDS = {
    # Each guard alone, switched off: the fuzzer must find a stack that gets past it within the
    # CI budget, or it would not find a hole where that guard is missing.
    "continuation check": (slurmtext, "text_problem", _without_continuation_check),
    "secret-key check": (slurmtext, "is_secret_key", lambda key: False),
    "one-key-per-line check": (slurmtext, "MULTI_KEY", _Everything()),
    "pod gate: container grants": (podgate, "_container_problems", lambda row, c: []),
    "pod gate: Secrets per container": (podgate, "_secret_problems", _per_pod_only),
    "sssd.conf check": (identity, "sssd_text_problem", lambda value: None),
}


PROOF_SEEDS = 10
PROOF_BUDGET = 2000
"""Stacks drawn per seed before a guard counts as missed: fixed, so a seed that misses is a
generator to improve, not a budget to raise."""


@contextlib.contextmanager
def _switched_off(guards: Iterable[str]) -> Iterator[None]:
    saved = [(GUARDS[g][0], GUARDS[g][1], getattr(GUARDS[g][0], GUARDS[g][1])) for g in guards]
    try:
        for g in guards:
            module, name, stand_in = GUARDS[g]
            setattr(module, name, stand_in)
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)


def _judged(stack: tuple[dict[str, Any], Any], off: Iterable[str] = ()) -> list[str]:
    with _switched_off(off):
        try:
            return judge(*stack)
        except Exception as err:  # a traceback is a find too: never a traceback is an invariant
            return [f"traceback: {err!r}"]


def _accepted(stack: tuple[dict[str, Any], Any]) -> bool:
    try:
        parse_config({"sunk:cluster": stack[0], "sunk:operator": stack[1]}, "fuzz")
    except SpecError:
        return False
    return True


def find_missing_guards(seed: int, budget: int) -> dict[str, int]:
    """Draw `budget` stacks from `seed`; for each guard, the index of the first stack that the
    fuzzer, run with that guard alone switched off, would report. Each stand-in only lets more
    through, so only a stack validate refuses can get past a guard switched off, and a stack still
    refused with every unfound guard off is refused with any one of them off: neither is judged
    guard by guard."""
    rng = random.Random(seed)
    found: dict[str, int] = {}
    for index in range(budget):
        stack = draw_stack(rng)
        try:
            if _accepted(stack):
                continue  # what an accepted stack renders is the invariant test's to judge
        except Exception as err:  # never a traceback: say how to draw the stack again
            raise AssertionError(f"seed {seed}, stack {index}: {err!r}") from err
        todo = [g for g in GUARDS if g not in found]
        if _judged(stack, todo) == REFUSED:
            continue
        found.update({g: index for g in todo if _judged(stack, [g]) not in ([], REFUSED)})
        if len(found) == len(GUARDS):
            break
    return found


def _proof_seeds() -> list[int]:
    given_seeds = os.environ.get("SUNK_FUZZ_SEEDS")
    if given_seeds:
        return [int(s) for s in given_seeds.split(",")]
    return [random.SystemRandom().randrange(2**32) for _ in range(PROOF_SEEDS)]


def test_the_fuzzer_finds_each_guard_missing_on_every_seed() -> None:
    """The mutation proof: each guard switched off in turn, the fuzzer reports a stack that gets
    past it, on each of ten seeds drawn fresh every run (printed; SUNK_FUZZ_SEEDS=a,b,... replays
    them), within PROOF_BUDGET stacks per seed."""
    seeds = _proof_seeds()
    print(f"fuzz proof: seeds {','.join(map(str, seeds))}, budget {PROOF_BUDGET} stacks per seed")
    missed = []
    for seed in seeds:
        found = find_missing_guards(seed, PROOF_BUDGET)
        print(f"fuzz proof: seed {seed}: " + ", ".join(f"{g} at {found.get(g)}" for g in sorted(GUARDS)))
        missed += [f"seed {seed}: {g}" for g in sorted(GUARDS) if g not in found]
    assert not missed, f"missed (replay with SUNK_FUZZ_SEEDS={','.join(map(str, seeds))}): {missed}"
