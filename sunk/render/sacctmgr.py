"""accounting-setup.sh: the sacctmgr commands that make slurmdbd's QOS, accounts and users what
the spec says. Run by the accounting-setup Job (and the test harness) after the cluster is
registered; `set -eu`, so anything sacctmgr refuses fails the Job with sacctmgr's reason.

Facts measured 2026-11 on Slurm 24.11 that shape the script:
- `add qos|account|user` of something that exists fails ("Nothing new added", "Already existing
  account"): each add is guarded by an existence check;
- `modify` of association fields (Fairshare, QOS, DefaultQOS) succeeds whether or not a value
  changes, but `set Parent=` or `set Description=` to the value it has fails ("Data has not
  changed"): parents are moved only when they differ, and an account is marked when sunk adds it, and an account the spec names that an
  administrator made is managed but never marked, so never deleted;
- `QOS=` makes an account inherit its parent's QOS again, `DefaultQOS=-1` clears the default,
  `Flags=-1` clears QOS flags, `MaxWall=-1`, `PreemptMode=cluster`, `UsageFactor=1` are defaults;
- a user's default account can't lose its association while the user has others, and an account
  with running jobs can't be deleted: both fail loudly."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from sunk import naming
from sunk.spec.cluster import ClusterSpec
from sunk.spec.scheduling import TRES_NAMES, AccountSpec
from sunk.spec.slurmtext import shell_word

MARK = "sunk-managed"
"""Description of every QOS and account sunk creates: what it may change and remove (never
`normal`, `root` or an administrator's own)."""
QOS_MARK = MARK


def render_sacctmgr(spec: ClusterSpec) -> list[list[str]]:
    """The settings of each QOS of the spec as one `modify` each, every field sunk manages given
    (unset ones at Slurm's default, so a field cleared in the spec is cleared in slurmdbd), then
    the preemption lists (once every QOS exists), then the root account's QOS list."""
    cmds: list[list[str]] = []
    tracked = [t for t in TRES_NAMES if t != "gres/gpu" or spec.has_gpus]
    for q in spec.qos:
        words = [f"Priority={q.priority}", f"PreemptMode={q.preempt_mode or 'cluster'}"]
        words.append(f"MaxWall={q.max_wall or -1}")
        words.append(f"UsageFactor={q.usage_factor if q.usage_factor is not None else 1:g}")
        words.append("Flags=DenyOnLimit" if q.deny_on_limit else "Flags=-1")
        words += [f"{field}={_tres(limits, tracked)}" for field, limits in q.tres_limits.items()]
        words.append(f"MaxJobsPerUser={_limit(q.max_jobs_per_user)}")
        words.append(f"MaxSubmitJobsPerUser={_limit(q.max_submit_jobs_per_user)}")
        mark = [] if q.name == "normal" else [f"Description={MARK}"]
        cmds.append(["modify", "qos", "where", f"name={q.name}", "set", *mark, *words, "Preempt="])
    for q in spec.qos:
        if q.preempt:
            cmds.append(["modify", "qos", "where", f"name={q.name}", "set", f"Preempt={','.join(q.preempt)}"])
    if spec.qos:
        all_qos = ",".join(["normal", *(q.name for q in spec.qos if q.name != "normal")])
        cmds.append(["modify", "account", "where", "name=root", "set", f"QOS+={all_qos}"])
    return cmds


def _tres(limits: dict[str, int], tracked: list[str]) -> str:
    """Every TRES sunk may limit, the spec's value or -1 (Slurm's "no limit"): a limit the spec
    drops is cleared, since sacctmgr changes only the TRES a command names."""
    return ",".join(f"{t}={limits.get(t, -1)}" for t in tracked)


def _wait_for_gpu_tres() -> list[str]:
    """slurmdbd knows the gres/gpu TRES only once slurmctld has registered with
    AccountingStorageTRES=gres/gpu (measured 2026-11 on 24.11: a QOS limit naming it fails before), and
    the Job may run first: wait for it, at most 10 minutes. A slurmdbd that does not answer
    still fails the script at once (`set -e`)."""
    return [
        "# QOS limits name gres/gpu, which exists once slurmctld has registered (it may still be",
        "# waiting for the QOS created above: a partition's QOS).",
        "tries=0",
        "while :; do",
        "  tres=$(sacctmgr -n -P show tres format=type,name)",
        "  printf '%s\\n' \"$tres\" | grep -qx 'gres|gpu' && break",
        '  tries=$((tries + 1)); [ "$tries" -le 120 ] || { echo "gres/gpu never appeared in slurmdbd" >&2; exit 1; }',
        "  echo 'waiting for slurmctld to register gres/gpu'; sleep 5",
        "done",
    ]


def _limit(value: int | None) -> int:
    return -1 if value is None else value


def parents_first(accounts: list[AccountSpec]) -> list[AccountSpec]:
    """Accounts ordered so each comes after its parent (the spec refuses cycles)."""
    parent = {a.name: a.parent for a in accounts}
    depth: dict[str, int] = {}
    for account in accounts:  # each depth computed once: a chain of n accounts is n steps
        walk, seen, at = [], set(), account.name
        while at in parent and at not in depth and at not in seen:  # (the spec refuses cycles)
            walk.append(at)
            seen.add(at)
            at = parent[at]
        d = depth.get(at, -1)
        for name in reversed(walk):
            d += 1
            depth[name] = d
    order = {id(a): i for i, a in enumerate(accounts)}
    return sorted(accounts, key=lambda a: (depth[a.name], order[id(a)]))


def associations(spec: ClusterSpec) -> list[tuple[str, str]]:
    """(account, user) pairs the spec wants: its users, and the runtime's Slurm user on root and
    on every account (placeholder jobs charge the account a pod names)."""
    pairs = [("root", naming.RUNTIME_SLURM_USER)]
    for account in spec.accounts:
        pairs.append((account.name, naming.RUNTIME_SLURM_USER))
        pairs += [(account.name, user) for user in account.users if user != naming.RUNTIME_SLURM_USER]
    return pairs


def default_accounts(spec: ClusterSpec) -> dict[str, str]:
    """Each user's default account: the first account of the spec that lists them."""
    out = {naming.RUNTIME_SLURM_USER: "root"}
    for account in spec.accounts:
        for user in account.users:
            out.setdefault(user, account.name)
    return out


def render_account_commands(spec: ClusterSpec) -> list[list[str]]:
    """Accounts (parents first) with every field sunk manages but the parent, then users and
    default accounts. Adds and parent moves are guarded in the script; these are the settings,
    given in full each time."""
    cluster = f"cluster={spec.name}"
    cmds: list[list[str]] = []
    for a in parents_first(spec.accounts):
        where = ["where", f"name={a.name}", cluster, "set"]
        qos = ",".join(a.qos)
        default = a.default_qos or "-1"
        cmds.append(["modify", "account", *where, f"Fairshare={a.fairshare}", f"QOS={qos}"])
        cmds.append(["modify", "account", *where, f"DefaultQOS={default}"])
    for user, account in default_accounts(spec).items():
        cmds.append(["modify", "user", "where", f"name={user}", cluster, "set", f"DefaultAccount={account}"])
    return cmds


def shlex_words(words: Iterable[str]) -> str:
    """Names (or `account:user` pairs) joined by spaces for the script's lists: each name checked as
    shell_word checks it, the list quoted once for the shell."""
    words = list(words)
    for word in words:
        for name in word.split(":"):
            shell_word(name)
    return shlex.quote(" ".join(words))


def render_sacctmgr_script(spec: ClusterSpec) -> str:
    """Makes slurmdbd's QOS, accounts and users match the spec and fails loudly (`set -eu`)."""
    q = shell_word  # every name the script holds: no sacctmgr keyword, quoted once for the shell
    names = [qos.name for qos in spec.qos]
    cluster = shlex.quote(spec.name)  # only ever in `cluster=...`, where sacctmgr reads no keyword
    lines = [
        "#!/bin/sh",
        "# Rendered by sunk: makes accounting's QOS, accounts and users match the spec",
        "# (edits, cleared fields, removals of what sunk created).",
        "set -eu",
        f"cluster={cluster}",
        f"wanted_qos={shlex_words(names)}",
        f"wanted_accounts={shlex_words(a.name for a in spec.accounts)}",
        f"wanted_pairs={shlex_words(f'{a}:{u}' for a, u in associations(spec))}",
        'qos_exists() { sacctmgr -n -P show qos format=name | grep -qx "$1"; }',
        "assoc_exists() {",
        '  sacctmgr -n -P show assoc where cluster="$cluster" account="$1" user="$2" format=account,user'
        ' | grep -qx "$1|$2"',
        "}",
        "parent_of() {",
        '  sacctmgr -n -P show assoc where cluster="$cluster" account="$1" format=user,parentname'
        " | awk -F'|' '$1 == \"\" {print $2}'",
        "}",
        "",
        "# QOS",
        *(f"qos_exists {q(n)} || sacctmgr -i add qos {q(n)}" for n in names if n != "normal"),
        *(_wait_for_gpu_tres() if spec.has_gpus and spec.qos else []),
        *(" ".join(["sacctmgr", "-i", *c]) for c in render_sacctmgr(spec)),
        "",
        "# Accounts, parents first",
        *(
            f'assoc_exists {q(a.name)} "" || sacctmgr -i add account {q(a.name)} cluster="$cluster" '
            f"Description={MARK} Parent={q(a.parent)}"
            for a in parents_first(spec.accounts)
        ),
        "# (`modify ... set Parent=` to the parent it has fails: only moves are applied.)",
        *(
            f'[ "$(parent_of {q(a.name)})" = {q(a.parent)} ] || '
            f'sacctmgr -i modify account where name={q(a.name)} cluster="$cluster" set Parent={q(a.parent)}'
            for a in parents_first(spec.accounts)
        ),
        "",
        "# Users (the runtime's Slurm user on root and every account)",
        *(
            f'assoc_exists {q(a)} {q(u)} || sacctmgr -i add user {q(u)} account={q(a)} cluster="$cluster"'
            for a, u in associations(spec)
        ),
        *(" ".join(["sacctmgr", "-i", *c]) for c in render_account_commands(spec)),
        "",
        f"# Associations in the spec's accounts and those marked {MARK} that the spec no longer lists: other",
        "# accounts first, then default accounts (Slurm refuses to remove a default while others remain).",
        f"marked=$(sacctmgr -n -P show account format=account,description | awk -F'|' '$2 == \"{MARK}\" "
        "{print $1}' | tr '\\n' ' ')",
        "defaults=$(sacctmgr -n -P show user format=user,defaultaccount | tr '\\n' ' ')",
        "drop_users() {",
        '  sacctmgr -n -P show assoc where cluster="$cluster" format=account,user |',
        "  while IFS='|' read -r a u; do",
        '    [ -n "$u" ] || continue',
        '    case " $marked $wanted_accounts " in *" $a "*) ;; *) continue ;; esac',
        '    case " $wanted_pairs " in *" $a:$u "*) continue ;; esac',
        '    case " $defaults " in *" $u|$a "*) is_default=yes ;; *) is_default=no ;; esac',
        '    [ "$is_default" = "$1" ] || continue',
        '    sacctmgr -i delete user name="$u" account="$a" cluster="$cluster"',
        "  done",
        "}",
        "drop_users no",
        "drop_users yes",
        f"# Accounts marked {MARK} that the spec no longer lists (refused while they have jobs).",
        "dropped=''",
        "for a in $marked; do",
        '  case " $wanted_accounts " in *" $a "*) continue ;; esac',
        '  if assoc_exists "$a" ""; then dropped="${dropped:+$dropped,}$a"; fi',
        "done",
        "# An account someone else made under a dropped one would be left with a parent that is gone",
        "# (measured on 24.11): refused, saying which, rather than orphaned.",
        'for a in $(echo "$dropped" | tr , " "); do',
        '  for k in $(sacctmgr -n -P show assoc where cluster="$cluster" format=account,parentname,user |'
        ' awk -F"|" -v p="$a" \'$2 == p && $3 == "" {print $1}\'); do',
        '    case ",$dropped," in *",$k,"*) continue ;; esac',
        '    echo "account $a: account $k, which sunk does not manage, is under it; move $k'
        ' (sacctmgr modify account $k set parent=...) or keep $a in the spec" >&2',
        "    exit 1",
        "  done",
        "done",
        '[ -z "$dropped" ] || sacctmgr -i delete account name="$dropped" cluster="$cluster"',
        "",
        f"# QOS marked {MARK} that the spec no longer lists: off the root account, then deleted.",
        f"sacctmgr -n -P show qos format=name,description | awk -F'|' '$2 == \"{MARK}\" {{print $1}}' |",
        "while read -r q; do",
        '  case " $wanted_qos " in *" $q "*) continue ;; esac',
        '  sacctmgr -i modify account where name=root set QOS-="$q"',
        '  sacctmgr -i delete qos "$q"',
        "done",
    ]
    return "\n".join(lines) + "\n"
