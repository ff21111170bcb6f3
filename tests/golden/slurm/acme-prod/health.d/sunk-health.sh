#!/bin/sh
# sunk's Slurm HealthCheckProgram (sunk/manifests/health.py renders it; slurm.conf names it).
# slurmd runs it as root every HealthCheckInterval, with SLURMD_NODENAME and nothing else in its
# environment, and kills it after 60 s. It runs the checks of `checks` in order, stops at the
# first failure and drains the node with `<prefix> <check>: <detail>`; when every check passes it
# resumes the node only if its drain reason starts with <prefix>. A drain by anyone else (an
# administrator, the syncer's `sunk:`) is never undone nor overwritten. Always exits 0: slurmd
# would otherwise keep an unregistered node from registering.
#
# `checks`: one check per line, fields separated by a space; a disk path, the only field that may
# hold one, comes last and `read` gives it the rest of the line:
#   <nodesets, comma-separated, or *> <name> <timeout s> <kind> [<argument>...]
# kinds: gpus <device prefix> | disk <min free MiB> <path> | memory <min MiB> | nvidia-smi | dcgm
#        | user (runs <checks_dir>/<name>.sh, a file rendered from the stack: no text of a check
#        ever reaches this script)
set -u
prefix=sunk-health:
checks='h100 gpus 5 gpus /dev/nvidia
* disk 5 disk 102400 /scratch
* disk 5 disk 1024 /tmp
* memory 5 memory 8192
* nvidia-smi 10 nvidia-smi
h100 infiniband 5 user'
checks_dir=/etc/slurm/health.d
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
node=${SLURMD_NODENAME:-$(hostname -s)}

# The node as slurmctld sees it. Unknown (not registered yet): nothing to drain or resume.
record=$(scontrol show node "$node" 2>/dev/null) || exit 0
field() { printf '%s\n' "$record" | sed -n "s/^.*[[:space:]]$1=\\([^[:space:]]*\\).*\$/\\1/p" | head -n 1; }
state=$(field State)
features=$(field AvailableFeatures)
gres=$(field Gres)
reason=$(printf '%s\n' "$record" | sed -n 's/^[[:space:]]*Reason=\(.*\) \[[^]]*\]$/\1/p' | head -n 1)

applies() {
  [ "$1" = "*" ] && return 0
  for want in $(printf '%s' "$1" | tr ',' ' '); do
    case ",$features," in *",$want,"*) return 0 ;; esac
  done
  return 1
}

# Runs "$@" with a time limit; its output's last line becomes $detail.
limited() {
  limit=$1
  shift
  out=$(timeout -k 2 "$limit" "$@" 2>&1)
  rc=$?
  detail=$(printf '%s\n' "$out" | sed '/^[[:space:]]*$/d' | tail -n 1 | cut -c 1-160)
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    detail="timed out after ${limit}s"
  elif [ "$rc" -ne 0 ] && [ -z "$detail" ]; then
    detail="exit status $rc"
  fi
  return "$rc"
}

# The GPUs slurmctld has for this node (Gres=gpu:h100:8(S:0-1),shard:32): MIG instances aside,
# whose device files only NVML knows.
expected_gpus() {
  printf '%s\n' "$gres" | tr ',' '\n' | awk -F: '
    $1 == "gpu" { n = $NF; sub(/\(.*/, "", n); if ($2 ~ /^[0-9]+g\.[0-9]+gb/) mig = 1; else total += n }
    END { if (mig) print "mig"; else print total + 0 }'
}

check_gpus() {
  want=$(expected_gpus)
  [ "$want" = mig ] && return 0
  have=0
  for f in "$1"*; do
    case ${f#"$1"} in '' | *[!0-9]*) continue ;; esac
    [ -e "$f" ] && have=$((have + 1))
  done
  [ "$have" -ge "$want" ] && return 0
  detail="$have of $want GPU device files ${1}N present"
  return 1
}

check_disk() {
  # A hung network mount must not hang the program: slurmd would kill it before any drain.
  free=$(timeout -k 1 5 df -Pk "$1" 2>/dev/null | awk 'NR == 2 { print int($4 / 1024) }')
  if [ -z "$free" ]; then
    detail="$1 is not mounted or readable"
    return 1
  fi
  [ "$free" -ge "$2" ] && return 0
  detail="$1 has $free MiB free, below $2"
  return 1
}

check_memory() {
  avail=$(awk '$1 == "MemAvailable:" { print int($2 / 1024) }' /proc/meminfo)
  [ "${avail:-0}" -ge "$1" ] && return 0
  detail="MemAvailable ${avail:-0} MiB, below $1"
  return 1
}

failed=""
while read -r scope name timeout kind arg1 arg2; do
  [ -n "$name" ] || continue
  applies "$scope" || continue
  detail=""
  case $kind in
    gpus) check_gpus "$arg1" || failed="$name: $detail" ;;
    disk) check_disk "$arg2" "$arg1" || failed="$name: $detail" ;;
    memory) check_memory "$arg1" || failed="$name: $detail" ;;
    nvidia-smi)
      command -v nvidia-smi >/dev/null 2>&1 || continue
      limited "$timeout" nvidia-smi -L || failed="$name: $detail"
      ;;
    dcgm)
      command -v dcgmi >/dev/null 2>&1 || continue
      limited "$timeout" dcgmi diag -r 1 || failed="$name: $detail"
      ;;
    user) limited "$timeout" "$checks_dir/$name.sh" || failed="$name: $detail" ;;
    *) failed="$name: unknown check kind $kind" ;;
  esac
  [ -n "$failed" ] && break
done <<EOF
$checks
EOF

ours() { case $reason in "$prefix"*) return 0 ;; esac; return 1; }
case $state in *DRAIN*) drained=yes ;; *) drained=no ;; esac

if [ -n "$failed" ]; then
  want="$prefix $failed"
  # Someone else's drain stays as it is; ours is updated when the failure changed.
  if [ "$drained" = no ] || { ours && [ "$reason" != "$want" ]; }; then
    scontrol update nodename="$node" state=drain reason="$want" || echo "sunk-health: drain of $node failed" >&2
  fi
  echo "$want"
elif [ "$drained" = yes ] && ours; then
  scontrol update nodename="$node" state=resume || echo "sunk-health: resume of $node failed" >&2
  echo "sunk-health: all checks pass; resumed $node"
fi
exit 0
