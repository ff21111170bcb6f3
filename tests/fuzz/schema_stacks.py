"""Stacks drawn from the spec's own JSON schema (ClusterSpec's, with the Kubernetes definitions its
pass-through fields name), not from a list of fields: every field the models have is a slot the
fuzzer can write, with the hostile values of its kind.

A draw starts from a stack that validates: the fuzzer's small base or a test fixture stack, as
written or with every feature the other stacks have grafted on (a directory, an external
database, scripts), then writes one or two slots. Which slots is weighted by sink: each slot gets
the class of what it reaches, read from the schema itself (the `x-sunk-kubernetes-type` marks and
the Kubernetes definitions reach pod specs; a description naming SSSD or an `ldap_` option reaches
sssd.conf; one naming a script reaches scripts; one naming a `.conf` file or a Slurm key reaches
the Slurm files), and the classes are drawn as often as CLASS_WEIGHT says. Inside a class, a slot
whose text goes into a file as written (lines, `Key=Value` words) and a slot naming what the role
table governs (a Secret reference, a capability added; `aims`) weigh more, and so does everything
inside a POD_SINKS type.

Values come from the fixture stacks (what they hold at the same place or under the same field
name), changed once in a hostile way (`near_miss`: a character inserted, a tail that continues or
comments a line, a second `Key=Value` word, a key swapped for a password key or one sunk renders),
so that a draw gets past every check but the one it aims at; from sunk's own tables (the Secrets
the cluster makes, those held for another container of the pod first; the capabilities the role
table grants; the keys sunk renders; sunk's label keys); from Slurm-shaped lines; and from values
hostile as a whole (empty, huge, `..` paths, reserved names, odd CIDRs, huge and negative numbers,
each bound of the schema and one past it).

A draw is a function of a `random.Random`, so a seed replays it (the mutation proof prints its
seeds); hypothesis hands in its own Random so that it can shrink what it finds."""

from __future__ import annotations

import copy
import random
from functools import cache
from typing import Any

import yaml

from sunk import keys, roles
from sunk.manifests.auth import secret_purposes
from sunk.spec import SpecError
from sunk.spec.slurmtext import MULTI_KEY, OVERRIDABLE, RENDERED
from sunk.stackfile import parse_config
from tests.fuzz.slots import Path, Slot, draw_slots, first_variant, kind_of, nodes_at, pod_secrets, sink_of
from tests.support.stacks import FIXTURE_STACKS

BASE: dict[str, Any] = {
    "name": "research",
    "tenant": "acme",
    "nodesets": [
        {"name": "cpu", "cpus": 4, "memoryMib": 8192},
        {"name": "gpu", "cpus": 16, "memoryMib": 65536, "gpus": {"type": "h100", "count": 2}},
    ],
    "partitions": [{"name": "batch", "nodesets": ["cpu", "gpu"], "default": True}],
    "qos": [{"name": "low"}],
    "accounts": [{"name": "lab", "users": ["alice"]}],
}
POLICY = {"policy": {"imagePrefixes": ["ghcr.io/sunk-dev/"], "hostPaths": ["/data"]}}

# ----- what the corpus holds: real values per place and per field name


def _corpus() -> list[tuple[dict[str, Any], Any]]:
    stacks = [(copy.deepcopy(BASE), False)]
    for path in sorted(FIXTURE_STACKS.glob("Pulumi.*.yaml")):
        config = yaml.safe_load(path.read_text())["config"]
        stacks.append((config["sunk:cluster"], config.get("sunk:operator", False)))
    return stacks


def _harvest(value: Any, path: Path, known: dict[Path, Any], out: dict[Path, list[Any]]) -> None:
    out.setdefault(path, []).append(value)
    if isinstance(value, list):
        for item in value:
            _harvest(item, (*path, "[]"), known, out)
    elif isinstance(value, dict):
        for name, sub in value.items():
            _harvest(sub, (*path, name) if (*path, name) in known else (*path, "{}"), known, out)


def _accepted(doc: dict[str, Any], operator: Any) -> bool:
    try:
        parse_config({"sunk:cluster": doc, "sunk:operator": operator}, "fuzz")
    except SpecError:
        return False
    return True


