#!/bin/sh
# slurmdbd's pod, in every render: the database guard (sunk/dbguard.py decides,
# sunk/manifests/upgrade.py renders; docs/upgrading.md). Run from the mariadb image, beside
# the backup volume while slurm.upgradeFrom is set (else `dir` is in the pod's scratch space and
# holds nothing). It measures what it sees (the dump, the database's schema against the
# record taken before the dump, the markers slurmdbd's start script writes, the release that
# last ran on the database: sunk's record in it, or cluster_table's rpc_version), looks the state up
# in the table its render filled in from sunk.dbguard.plan, and does what the table says (`db`:
# accounting-db.sh, its action given as its argument). mode:
#   start    once, before slurmdbd starts: the dump and its record, or the refusal
#   watch    once: after a failed conversion, the restore
#   sidecar  start, then `ready` is written (the container's startup probe), then watch every
#            `period` seconds for as long as the pod runs, touching `alive` before each look (the
#            liveness probe). Restarted within its pod (`ready`
#            there already, in the pod's emptyDir), it skips start: slurmdbd may be converting
#            right now, and start would take the moved schema for an interrupted conversion
set -eu
mode=@MODE@
dir=@DIR@
name=@NAME@
release=@RELEASE@
source=@SOURCE@
protocols=@PROTOCOLS@
period=@PERIOD@
ready=@READY@
alive=@ALIVE@
start_table=@START_TABLE@
start_messages=@START_MESSAGES@
watch_table=@WATCH_TABLE@
watch_messages=@WATCH_MESSAGES@
db=@DB@
base="$dir/$name"

flag() { if [ -e "$1" ]; then echo 1; else echo 0; fi; }

name_of() {
  for pair in $protocols; do
    [ "${pair%%=*}" = "$1" ] && { echo "${pair#*=}"; return; }
  done
  echo "an unknown release (protocol $1)"
}

# `measure`: the state's key, and `ran`/`how` (recorded's).
measure() {
  now=$(sh -c "$db" accounting-db schema)
  if [ "$now" = none ]; then
    compared=none
  elif [ ! -s "$base.schema" ]; then
    compared=unrecorded
  elif [ "$now" = "$(cat "$base.schema")" ]; then
    compared=same
  else
    compared=other
  fi
  seen=$(sh -c "$db" accounting-db release)
  case "$seen" in
    "release "*) ran=${seen#release }; how="sunk's record in the database" ;;
    "protocol "*) ran=$(name_of "$((${seen#protocol } / 256))"); how="cluster_table's rpc_version (nothing recorded yet)" ;;
    *) ran=""; how="" ;;
  esac
  if [ -z "$ran" ]; then
    against=none
  elif [ "$ran" = "$release" ] && [ "${seen%% *}" = protocol ]; then
    against=derived
  elif [ "$ran" = "$release" ]; then
    against=release
  elif [ "$ran" = "$source" ]; then
    against=source
  else
    against=other
  fi
  key="$(flag "$base.sql.sha256")-$compared-$(flag "$base.failed")-$(flag "$base.restored")-$(flag "$base.served")-$against"
}

do_restore() {
  sh -c "$db" accounting-db restore
  now=$(sh -c "$db" accounting-db schema)
  if [ -s "$base.schema" ] && [ "$now" != "$(cat "$base.schema")" ]; then
    echo "db-guard: the restored database's schema ($now) is not the one recorded before the dump ($(cat "$base.schema"))" >&2
    exit 1
  fi
  echo "db-guard: the database's schema is the one recorded before the dump ($now)"
  if [ -e "$base.failed" ]; then
    { cat "$base.failed"; echo "restored from $base.sql at $(date -u +%Y-%m-%dT%H:%M:%SZ)"; } > "$base.restored"
  fi
}

set_aside() {
  aside="$base.aside-$(date -u +%Y%m%dT%H%M%SZ)"
  mkdir -p "$aside"
  for suffix in sql sql.sha256 schema failed restored served; do
    if [ -e "$base.$suffix" ]; then mv "$base.$suffix" "$aside/"; fi
  done
  echo "db-guard: the dump, its record and the markers set aside in $aside"
}

# `decide TABLE MESSAGES [PHASE]`: the state's row of the table, done.
decide() {
  measure
  if [ "${3:-}" = start ] && [ -n "$ran" ]; then
    echo "db-guard: the accounting database last ran Slurm $ran ($how); this slurmdbd is $release"
  fi
  row=$(printf '%s\n' "$1" | grep "^$key " || true)
  if [ -z "$row" ]; then
    echo "db-guard: state $key is not in the table" >&2
    exit 1
  fi
  acts=$(echo "$row" | cut -d' ' -f2)
  said=$(printf '%s\n' "$2" | grep "^$(echo "$row" | cut -d' ' -f3) " | cut -d' ' -f2-)
  refuse=no
  for act in $(echo "$acts" | tr ',' ' '); do
    case "$act" in
      record)
        sh -c "$db" accounting-db schema > "$base.schema.partial"
        mv "$base.schema.partial" "$base.schema"
        echo "db-guard: schema before the conversion: $(cat "$base.schema")" ;;
      dump) sh -c "$db" accounting-db backup ;;
      restore) do_restore ;;
      set-aside) set_aside ;;
      mark)
        sh -c "$db" accounting-db mark "$release"
        echo "db-guard: recorded in the database: Slurm $release runs on it" ;;
      refuse) refuse=yes ;;
      -) ;;
      *) echo "db-guard: unknown action $act" >&2; exit 2 ;;
    esac
  done
  if [ "$refuse" = yes ]; then
    echo "db-guard: $said" >&2
    exit 1
  fi
  if [ -n "$said" ]; then echo "db-guard: $said"; fi
}

mkdir -p "$dir"
# The database server may start beside this pod (the in-cluster MariaDB on a first deploy): wait
# for it, saying so once, rather than fail and be restarted with a growing back-off.
if ! sh -c "$db" accounting-db ping; then
  echo "db-guard: waiting for the database server to answer"
  until sh -c "$db" accounting-db ping; do sleep 2; done
fi
case "$mode" in
  start) decide "$start_table" "$start_messages" start ;;
  watch) decide "$watch_table" "$watch_messages" ;;
  sidecar)
    if [ ! -e "$ready" ]; then
      decide "$start_table" "$start_messages" start
      touch "$ready"
    fi
    while :; do
      touch "$alive"
      sleep "$period"
      decide "$watch_table" "$watch_messages"
    done ;;
  *) echo "db-guard: unknown mode $mode" >&2; exit 2 ;;
esac