def _enriched(doc: dict[str, Any], operator: Any, corpus: list[tuple[dict[str, Any], Any]]) -> dict[str, Any]:
    """`doc` with every section another corpus stack has and it lacks (a directory, an external
    database, scripts...), each kept where the stack still validates with it: a base with every
    feature on, so that a reference drawn later has the most to aim at."""
    rich = copy.deepcopy(doc)
    for other, _ in corpus:
        for section in sorted(set(other) - set(rich)):
            trial = {**rich, section: copy.deepcopy(other[section])}
            if _accepted(trial, operator):
                rich = trial
    return rich


@cache
def bases() -> tuple[tuple[dict[str, Any], Any], ...]:
    """The corpus stacks, and each of them with every feature the others have."""
    corpus = _corpus()
    return tuple(corpus + [(_enriched(doc, operator, corpus), operator) for doc, operator in corpus])


@cache
def seen() -> tuple[dict[Path, list[Any]], dict[str, list[Any]]]:
    """Values the corpus holds at each place, and under each field name."""
    at: dict[Path, list[Any]] = {}
    for doc, _ in bases():
        _harvest(doc, (), nodes_at(), at)
    named: dict[str, list[Any]] = {}
    for path, values in at.items():
        if path and path[-1] not in ("[]", "{}"):
            named.setdefault(path[-1], []).extend(values)
    return at, named


Secrets = dict[str, frozenset[str]]
"""A cluster's Secrets by name -> the purposes they serve (sunk.manifests.auth.secret_purposes)."""


@cache
def secret_names() -> tuple[Secrets, ...]:
    """Per base, every Secret its cluster makes or names: what a pod reference aims at."""
    out: list[Secrets] = []
    for doc, operator in bases():
        spec, _ = parse_config({"sunk:cluster": doc, "sunk:operator": operator}, "fuzz")
        out.append({name: frozenset(purposes) for name, purposes in secret_purposes(spec).items()})
    return tuple(out)


# ----- hostile values by kind
HOSTILE = [
    ["\n", "\r", "\x0b", "\x0c", "\x1c", "\x00", "\x1b", "\x7f", "\t"],  # ASCII line breaks and controls
    ["\x85", "\u2028", "\u2029"],  # Unicode's line breaks: Python's splitlines and editors break there
    ["\x9b", "\ufeff", "\u200b", "\u00a0"],  # a C1 control, invisibles
    ["\\", "#", "=", " ", '"', "'", "[s]", ",", ":", "*", "%", "{", "}"],  # Slurm's, INI's and YAML's syntax
    ["$(id)", "`id`", ";", "|", "&", "..", "../", "/"],  # the shell's, and paths'
]
"""Hostile characters by class, each class drawn as often: a field's own pattern catches the
common ones; the rarer Unicode breaks and invisibles are what slips past a pattern."""
EXTREMES = ["", " ", "x" * 300, "..", "../../etc", "/", "-rf", "-", "0", "-1", "default", "kube-system", "root",
            "normal", "all", "where", "none", "UNLIMITED", "24856-00:00:00", "9" * 20, "0.0.0.0/0", "10.0.0.1",
            "10.0.0.0/255.0.0.0", "fe80::1%eth0/64", "::/0", "10.0.0.0/33"]  # fmt: skip
"""Values that are hostile as a whole: empty, huge, reserved names, Slurm's own words, odd CIDRs."""
PASSWORD_KEYS = ["StoragePass", "AccountingStoragePass", "JobCompPass", "Storage\\Pass", "storagepass"]
SLURM_KEYS = sorted(
    {k for ks in RENDERED.values() for k in ks}
    | MULTI_KEY
    | {k for ks in OVERRIDABLE.values() for k in ks}
    | {"MessageTimeout", "DebugFlags", "CommitDelay", "PMIxDebug", "MaxRAMPercent"}
)
"""Keys sunk renders, record keys, keys a verbatim line may set, and a few Slurm knows but sunk
never renders."""
SETTABLE = sorted({k for ks in OVERRIDABLE.values() for k in ks} | {"MessageTimeout", "DebugFlags", "CommitDelay",
                  "PMIxDebug", "MaxRAMPercent"}) + PASSWORD_KEYS  # fmt: skip
"""Keys a verbatim line may set in some file, and password keys however spelled: lines that get
past every check but the one a guard makes."""
CAPABILITIES = sorted({c for r in roles.ROLES.values() for cs in r.containers.values() for c in cs}
                      | {"ALL", "SYS_ADMIN", "NET_ADMIN", "NET_RAW"})  # fmt: skip
LABEL_KEYS = sorted(v for v in vars(keys).values() if isinstance(v, str) and "/" in v and " " not in v)
PATHS = ["/", "/etc", "/data", "/data/x", "/data/../etc", "/var/run/docker.sock", "/dev", "/proc", "/home/%u"]
NUMBERS = [0, -1, 1, 2, 7, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 10**30]


def _pick(rng: random.Random, values: list[Any]) -> Any:
    return copy.deepcopy(values[rng.randrange(len(values))])


def plain(rng: random.Random, path: Path, node: dict[str, Any]) -> Any:
    """A value the corpus would write here: what it holds at this place or under this name, else
    the schema's default or a minimal value of the kind."""
    at, named = seen()
    kind = kind_of(node)
    same_name = named.get(path[-1], []) if path and kind not in ("object", "map", "any") else []
    fits = [v for v in at.get(path, []) + same_name if _fits(v, kind, node)]
    if fits:
        return _pick(rng, fits)
    if kind == "enum":
        return _pick(rng, node.get("enum") or [node.get("const")])
    if "default" in node and node["default"] is not None:
        return copy.deepcopy(node["default"])
    if kind == "object":
        return {name: plain(rng, (*path, name), first_variant(sub)) for name, sub in node["properties"].items()
                if name in node.get("required", ())}  # fmt: skip
    if kind == "array":
        return [plain(rng, (*path, "[]"), first_variant(node["items"]))] if node.get("minItems") else []
    if kind in ("map", "any"):
        return {}
    if kind in ("integer", "number"):
        return max(int(node.get("minimum", 1)), 1)
    if kind == "boolean":
        return False
    return "x"


def minimal(rng: random.Random, path: Path, node: dict[str, Any]) -> Any:
    """A new list item: only its required fields, each as the corpus writes it, so that the slot
    drawn inside it is the item's one distinguishing part (a volume's one source)."""
    if kind_of(node) != "object":
        return plain(rng, path, node)
    return {name: plain(rng, (*path, name), first_variant(sub)) for name, sub in node["properties"].items()
            if name in node.get("required", ())}  # fmt: skip


def _fits(value: Any, kind: str, node: dict[str, Any]) -> bool:
    if kind == "enum":
        return value in (node.get("enum") or [node.get("const")])
    want = {"object": dict, "map": dict, "any": dict, "array": list, "string": str, "boolean": bool}.get(kind)
    if kind in ("integer", "number"):
        return isinstance(value, int) and not isinstance(value, bool)
    return want is not None and isinstance(value, want)


def slurm_line(rng: random.Random, *, clean: bool = False) -> str:
    """A line shaped as Slurm reads one: a key or two, a separator, a value, maybe a tail that
    continues or comments the line."""
    words = []
    for _ in range(1 if clean else rng.choice([1, 1, 1, 2])):
        key = rng.choice(SLURM_KEYS if rng.random() < 0.4 else SETTABLE)
        if rng.random() < 0.2:
            at = rng.randrange(1, len(key))
            key = key[:at] + "\\" + key[at:]
        if clean:
            words.append(f"{rng.choice(SETTABLE[: -len(PASSWORD_KEYS)])}={rng.choice(['1', 'yes', '30'])}")
            break
        value = rng.choice(["1", "yes", "30", "none", "a,b", "", rng.choice(rng.choice(HOSTILE))])
        words.append(f"{key}{rng.choice(['=', '=', ' = ', '+='])}{value}")
    tail = "" if clean else rng.choice(["", "", "", "\\", "\\ ", " # note", "\\\\", "\\\t"])
    return " ".join(words) + tail


def _vocabulary(path: Path, node: dict[str, Any], names: Secrets) -> list[str]:
    """The values a reference of this kind aims at: the cluster's Secrets (those the pod holds
    for another container than the one written to, more often), the capabilities the role table
    grants; [] where no table says."""
    parent = next((p for p in reversed(path[:-1]) if p not in ("[]", "{}")), "")
    if parent in ("secretKeyRef", "secret", "secretRef") and path[-1] in ("name", "secretName"):
        held = pod_secrets(path)
        others = [n for n, purposes in names.items() if purposes <= held]
        return [*others, *others, *others, *names, "s3"]
    if parent == "capabilities":
        return CAPABILITIES
    return []


def _tokens(rng: random.Random, path: Path, node: dict[str, Any], sink: str, names: Secrets) -> str:
    if sink == "pod" and rng.random() < 0.3:
        return rng.choice([*CAPABILITIES, *PATHS, *LABEL_KEYS, *sorted(names)])
    if sink == "slurm" or rng.random() < 0.3:
        return rng.choice([*SLURM_KEYS, *PASSWORD_KEYS])
    return rng.choice([*LABEL_KEYS, *PATHS, *EXTREMES])


def text(rng: random.Random, path: Path, node: dict[str, Any], sink: str, names: Secrets) -> str:
    words = _vocabulary(path, node, names)
    if words and rng.random() < 0.85:
        return str(rng.choice(words))
    r = rng.random()
    base = plain(rng, path, node if kind_of(node) == "string" else {"type": "string"})
    if not isinstance(base, str) or (base == "x" and sink == "slurm"):
        base = slurm_line(rng, clean=True) if sink == "slurm" else "x"
    if r < 0.15:
        return base
    if r < 0.75:
        return near_miss(rng, base, sink)
    if r < 0.85 and sink != "slurm":
        return _tokens(rng, path, node, sink, names)
    return slurm_line(rng) if sink == "slurm" or rng.random() < 0.5 else rng.choice(EXTREMES)


def near_miss(rng: random.Random, base: str, sink: str) -> str:
    """A value the corpus holds with one hostile change: a character inserted, a tail that
    continues or comments the line, a second `Key=Value` word, or its key swapped for another
    (a password key, a key sunk renders)."""
    op = rng.randrange(4) if sink == "slurm" else rng.choice([0, 0, 0, 0, 0, 0, 0, 1, 2, 3])
    if op == 0:
        at = rng.randrange(len(base) + 1)
        return base[:at] + rng.choice(rng.choice(HOSTILE)) + base[at:]
    if op == 1:
        return base + rng.choice(["\\", "\\", "\\ ", " # note", "\\\\", "\\\t"])
    if op == 2:
        return f"{base} {slurm_line(rng, clean=True)}"
    _, sep, rest = base.partition("=")
    key = rng.choice(rng.choice([PASSWORD_KEYS, SETTABLE, SLURM_KEYS]))
    return f"{key}={rest or '1'}" if sep else base


def value(rng: random.Random, slot_path: Path, node: dict[str, Any], sink: str, names: Secrets,
          depth: int = 0) -> Any:  # fmt: skip
    """A value for one slot, hostile as its kind allows."""
    kind = kind_of(node)
    if rng.random() < 0.15 or depth > 2:
        return plain(rng, slot_path, node)
    if kind == "enum":
        choices = node.get("enum") or [node.get("const")]
        return _pick(rng, choices) if rng.random() < 0.85 else text(rng, slot_path, node, sink, names)
    if kind == "string":
        return text(rng, slot_path, node, sink, names)
    if kind in ("integer", "number"):
        bounds = [node[k] + d for k in ("minimum", "maximum") if k in node for d in (-1, 0, 1)]
        return rng.choice([*NUMBERS, *bounds, plain(rng, slot_path, node)])
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "array":
        item = first_variant(node["items"]) if isinstance(node.get("items"), dict) else {"type": "string"}
        count = rng.choice([1, 1, 2])
        return [value(rng, (*slot_path, "[]"), item, sink, names, depth + 1) for _ in range(count)]
    if kind == "map":
        sub = first_variant(node["additionalProperties"])
        out = plain(rng, slot_path, node)
        out = out if isinstance(out, dict) else {}
        for _ in range(rng.choice([1, 1, 2])):
            key = (
                text(rng, (*slot_path, "{}"), {"type": "string"}, sink, names)
                if rng.random() < 0.4
                else _key(rng, slot_path)
            )
            out[key] = value(rng, (*slot_path, "{}"), sub, sink, names, depth + 1)
        return out
    if kind == "object":
        out = plain(rng, slot_path, node)
        if not isinstance(out, dict):
            out = {}
        fields = list(node["properties"])
        for name in rng.sample(fields, min(len(fields), rng.choice([1, 1, 2]))):
            sub = first_variant(node["properties"][name])
            out[name] = value(rng, (*slot_path, name), sub, sink_of(sub, sink), names, depth + 1)
        return out
    return plain(rng, slot_path, node)


def _key(rng: random.Random, path: Path) -> str:
    at, _ = seen()
    keys_here = [str(k) for v in at.get(path, []) if isinstance(v, dict) for k in v]
    return rng.choice(keys_here or [*LABEL_KEYS, "mpi.conf", "site", "a"])


# ----- writing a slot into a stack


def _node(path: Path) -> dict[str, Any]:
    found = [n for n in nodes_at().get(path, []) if kind_of(n) != "any"] or nodes_at().get(path, [{"type": "any"}])
    return found[0]


def put(rng: random.Random, doc: dict[str, Any], slot: Slot, new: Any) -> None:
    """Write `new` at the slot, making what leads there from what the corpus holds. An item of a
    top-level list (a NodeSet, a partition) is mostly one that exists, since the rest of the stack
    names them and a new one would be an orphan; an item of a list inside (a volume, an env var)
    is mostly new, since it stands alone and one of a kind (a volume's one source) is what the
    slot writes."""
    holder: Any = doc
    path = slot.path
    for i, step in enumerate(path[:-1]):
        here = path[: i + 1]
        if step == "[]":
            if holder and rng.random() < (0.8 if i == 1 else 0.15):
                holder = holder[rng.randrange(len(holder))]
            else:
                holder.append(_unique(minimal(rng, here, _node(here)), holder))
                holder = holder[-1]
        elif step == "{}":
            if holder and rng.random() < 0.7:
                holder = holder[rng.choice(sorted(holder))]
            else:
                key = _key(rng, path[:i])
                holder[key] = plain(rng, here, _node(here))
                holder = holder[key]
        else:
            if not isinstance(holder.get(step), (dict, list)):
                holder[step] = plain(rng, here, _node(here))
            holder = holder[step]
        if not isinstance(holder, (dict, list)):
            return  # the corpus holds something else here (a scalar form): leave it
    last = path[-1]
    if last == "[]" and isinstance(holder, list):
        if holder and rng.random() < 0.5:
            holder[rng.randrange(len(holder))] = new
        else:
            holder.append(new)
    elif last == "{}" and isinstance(holder, dict):
        holder[_key(rng, path[:-1]) if not holder or rng.random() < 0.5 else rng.choice(sorted(holder))] = new
    elif isinstance(holder, dict):
        holder[last] = new


def _unique(item: Any, siblings: list[Any]) -> Any:
    """A new list item whose text fields differ from its siblings' (names and mount paths must)."""
    if isinstance(item, dict):
        for name, value in item.items():
            taken = {s.get(name) for s in siblings if isinstance(s, dict) and isinstance(s.get(name), str)}
            if isinstance(value, str) and value in taken:
                item[name] = next(f"{value}{n}" for n in range(2, 99) if f"{value}{n}" not in taken)
    return item


def draw_stack(rng: random.Random) -> tuple[dict[str, Any], Any]:
    """A stack: a corpus stack with one to three slots written."""
    # The bases with every feature on are drawn twice as often: more for a reference to reach.
    plain_count = len(bases()) // 2
    index = rng.choices(range(len(bases())), [1.0] * plain_count + [2.0] * (len(bases()) - plain_count))[0]
    doc, operator = copy.deepcopy(bases()[index])
    if operator is False and rng.random() < 0.15:  # a policy added (one taken away refuses its hostPaths)
        operator = copy.deepcopy(POLICY)
    for slot in draw_slots(rng):
        put(rng, doc, slot, value(rng, slot.path, slot.node, slot.sink, secret_names()[index]))
    return doc, operator
